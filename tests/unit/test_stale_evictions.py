"""An eviction waits for the API budget; what happened meanwhile can make it unneeded."""

from __future__ import annotations

import copy
from typing import Any

from extender.kube import resources as r
from extender.kube.client import RequestBudget
from extender.kube.controller import Controller

V2 = "kueue.x-k8s.io/v1beta2"
CONFIG: list[tuple[r.Resource, dict[str, Any]]] = [
    (r.RESOURCE_FLAVORS, {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "f"}}),
    (
        r.CLUSTER_QUEUES,
        {
            "apiVersion": V2,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4}]}
                        ],
                    }
                ],
            },
        },
    ),
    (
        r.LOCAL_QUEUES,
        {
            "apiVersion": V2,
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "default"},
            "spec": {"clusterQueue": "cq"},
        },
    ),
]


def workload(name: str, priority: int, created: str) -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": created,
        },
        "spec": {
            "queueName": "q",
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]
                        }
                    },
                }
            ],
        },
    }


class RecordingClient:
    """Answers status patches with the object patched, and records each one."""

    def __init__(self) -> None:
        self.budget = RequestBudget(1e9, 10**9)
        self.objects: dict[str, dict[str, Any]] = {}
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def patch(self, resource, name, patch, namespace=None, **_):
        key = f"{namespace}/{name}"
        self.patches.append((name, patch))
        obj = copy.deepcopy(self.objects[key])
        obj["status"] = patch.get("status", {})
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        self.objects[key] = obj
        return copy.deepcopy(obj)

    def evicted(self) -> list[str]:
        return [
            name
            for name, patch in self.patches
            if any(
                c.get("type") == "Evicted" and c.get("status") == "True"
                for c in (patch.get("status") or {}).get("conditions") or []
            )
        ]


def preempting_controller() -> tuple[Controller, RecordingClient]:
    """`low` runs in the whole ClusterQueue; `high` has just arrived and needs all of it."""
    client = RecordingClient()
    ctl = Controller(client)  # type: ignore[arg-type]
    for resource, obj in CONFIG:
        ctl._apply(resource, "ADDED", copy.deepcopy(obj))
    low = workload("low", 1, "2026-01-01T00:00:00Z")
    client.objects["default/low"] = low
    ctl._apply(r.WORKLOADS, "ADDED", copy.deepcopy(low))
    ctl._schedule()
    assert "default/low" in ctl.state.admitted
    high = workload("high", 100, "2026-01-01T00:00:01Z")
    client.objects["default/high"] = high
    ctl._apply(r.WORKLOADS, "ADDED", copy.deepcopy(high))
    return ctl, client


def finished(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = "99"
    out["status"]["conditions"] = [
        *out["status"].get("conditions", []),
        {"type": "Finished", "status": "True", "reason": "Succeeded", "message": ""},
    ]
    return out


def dropped(ctl: Controller) -> float | None:
    """What /metrics says: evictions decided but not written."""
    return ctl.metrics.registry.get_sample_value("tower_evictions_dropped_total")


def test_the_eviction_is_written_when_nothing_happened_meanwhile():
    ctl, client = preempting_controller()
    ctl._schedule()
    assert client.evicted() == ["low"]
    assert "default/high" in ctl.state.admitted
    assert dropped(ctl) == 0


def test_a_victim_that_finished_while_its_eviction_waited_is_not_evicted():
    ctl, client = preempting_controller()
    # The runner reported `low` finished while the cycle's writes waited for the budget.
    ctl.events.put((r.WORKLOADS, "MODIFIED", finished(client.objects["default/low"])))
    ctl._schedule()
    assert client.evicted() == []
    assert dropped(ctl) == 1
    assert "default/high" in ctl.state.admitted  # the quota `low` gave back is high's


def test_a_victim_stays_when_its_preemptor_was_deleted_meanwhile():
    ctl, client = preempting_controller()
    ctl.events.put((r.WORKLOADS, "DELETED", client.objects["default/high"]))
    ctl._schedule()
    assert client.evicted() == []
    assert dropped(ctl) == 1
    holder = ctl.state.admitted["default/low"]
    assert holder.evicting is False  # a later preemptor may choose it again
    # A later preemptor does: the victim is evictable again.
    again = workload("again", 100, "2026-01-01T00:00:02Z")
    client.objects["default/again"] = again
    ctl._apply(r.WORKLOADS, "ADDED", copy.deepcopy(again))
    ctl._schedule()
    assert client.evicted() == ["low"]
    assert "default/again" in ctl.state.admitted

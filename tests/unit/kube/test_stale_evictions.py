"""An eviction waits for the API budget; what happened meanwhile can make it unneeded."""

from __future__ import annotations

from typing import Any

from extender.kube.api import resources as r
from tests.fakes import FakeKube, controller_over, watch_event

V2 = "kueue.x-k8s.io/v1beta2"
CONFIG: list[dict[str, Any]] = [
    {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "f"}},
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
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
                }
            ],
        },
    },
    {
        "apiVersion": V2,
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": "default"},
        "spec": {"clusterQueue": "cq"},
    },
]


def workload(name: str, priority: int, created: str) -> dict[str, Any]:
    return {
        "apiVersion": V2,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created},
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


def evicted(fake: FakeKube) -> list[str]:
    return [key.split("/")[1] for key in fake.turned_true("Evicted")]


def preempting():
    """`low` runs in the whole ClusterQueue; `high` has just arrived and needs all of it."""
    fake = FakeKube()
    for obj in CONFIG:
        fake.add(obj)
    fake.add(workload("low", 1, "2026-01-01T00:00:00Z"))
    ctl, _ = controller_over(fake)
    ctl.schedule()
    assert ctl.state.is_admitted("default/low")
    fake.add(workload("high", 100, "2026-01-01T00:00:01Z"))
    watch_event(ctl, fake, r.WORKLOADS, "default/high")
    ctl.take_in()
    return ctl, fake


def finish(fake: FakeKube, key: str) -> None:
    def done(obj: dict[str, Any]) -> None:
        obj["status"]["conditions"].append(
            {"type": "Finished", "status": "True", "reason": "Succeeded", "message": ""}
        )

    fake.change(r.WORKLOADS, key, done)


def dropped(ctl) -> float | None:
    """What /metrics says: evictions decided but not written."""
    return ctl.metrics.registry.get_sample_value("tower_evictions_dropped_total")


def test_the_eviction_is_written_when_nothing_happened_meanwhile():
    ctl, fake = preempting()
    ctl.schedule()
    assert evicted(fake) == ["low"]
    assert dropped(ctl) == 0
    ctl.turn()  # the bare Workload was requeued in the same write: its quota is free
    assert ctl.state.is_admitted("default/high")


def test_a_victim_that_finished_while_its_eviction_waited_is_not_evicted():
    ctl, fake = preempting()
    # The runner reported `low` finished while the cycle's writes waited for the budget.
    finish(fake, "default/low")
    watch_event(ctl, fake, r.WORKLOADS, "default/low")
    ctl.schedule()
    assert evicted(fake) == []
    assert dropped(ctl) == 1
    ctl.turn()
    assert ctl.state.is_admitted("default/high")  # the quota `low` gave back is high's


def test_a_victim_stays_when_its_preemptor_was_deleted_meanwhile():
    ctl, fake = preempting()
    fake.objects.pop(("workloads", "default/high"))
    watch_event(ctl, fake, r.WORKLOADS, "default/high")
    ctl.schedule()
    assert evicted(fake) == []
    assert dropped(ctl) == 1
    assert ctl.state.admitted_workload("default/low").evicting is False  # may be chosen again
    # A later preemptor does: the victim is evictable again.
    fake.add(workload("again", 100, "2026-01-01T00:00:02Z"))
    watch_event(ctl, fake, r.WORKLOADS, "default/again")
    ctl.turn()
    assert evicted(fake) == ["low"]
    ctl.turn()
    assert ctl.state.is_admitted("default/again")

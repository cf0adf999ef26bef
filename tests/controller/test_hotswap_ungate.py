"""The topology ungater around a failed TAS node, on the API double (test_node_failure.py's
harness): a pod held by another scheduling gate gets its domain only once it can be scheduled,
and no pod is let through to a host whose Node is not Ready, so a pod for a failing host waits
for its replacement instead of being failed and made again (Kueue v0.19.2's hotswap e2e case
"Should replace a node when it becomes NotReady and pods are Pending").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from extender.kube.api import resources as r
from tests.controller.conftest import Cluster, eventually
from tests.controller.test_node_failure import (
    HOSTNAME,
    PREFERRED_BLOCK,
    Towers,
    admitted_to,
    not_ready,
    set_ready,
    set_up,
    tas_node,
    towers,
    two_blocks,
    unhealthy,
)
from tests.controller.test_node_failure import (
    make_workload as make_tas_workload,
)

TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
DUMMY_GATE = "kueue.x-k8s.io/dummy-gate"  # the artificial gate of Kueue's case


@pytest.fixture
def env(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Towers]:
    with towers(cluster, monkeypatch) as running:
        yield running


def gated_pod(cluster: Cluster, name: str, wl: str, *gates: str) -> str:
    """A pending pod of the Workload (as Tower starts them) behind the topology gate and
    `gates`; its uid."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": {"kueue.x-k8s.io/podset": "worker"},
        "annotations": {
            "kueue.x-k8s.io/workload": wl,
            "kueue.x-k8s.io/podset-unconstrained-topology": "true",
        },
    }
    spec = {
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}],
        "schedulingGates": [{"name": g} for g in (*gates, TOPOLOGY_GATE)],
    }
    made = cluster.admin.create(r.PODS, {"metadata": meta, "spec": spec}, "default")
    return str(made["metadata"]["uid"])


def seen(cluster: Cluster, name: str) -> tuple[tuple[str, ...], str | None, str, str]:
    """What a user reads of the pod: its gates, its nodeSelector's host, phase and uid."""
    obj = cluster.get("pods", name, "default")
    assert obj is not None, f"pod {name} is gone"
    spec = obj.get("spec") or {}
    gates = tuple(g["name"] for g in spec.get("schedulingGates") or ())
    host = (spec.get("nodeSelector") or {}).get(HOSTNAME)
    phase = (obj.get("status") or {}).get("phase") or "Pending"
    return gates, host, phase, obj["metadata"]["uid"]


def remove_gate(cluster: Cluster, name: str, gate: str) -> None:
    obj = cluster.get("pods", name, "default")
    assert obj is not None
    kept = [g for g in obj["spec"].get("schedulingGates") or () if g["name"] != gate]
    cluster.admin.patch(r.PODS, name, {"spec": {"schedulingGates": kept or None}}, "default")


def test_pods_held_by_another_gate_wait_and_go_to_the_replacement_of_a_notready_host(
    cluster: Cluster, env: Towers
) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_tas_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    uids = [gated_pod(cluster, n, "wl1", DUMMY_GATE) for n in ("wl1-0", "wl1-1")]
    running.settle()
    # Still held by the dummy gate: no domain is chosen for them yet.
    for name in ("wl1-0", "wl1-1"):
        assert seen(cluster, name)[:2] == ((DUMMY_GATE, TOPOLOGY_GATE), None)

    set_ready(cluster, "x3", "Unknown", env.clock.now())
    running.node_seen("x3", not_ready)
    for name in ("wl1-0", "wl1-1"):
        remove_gate(cluster, name, DUMMY_GATE)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    eventually(
        lambda: sorted(str(seen(cluster, n)[1]) for n in ("wl1-0", "wl1-1")) == ["None", "x1"],
        10,
        "the pod for x1 let through, the other held",
    )
    running.settle()
    views = [seen(cluster, n) for n in ("wl1-0", "wl1-1")]
    assert all(host != "x3" and phase == "Pending" for _, host, phase, _ in views), views

    running.second_pass()
    admitted_to(cluster, "wl1", ["x1", "x4"])

    def moved() -> bool:
        views = [seen(cluster, n) for n in ("wl1-0", "wl1-1")]
        assert sorted(str(host) for _, host, _, _ in views) == ["x1", "x4"], views
        return True

    eventually(moved, 10, "the same pods on x1 and x4")
    assert [seen(cluster, n)[3] for n in ("wl1-0", "wl1-1")] == uids  # none made again
    assert all(seen(cluster, n)[2] == "Pending" for n in ("wl1-0", "wl1-1"))


def test_a_pod_for_a_notready_host_still_in_use_waits_until_it_is_ready_again(
    cluster: Cluster, env: Towers
) -> None:
    # Two pods on one host: one still runs there, so the NotReady host is not failed for
    # the Workload (TASReplaceNodeOnPodTermination); the other's pod, made again, waits
    # behind its gate rather than being sent where it cannot run and failed.
    set_up(cluster, [tas_node("x3", "b1", "r1", cpu="2"), tas_node("x1", "b1", "r2")])
    running = env.start()
    make_tas_workload(cluster, "wl1", 2, {"required": HOSTNAME})
    admitted_to(cluster, "wl1", ["x3", "x3"])
    gated_pod(cluster, "wl1-0", "wl1")
    eventually(lambda: seen(cluster, "wl1-0")[:2] == ((), "x3"), 10, "wl1-0 let through")
    cluster.admin.patch(r.PODS, "wl1-0", {"spec": {"nodeName": "x3"}}, "default")
    cluster.admin.patch(
        r.PODS, "wl1-0", {"status": {"phase": "Running"}}, "default", subresource="status"
    )
    set_ready(cluster, "x3", "False", env.clock.now())
    running.node_seen("x3", not_ready)
    gated_pod(cluster, "wl1-1", "wl1")
    running.settle()
    assert seen(cluster, "wl1-1")[:3] == ((TOPOLOGY_GATE,), None, "Pending")
    assert unhealthy(cluster, "wl1") == []

    set_ready(cluster, "x3", "True", env.clock.now())
    eventually(lambda: seen(cluster, "wl1-1")[:2] == ((), "x3"), 10, "wl1-1 let through")
    assert seen(cluster, "wl1-1")[2] == "Pending"

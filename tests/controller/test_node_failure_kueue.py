"""Kueue v0.19.2's own node-failure cases, from test/integration/singlecluster/tas/tas_test.go,
run on the API double against Tower's controller (test_node_failure.py's harness). Each test's
id is the Go file and the case's title. Kueue's Workloads, nodes and steps are kept; where
Kueue waits ("Eventually"), the test waits, and where it watches ("Consistently"), the test lets
the controller's loop take its turns and then looks. Kueue's second pass comes a second after
a host is recorded; here it comes when the test moves the clock (`second_pass`).

Adapted: pods carry Tower's podSet label (its index of topology-placed pods reads it; Tower's
own pods always have it); the late-pod case checks the pod on the tainted node, where Kueue's
list by a label its pods do not carry found none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extender.kube.api import objects as o
from extender.kube.api import resources as r
from tests.controller.conftest import Cluster, eventually
from tests.controller.test_node_failure import (
    BLOCK,
    HOSTNAME,
    PREFERRED_BLOCK,
    RACK,
    SkipClock,
    Towers,
    admitted_to,
    delete_pod,
    evicted,
    gone,
    hosts,
    make_workload,
    not_ready,
    one_block,
    pod,
    release_pod,
    set_ready,
    set_up,
    taint,
    tainted,
    towers,
    two_blocks,
    unhealthy,
    workload,
)

GO = "test/integration/singlecluster/tas/tas_test.go"


@pytest.fixture
def env(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Towers]:
    with towers(cluster, monkeypatch) as running:
        yield running


REQUIRED_BLOCK = {"required": BLOCK}
REQUIRED_RACK = {"required": RACK}
ON_POD_TERMINATION = "TASReplaceNodeOnPodTermination"
NO_EXECUTE = {"key": "example.com/failure", "value": "true", "effect": "NoExecute"}
MULTIPLE = "Workload eviction triggered due to multiple TAS assigned node failures, including: "

Case = Callable[[Cluster, Towers], None]
CASES: list[Any] = []


def kueue(title: str) -> Callable[[Case], Case]:
    """One case of tas_test.go, by its title."""

    def add(case: Case) -> Case:
        CASES.append(pytest.param(case, id=f"{GO.rsplit('/', 1)[-1]}: {title}"))
        return case

    return add


def thirty_seconds_ago(clock: SkipClock) -> float:
    return clock.now() - 30  # "making the node NotReady 30s in the past" (NodeFailureDelay)


def evicted_for_node_failures(cluster: Cluster, name: str) -> str:
    """The message of its NodeFailures eviction: on Evicted while it waits, on Requeued once
    it is admitted again (a Workload no job owns is requeued at once)."""

    def message() -> str | None:
        obj = workload(cluster, name)
        for kind in (o.EVICTED, "Requeued"):
            condition = o.condition(obj, kind) or {}
            if condition.get("status") == "True" and condition.get("reason") == "NodeFailures":
                return str(condition["message"])
        return None

    found: str = eventually(message, 20, f"{name} evicted for NodeFailures")
    return found


# ----- "Nodes are created before test with the hostname being the lowest level" -------------


@kueue("should update workload TopologyAssignment when node is removed")
def node_removed(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    cluster.admin.delete(r.NODES, "x3")
    running.node_seen("x3", gone)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    running.second_pass()
    admitted_to(cluster, "wl1", ["x1", "x4"])
    assert unhealthy(cluster, "wl1") == []


@kueue("should mark a NotReady node only when its running pod starts terminating")
def running_pod_terminating(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    pod(cluster, "wl1-pod", "wl1", node="x3", finalizer=True)
    set_ready(cluster, "x3", "False", thirty_seconds_ago(env.clock))
    running.node_seen("x3", not_ready)
    running.second_pass()  # however long one waits, nothing is marked
    assert (unhealthy(cluster, "wl1"), hosts(cluster, "wl1")) == ([], ["x3", "x1"])
    delete_pod(cluster, "wl1-pod")  # terminating: its finalizer holds it
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    running.second_pass()
    admitted_to(cluster, "wl1", ["x1", "x4"])
    release_pod(cluster, "wl1-pod")


@kueue("should update workload TopologyAssignment when node fails")
def node_fails(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    set_ready(cluster, "x3", "False", thirty_seconds_ago(env.clock))
    running.node_seen("x3", not_ready)  # no pod of it runs there: failed at once
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    running.second_pass()
    admitted_to(cluster, "wl1", ["x1", "x4"])
    assert unhealthy(cluster, "wl1") == []


def single_pod_owned(cluster: Cluster, env: Towers, since: float) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    # An owner reference that is not a controller's, as Kueue's AppendOwnerReference makes it;
    # the owner pod exists, for the double collects the garbage as a cluster does.
    owner = cluster.admin.create(
        r.PODS,
        {
            "metadata": {"name": "owner-pod", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
        },
        "default",
    )
    ref = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "owner-pod",
        "uid": owner["metadata"]["uid"],
    }
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK, owner=ref)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    set_ready(cluster, "x3", "False", since)
    running.node_seen("x3", not_ready)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    running.second_pass()
    eventually(lambda: unhealthy(cluster, "wl1") == [], 10, "the record cleared")
    running.second_pass()
    assert hosts(cluster, "wl1") == ["x3", "x1"]  # the pod cannot move: nor does it


@kueue(
    "should keep the TopologyAssignment of a single-Pod-owned workload when node fails and "
    "SkipReassignmentForPodOwnedWorkloads is enabled"
)
def single_pod_owned_fails(cluster: Cluster, env: Towers) -> None:
    single_pod_owned(cluster, env, thirty_seconds_ago(env.clock))


@kueue(
    "should keep the TopologyAssignment of a single-Pod-owned workload when the node is marked "
    "via TASReplaceNodeOnPodTermination"
)
def single_pod_owned_marked(cluster: Cluster, env: Towers) -> None:
    single_pod_owned(cluster, env, env.clock.now())


@kueue("should not panic when unadmitted workload exists during node deletion")
def unadmitted_during_deletion(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    make_workload(cluster, "wl2", 10, PREFERRED_BLOCK)
    eventually(lambda: o.condition(workload(cluster, "wl2"), o.QUOTA_RESERVED), 10, "wl2 waits")
    cluster.admin.delete(r.NODES, "x3")
    running.node_seen("x3", gone)
    running.second_pass()
    admitted_to(cluster, "wl1", ["x1", "x4"])
    assert not o.is_true(workload(cluster, "wl2"), o.QUOTA_RESERVED)


def late_pods_case(cluster: Cluster, env: Towers, then: Callable[[], None]) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl", ["x3", "x1"])
    # createPodsForWorkload(wl, ns, true, false): Pending pods held to their hosts.
    pod(cluster, "wl-0", "wl", selector_host="x3", phase="Pending", finalizer=True)
    pod(cluster, "wl-1", "wl", selector_host="x1", phase="Pending")
    delete_pod(cluster, "wl-0")  # terminating on x3
    delete_pod(cluster, "wl-1")
    set_ready(cluster, "x3", "False", thirty_seconds_ago(env.clock))
    running.node_seen("x3", not_ready)
    running.second_pass()
    admitted_to(cluster, "wl", ["x1", "x4"], "the hot swap")
    assert unhealthy(cluster, "wl") == []
    then()
    running.second_pass()
    assert unhealthy(cluster, "wl") == []  # the late pod on x3 does not record it again
    release_pod(cluster, "wl-0")


@kueue("should not add unhealthy node when node is deleted but late pods exist")
def late_pods_node_deleted(cluster: Cluster, env: Towers) -> None:
    late_pods_case(cluster, env, lambda: cluster.admin.delete(r.NODES, "x3"))


@kueue("should not add unhealthy node when Ready condition is missing but late pods exist")
def late_pods_ready_missing(cluster: Cluster, env: Towers) -> None:
    def then() -> None:
        set_ready(cluster, "x3", "True", env.clock.now())
        set_ready(cluster, "x3", None, env.clock.now())

    late_pods_case(cluster, env, then)


@kueue("should remove node from unhealthyNodes when the node recovers")
def node_recovers(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl1", 2, REQUIRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    set_ready(cluster, "x3", "False", thirty_seconds_ago(env.clock))
    running.node_seen("x3", not_ready)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    set_ready(cluster, "x3", "True", env.clock.now())
    eventually(lambda: unhealthy(cluster, "wl1") == [], 10, "the record taken back")
    assert hosts(cluster, "wl1") == ["x3", "x1"]


@kueue("should remove the node from unhealthyNodes when node reappears")
def node_reappears(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl1", 2, REQUIRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    node = cluster.admin.get(r.NODES, "x3")
    cluster.admin.delete(r.NODES, "x3")
    running.node_seen("x3", gone)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    node["metadata"] = {"name": "x3", "labels": node["metadata"]["labels"]}
    created = cluster.admin.create(r.NODES, node)
    created["status"] = node["status"]
    cluster.admin.update(r.NODES, created, subresource="status")
    eventually(lambda: unhealthy(cluster, "wl1") == [], 10, "the record taken back")


@kueue("should evict workload when multiple assigned nodes are deleted")
def two_deleted(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK, pod_spec={"nodeSelector": {BLOCK: "b1"}})
    admitted_to(cluster, "wl1", ["x3", "x1"])
    cluster.admin.delete(r.NODES, "x3")
    running.node_seen("x3", gone)
    cluster.admin.delete(r.NODES, "x1")
    assert evicted_for_node_failures(cluster, "wl1") == MULTIPLE + "x3, x1"
    assert unhealthy(cluster, "wl1") == []


@kueue("should evict workload when multiple assigned nodes fail")
def two_fail(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    set_ready(cluster, "x3", "False", thirty_seconds_ago(env.clock))
    running.node_seen("x3", not_ready)
    set_ready(cluster, "x1", "False", thirty_seconds_ago(env.clock))
    assert evicted_for_node_failures(cluster, "wl1") == MULTIPLE + "x3, x1"
    assert unhealthy(cluster, "wl1") == []


# ----- "TASNodeFailedReplacementFailFast is enabled" (one block, two racks) ----------------


@kueue("should evict the Workload if no replacement is possible and place it on another rack")
def no_replacement_other_rack(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    make_workload(cluster, "wl1", 2, REQUIRED_RACK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    set_ready(cluster, "x3", "False", thirty_seconds_ago(env.clock))
    running.node_seen("x3", not_ready)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    running.second_pass()
    assert evicted_for_node_failures(cluster, "wl1") == (
        "Workload was evicted as there was no replacement for unhealthy node(s): x3"
    )
    assert unhealthy(cluster, "wl1") == []
    admitted_to(cluster, "wl1", ["x2", "x4"], "wl1 placed on the other rack")


@kueue(
    "should update workload UnhealthyNodes immediately when node has NoExecute taint and "
    "TASReplaceNodeOnPodTermination is disabled"
)
def no_execute_without_pod_termination(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start(feature_gates={ON_POD_TERMINATION: False})
    make_workload(cluster, "wl1", 2, REQUIRED_BLOCK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    pod(cluster, "wl1-0", "wl1", node="x3")  # running: the gate off does not wait for it
    taint(cluster, "x3", NO_EXECUTE)
    running.node_seen("x3", tainted)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")


@kueue(
    "should not evict workload when node has NoSchedule taint, one pod is Running and another "
    "is Terminated"
)
def no_schedule_one_running(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    make_workload(cluster, "wl1", 2, REQUIRED_BLOCK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    pod(cluster, "pod1", "wl1", node="x3", selector_host="x3")
    pod(cluster, "pod2", "wl1", selector_host="x3", phase="Failed")
    taint(
        cluster, "x3", {"key": "example.com/unschedulable", "value": "true", "effect": "NoSchedule"}
    )
    running.node_seen("x3", tainted)
    running.second_pass()
    assert unhealthy(cluster, "wl1") == []


@kueue(
    "should NOT update workload UnhealthyNodes immediately when node has NoExecute taint and "
    "TASReplaceNodeOnPodTermination is enabled"
)
def no_execute_waits_for_pod(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    make_workload(cluster, "wl1", 2, REQUIRED_BLOCK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    pod(cluster, "pod1", "wl1", node="x3", phase="Pending", finalizer=True)
    taint(cluster, "x3", {"key": "example.com/proactive", "value": "true", "effect": "NoExecute"})
    running.node_seen("x3", tainted)
    running.settle()
    assert unhealthy(cluster, "wl1") == []
    delete_pod(cluster, "pod1")
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    release_pod(cluster, "pod1")


@kueue("should selectively recover workload health based on tolerations of remaining taints")
def selective_recovery(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    a = {"key": "example.com/taint-a", "value": "true", "effect": "NoExecute"}
    b = {"key": "example.com/taint-b", "value": "true", "effect": "NoExecute"}
    on_x3 = {"nodeSelector": {HOSTNAME: "x3"}}
    make_workload(
        cluster,
        "wl1",
        1,
        REQUIRED_BLOCK,
        tolerations=[{"operator": "Equal", **a}],
        cpu="100m",
        pod_spec=on_x3,
    )
    make_workload(cluster, "wl2", 1, REQUIRED_BLOCK, cpu="100m", pod_spec=on_x3)
    admitted_to(cluster, "wl1", ["x3"])
    admitted_to(cluster, "wl2", ["x3"])
    taint(cluster, "x3", a, b)
    running.node_seen("x3", tainted)
    eventually(
        lambda: (unhealthy(cluster, "wl1"), unhealthy(cluster, "wl2")) == (["x3"], ["x3"]),
        10,
        "x3 recorded for both",
    )
    taint(cluster, "x3", a)
    eventually(
        lambda: (unhealthy(cluster, "wl1"), unhealthy(cluster, "wl2")) == ([], ["x3"]),
        10,
        "wl1 healthy again, wl2 not",
    )


@kueue("should evict workload when multiple assigned nodes get NoExecute taints")
def two_tainted(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    taint(cluster, "x1", NO_EXECUTE)
    running.node_seen("x1", tainted)
    taint(cluster, "x3", NO_EXECUTE)
    assert evicted_for_node_failures(cluster, "wl1") == MULTIPLE + "x1, x3"
    assert unhealthy(cluster, "wl1") == []


@kueue("should replace a tainted node with a new one within the same block")
def tainted_replaced(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    taint(cluster, "x1", NO_EXECUTE)
    running.node_seen("x1", tainted)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x1"], 10, "x1 recorded")
    running.second_pass()
    eventually(lambda: "x1" not in (hosts(cluster, "wl1") or ["x1"]), 10, "x1 replaced")
    assert len(hosts(cluster, "wl1") or []) == 2
    assert unhealthy(cluster, "wl1") == []


@kueue("should catch and terminate a late pod assigned to a replaced node")
def late_pod_terminated(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    # createPodsForWorkload(wl1, ns, false, false): Pending, held to their hosts, unbound.
    pod(cluster, "wl1-0", "wl1", selector_host="x1", phase="Pending")
    pod(cluster, "wl1-1", "wl1", selector_host="x3", phase="Pending")
    taint(cluster, "x1", {"key": "example.com/failure", "value": "true", "effect": "NoExecute"})
    running.node_seen("x1", tainted)

    def failed_by_kueue(name: str) -> bool:
        current = cluster.get("pods", name, "default") or {}
        status = current.get("status") or {}
        return status.get("phase") == "Failed" and any(
            c.get("type") == "TerminatedByKueue" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )

    eventually(lambda: failed_by_kueue("wl1-0"), 10, "the pod held to x1 failed by Tower")
    assert not failed_by_kueue("wl1-1")
    running.second_pass()
    eventually(lambda: "x1" not in (hosts(cluster, "wl1") or ["x1"]), 10, "x1 replaced")
    assert unhealthy(cluster, "wl1") == []
    pod(cluster, "wl1-late-arriving", "wl1", selector_host="x1", phase="Pending")
    eventually(lambda: failed_by_kueue("wl1-late-arriving"), 10, "the late pod failed")


@kueue("should evict the Workload if no replacement is possible after NoExecute taint")
def no_replacement_after_taint(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    make_workload(cluster, "wl1", 2, REQUIRED_RACK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    taint(cluster, "x1", NO_EXECUTE)
    running.node_seen("x1", tainted)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x1"], 10, "x1 recorded")
    running.second_pass()
    evicted_for_node_failures(cluster, "wl1")
    admitted_to(cluster, "wl1", ["x2", "x4"], "wl1 placed on the other rack")
    assert unhealthy(cluster, "wl1") == []


@kueue("should not evict workload when nodes get NoExecute taints that are tolerated")
def tolerated_taints(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    tolerable = {"key": "example.com/tolerable", "value": "true", "effect": "NoExecute"}
    make_workload(
        cluster, "wl1", 2, PREFERRED_BLOCK, tolerations=[{"operator": "Equal", **tolerable}]
    )
    admitted_to(cluster, "wl1", ["x1", "x3"])
    taint(cluster, "x1", tolerable)
    taint(cluster, "x3", tolerable)
    running.node_seen("x3", tainted)
    running.second_pass()
    assert unhealthy(cluster, "wl1") == []
    assert evicted(cluster, "wl1") is None


@kueue("should evict workload when node has NoSchedule taint and no pods are present")
def no_schedule_no_pods(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start(feature_gates={ON_POD_TERMINATION: False})
    make_workload(cluster, "wl1", 2, REQUIRED_BLOCK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    taint(
        cluster, "x3", {"key": "example.com/unschedulable", "value": "true", "effect": "NoSchedule"}
    )
    running.node_seen("x3", tainted)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")


@kueue(
    "should NOT update UnhealthyNodes immediately when node has NoSchedule taint and a pod is "
    "running"
)
def no_schedule_running_pod(cluster: Cluster, env: Towers) -> None:
    set_up(cluster, one_block())
    running = env.start()
    make_workload(cluster, "wl1", 2, REQUIRED_BLOCK)
    admitted_to(cluster, "wl1", ["x1", "x3"])
    pod(cluster, "pod1", "wl1", node="x3")
    taint(
        cluster, "x3", {"key": "example.com/unschedulable", "value": "true", "effect": "NoSchedule"}
    )
    running.node_seen("x3", tainted)
    running.second_pass()
    assert unhealthy(cluster, "wl1") == []
    delete_pod(cluster, "pod1")
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")


@pytest.mark.parametrize("case", CASES)
def test_kueue_case(case: Case, cluster: Cluster, env: Towers) -> None:
    case(cluster, env)

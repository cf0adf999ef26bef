"""Kueue v0.19.2 test/e2e/tas/baseline/hotswap_test.go, ported case by case.

The eight kind workers of Kueue's TAS cluster are stand-in Nodes (tests/e2e/kueue/tas.py),
so a node's failure is played as Kueue's case plays it on kind, less the docker command: the
Node deleted, tainted, or its Ready condition set Unknown (no kubelet here writes it back).
Neither the node lifecycle controller nor the taint eviction controller acts on this plane,
so the test plays what they do on kind: the unreachable taints on a node whose Ready is
Unknown, and the eviction of pods under a NoExecute taint (tas.py `taint_eviction`). Each
case restores the node it failed, as Kueue's AfterEach does."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.tas import (
    BLOCK,
    EXTRA_RESOURCE,
    PREFERRED,
    RACK,
    REQUIRED,
    SLICE_REQUIRED,
    SLICE_SIZE,
    TOPOLOGY_GATE,
    WORKLOAD_ANNOTATION,
    domains,
    expect_job_unsuspended,
    expect_pods_on_nodes,
    expect_workload_topology_assignment,
    kind_workers,  # noqa: F401 (the module's nodes, by usefixtures)
    restore_node,
    running_pods,
    taint_eviction,
    tas_job,
    tas_queues,
    topology_assignment,
)
from tests.e2e.kueue.util import (
    BEHAVIOR_WAIT_FOR_DELETION,
    BEHAVIOR_WAIT_FOR_DELETION_FAIL_ON_EXIT,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    Cluster,
    consistently,
    eventually,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("kind_workers")]
GO = "tas/baseline/hotswap_test.go"
WHEN = "Hotswap for Topology Aware Scheduling Creating a Job with slices "
TAINTS = WHEN + "with TASReplaceNodeOnNodeTaints enabled "
RESOURCES = {EXTRA_RESOURCE: "1", "cpu": "200m"}
DUMMY_GATE = "kueue.x-k8s.io/dummy-gate"
KIND_BLOCK_1 = ["kind-worker", "kind-worker2", "kind-worker3", "kind-worker4"]


class Restore:
    """The node a case failed (nodeToRestore), made again by the fixture's teardown."""

    def __init__(self) -> None:
        self.name: str | None = None


@pytest.fixture
def node_to_restore(cluster: Cluster) -> Iterator[Restore]:
    restore = Restore()
    yield restore
    if restore.name is not None:
        restore_node(cluster.core, restore.name)


@pytest.fixture
def queue(cluster: Cluster, ns: str, node_to_restore: Restore) -> Iterator[str]:
    with tas_queues(cluster, ns, {EXTRA_RESOURCE: "8", "cpu": "8"}) as cq:
        yield cq


def _sliced_job(ns: str, parallelism: int, slice_level: str) -> dict[str, Any]:
    """ranks-job: preferred block, slices of `parallelism` pods required in `slice_level`."""
    annotations = {PREFERRED: BLOCK, SLICE_REQUIRED: slice_level, SLICE_SIZE: str(parallelism)}
    return tas_job("ranks-job", ns, parallelism=parallelism, completions=parallelism,
                   requests=RESOURCES, pod_annotations=annotations,
                   args=BEHAVIOR_WAIT_FOR_DELETION)  # fmt: skip


def _labelled_job(
    name: str, ns: str, parallelism: int, annotations: dict[str, str]
) -> dict[str, Any]:
    """The taint cases' job: pod label job-name, Indexed, backoffLimit 3, agnhost failing on
    exit."""
    job = tas_job(name, ns, parallelism=parallelism, completions=parallelism,
                  requests=RESOURCES, pod_annotations=annotations,
                  args=BEHAVIOR_WAIT_FOR_DELETION_FAIL_ON_EXIT, indexed=True)  # fmt: skip
    job["spec"]["backoffLimit"] = 3
    job["spec"]["template"]["metadata"]["labels"] = {"job-name": name}
    return job


def _all_running(cluster: Cluster, ns: str, selector: str, count: int) -> list[client.V1Pod]:
    def running() -> list[client.V1Pod]:
        pods = running_pods(cluster, ns, selector)
        assert len(pods) == count, [(p.metadata.name, p.spec.node_name) for p in pods]
        return pods

    return list(eventually(running, MEDIUM_TIMEOUT, "all pods scheduled and running"))


def _pod_on(pods: list[client.V1Pod], node: str) -> client.V1Pod:
    """findPodOnNode."""
    found = [p for p in pods if p.spec.node_name == node]
    assert found, f"no pod running on node {node}"
    return found[0]


def _taint(cluster: Cluster, node: str, effect: str) -> None:
    taint = {"key": "key1", "value": "value1", "effect": effect}
    cluster.core.patch_node(node, {"spec": {"taints": [taint]}})


def _start(cluster: Cluster, ns: str, job: dict[str, Any], selector: str, count: int) -> tuple[
    str, list[client.V1Pod]
]:  # fmt: skip
    cluster.batch.create_namespaced_job(ns, job)
    expect_job_unsuspended(cluster, job["metadata"]["name"], ns)
    pods = _all_running(cluster, ns, selector, count)
    chosen = _pod_on(pods, "kind-worker")
    return chosen.metadata.annotations[WORKLOAD_ANNOTATION], pods


@kueue_case(GO, WHEN + "Should replace a failed node with a new one within the same domain")
def test_replaces_a_failed_node_in_the_same_domain(
    cluster: Cluster, ns: str, queue: str, node_to_restore: Restore
) -> None:
    wl, _ = _start(cluster, ns, _sliced_job(ns, 3, BLOCK), "job-name=ranks-job", 3)
    expect_workload_topology_assignment(cluster, wl, ns, 3, KIND_BLOCK_1[:3])
    node_to_restore.name = "kind-worker"
    cluster.core.delete_node("kind-worker")
    expect_workload_topology_assignment(cluster, wl, ns, 3, KIND_BLOCK_1[1:])


@kueue_case(GO, WHEN + "Should evict the workload if replacement is not possible")
def test_evicts_if_replacement_is_not_possible(
    cluster: Cluster, ns: str, queue: str, node_to_restore: Restore
) -> None:
    wl, _ = _start(cluster, ns, _sliced_job(ns, 2, RACK), "job-name=ranks-job", 2)
    expect_workload_topology_assignment(cluster, wl, ns, 2, KIND_BLOCK_1[:2])
    node_to_restore.name = "kind-worker"
    cluster.core.delete_node("kind-worker")
    expect_workload_topology_assignment(cluster, wl, ns, 2, KIND_BLOCK_1[2:])


@kueue_case(GO, TAINTS + "Should evict the workload if replacement is not possible due to taint")
def test_evicts_if_replacement_is_not_possible_due_to_taint(
    cluster: Cluster, ns: str, queue: str, node_to_restore: Restore
) -> None:
    annotations = {PREFERRED: BLOCK, SLICE_REQUIRED: RACK, SLICE_SIZE: "2"}
    job = _labelled_job("ranks-job", ns, 2, annotations)
    wl, pods = _start(cluster, ns, job, "job-name=ranks-job", 2)
    expect_workload_topology_assignment(cluster, wl, ns, 2, KIND_BLOCK_1[:2])
    node_to_restore.name = "kind-worker"
    _taint(cluster, "kind-worker", "NoExecute")
    chosen = _pod_on(pods, "kind-worker")
    cluster.core.delete_namespaced_pod(chosen.metadata.name, ns, grace_period_seconds=0)
    expect_workload_topology_assignment(cluster, wl, ns, 2, KIND_BLOCK_1[2:])


@kueue_case(
    GO,
    TAINTS + "Should replace a node when it becomes tainted with NoExecute and tolerationSeconds",
)
def test_replaces_a_node_tainted_no_execute_with_toleration_seconds(
    cluster: Cluster, ns: str, queue: str, node_to_restore: Restore
) -> None:
    job = _labelled_job("toleration-job", ns, 3, {REQUIRED: BLOCK})
    job["spec"]["template"]["spec"]["tolerations"] = [
        {"key": "key1", "operator": "Equal", "value": "value1", "effect": "NoExecute",
         "tolerationSeconds": 0}
    ]  # fmt: skip
    wl, _ = _start(cluster, ns, job, "job-name=toleration-job", 3)
    expect_workload_topology_assignment(cluster, wl, ns, 3, KIND_BLOCK_1[:3])
    node_to_restore.name = "kind-worker"
    with taint_eviction(cluster, ns):
        _taint(cluster, "kind-worker", "NoExecute")
        expected = KIND_BLOCK_1[1:]
        expect_workload_topology_assignment(cluster, wl, ns, 3, expected)
        expect_pods_on_nodes(cluster, ns, "toleration-job", 3, expected)


def _gates(pod: client.V1Pod) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or ()]


@kueue_case(GO, TAINTS + "Should replace a node when it becomes NotReady and pods are Pending")
def test_replaces_a_not_ready_node_while_pods_are_pending(
    cluster: Cluster, ns: str, queue: str, node_to_restore: Restore
) -> None:
    name = "pending-notready-job"
    job = _labelled_job(name, ns, 3, {REQUIRED: BLOCK})
    job["spec"]["template"]["spec"]["schedulingGates"] = [{"name": DUMMY_GATE}]
    cluster.batch.create_namespaced_job(ns, job)
    expect_job_unsuspended(cluster, name, ns, LONG_TIMEOUT)

    def one_placed() -> tuple[str, dict[str, Any]]:
        wls = cluster.list("workloads", ns)
        assert len(wls) == 1, [w["metadata"]["name"] for w in wls]
        wl = str(wls[0]["metadata"]["name"])
        return wl, topology_assignment(cluster, wl, ns)

    wl, placed = eventually(one_placed, LONG_TIMEOUT, "the topology assignment")
    initial = [values[-1] for values, _ in domains(placed)]
    expect_workload_topology_assignment(cluster, wl, ns, 3, initial)

    def gated_pods() -> list[client.V1Pod]:
        pods = cluster.core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items
        assert len(pods) == 3, [p.metadata.name for p in pods]
        assert all(DUMMY_GATE in _gates(p) for p in pods), [_gates(p) for p in pods]
        return list(pods)

    pods = eventually(gated_pods, LONG_TIMEOUT, "pods created, still gated")
    uids = sorted(p.metadata.uid for p in pods)

    failed = initial[0]
    node_to_restore.name = failed
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    node = cluster.core.read_node(failed)
    conditions = [
        {"type": c.type, "status": c.status, "reason": c.reason or "KubeletReady",
         "lastTransitionTime": stamp, "lastHeartbeatTime": stamp}
        for c in node.status.conditions or () if c.type != "Ready"
    ]  # fmt: skip
    conditions.append({"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
                       "lastTransitionTime": stamp, "lastHeartbeatTime": stamp})  # fmt: skip
    cluster.core.patch_node_status(failed, {"status": {"conditions": conditions}})
    # What the node lifecycle controller adds on kind once Ready is Unknown.
    unreachable = [{"key": "node.kubernetes.io/unreachable", "effect": effect,
                    **({"timeAdded": stamp} if effect == "NoExecute" else {})}
                   for effect in ("NoSchedule", "NoExecute")]  # fmt: skip
    cluster.core.patch_node(failed, {"spec": {"taints": unreachable}})

    for pod in pods:
        live = cluster.core.read_namespaced_pod(pod.metadata.name, ns)
        kept = [{"name": g} for g in _gates(live) if g != DUMMY_GATE]
        cluster.core.patch_namespaced_pod(
            pod.metadata.name, ns, [{"op": "replace", "path": "/spec/schedulingGates",
                                     "value": kept}]
        )  # fmt: skip

    def not_on_failed_node() -> None:
        for p in cluster.core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items:
            assert p.spec.node_name != failed, f"pod {p.metadata.name} scheduled on {failed}"
            if TOPOLOGY_GATE in _gates(p):
                selector = p.spec.node_selector or {}
                assert selector.get("kubernetes.io/hostname") != failed, (
                    f"gated pod {p.metadata.name} carries a node selector for {failed}"
                )

    consistently(not_on_failed_node, 2, "no pod ungated onto the failed node")

    def ungated_in_place() -> bool:
        now = cluster.core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items
        assert len(now) == 3, [p.metadata.name for p in now]
        for p in now:
            assert TOPOLOGY_GATE not in _gates(p), f"pod {p.metadata.name} still topology-gated"
        assert sorted(p.metadata.uid for p in now) == uids, "a pod was terminated and recreated"
        return True

    eventually(ungated_in_place, LONG_TIMEOUT, "the original pods ungated")
    expected = [n for n in initial if n != failed] + ["kind-worker4"]
    expect_workload_topology_assignment(cluster, wl, ns, 3, expected)
    expect_pods_on_nodes(cluster, ns, name, 3, expected)


@kueue_case(
    GO, TAINTS + "Should replace a node when it becomes tainted with NoSchedule and pod fails"
)
def test_replaces_a_node_tainted_no_schedule_once_its_pod_fails(
    cluster: Cluster, ns: str, queue: str, node_to_restore: Restore
) -> None:
    name = "noschedule-job"
    job = _labelled_job(name, ns, 3, {REQUIRED: BLOCK})
    wl, pods = _start(cluster, ns, job, f"job-name={name}", 3)
    initial = KIND_BLOCK_1[:3]
    expect_workload_topology_assignment(cluster, wl, ns, 3, initial)
    node_to_restore.name = "kind-worker"
    _taint(cluster, "kind-worker", "NoSchedule")
    chosen = _pod_on(pods, "kind-worker")
    cluster.core.delete_namespaced_pod(chosen.metadata.name, ns)
    expected = [*initial[1:], "kind-worker4"]
    expect_workload_topology_assignment(cluster, wl, ns, 3, expected)
    expect_pods_on_nodes(cluster, ns, name, 3, expected)

"""Kueue v0.19.2 test/e2e/singlecluster/baseline/pod_test.go, ported case by case.

Every cpu amount is a quarter of Kueue's (the ClusterQueue's 5 cpu is 1250m, a pod's 1 cpu is
250m): the on-demand flavor is the one real node here, of 2 cpu, where Kueue's kind workers
have the host's. Each quota decision (what fits, what must preempt) is the same as Kueue's.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import DifferenceError, kueue_case
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    BEHAVIOR_WAIT_FOR_DELETION,
    BEHAVIOR_WAIT_FOR_DELETION_FAIL_ON_EXIT,
    KUEUE,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    POD_GROUP_LABEL,
    POD_GROUP_TOTAL,
    QUEUE_LABEL,
    SCHEDULING_GATE,
    TIMEOUT,
    Cluster,
    condition,
    consistently,
    end_container,
    eventually,
    expect_events,
    expect_workload_to_finish,
    expect_workloads_finalized_or_gone,
    gone,
    has_quota_reservation,
    make_cluster_queue,
    make_flavor_quotas,
    make_group,
    make_local_queue,
    make_pod,
    make_resource_flavor,
    make_workload_priority_class,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/pod_test.go"
ON_DEMAND = {"instance-type": "on-demand"}
ROLE_HASH = f"{KUEUE}/role-hash"
SUSPENDING_PARENT = f"{KUEUE}/pod-suspending-parent"


def cpu(kueue_cpus: float) -> str:
    """Kueue's cpu amount, a quarter of it (see the module's docstring)."""
    return f"{int(kueue_cpus * 250)}m"


@pytest.fixture
def cq(cluster: Cluster, ns: str) -> Iterator[str]:
    """The BeforeEach of "Pod groups" and of "Single CQ": flavor on-demand, ClusterQueue of 5
    cpu preempting lower priority within, LocalQueue `queue`. Yields the ClusterQueue."""
    flavor, name = f"on-demand-{ns}", f"cq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(flavor, ON_DEMAND))
    cluster.create_active("clusterqueues", make_cluster_queue(
        name, make_flavor_quotas(flavor, cpu=cpu(5)),
        preemption={"withinClusterQueue": "LowerPriority"},
    ))  # fmt: skip
    cluster.create_active("localqueues", make_local_queue("queue", ns, name), ns)
    yield name
    cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    for pod in cluster.core.list_namespaced_pod(ns).items:  # Kueue's finalizer released
        _strip_finalizers(cluster, pod.metadata.name, ns)
    cluster.expect_deleted("clusterqueues", name)
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", "queue", ns)
    cluster.expect_deleted("resourceflavors", flavor)


def _strip_finalizers(cluster: Cluster, name: str, ns: str) -> None:
    try:
        cluster.core.patch_namespaced_pod(name, ns, {"metadata": {"finalizers": None}})
    except client.ApiException as err:
        if err.status != 404:
            raise


def _read(cluster: Cluster, pod: dict) -> client.V1Pod:
    return cluster.core.read_namespaced_pod(pod["metadata"]["name"], pod["metadata"]["namespace"])


def _create(cluster: Cluster, pod: dict) -> client.V1Pod:
    return cluster.core.create_namespaced_pod(pod["metadata"]["namespace"], copy.deepcopy(pod))


def _gates(pod: client.V1Pod) -> list[str]:
    return [g.name for g in pod.spec.scheduling_gates or ()]


def _expect_ungated(cluster: Cluster, pods: list[dict], timeout: float = TIMEOUT) -> None:
    def ungated() -> bool:
        for pod in pods:
            live = _read(cluster, pod)
            assert not _gates(live), f"{live.metadata.name} still gated: {_gates(live)}"
        return True

    eventually(ungated, timeout, "the pods ungated")


def _delete_and_wait(cluster: Cluster, pod: dict, timeout: float = LONG_TIMEOUT) -> None:
    """util.ExpectObjectToBeDeleted(ctx, k8sClient, pod, true)."""
    name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]
    try:
        cluster.core.delete_namespaced_pod(name, ns)
    except client.ApiException as err:
        if err.status != 404:
            raise
    eventually(lambda: gone(lambda: cluster.core.read_namespaced_pod(name, ns)), timeout,
               f"pod {name} deleted")  # fmt: skip


def _phase(cluster: Cluster, pod: dict) -> str:
    return str(_read(cluster, pod).status.phase)


def terminate_pod(cluster: Cluster, pod: dict) -> None:
    """util.WaitForActivePodsAndTerminate(..., 1, 0, name): the pod, once running, ends with
    exit code 0 (util.end_container)."""
    name = pod["metadata"]["name"]
    eventually(lambda: _phase(cluster, pod) == "Running", LONG_TIMEOUT, f"{name} running")
    end_container(_read(cluster, pod))


@kueue_case(GO, "Pod groups Single CQ should admit group that fits")
def test_admits_a_group_that_fits(cluster: Cluster, ns: str, cq: str) -> None:
    group = make_group(make_pod("group", ns, queue="queue", cpu=cpu(1)), 2)
    for pod in group:
        created = _create(cluster, pod)
        assert SCHEDULING_GATE in _gates(created), _gates(created)
    eventually(lambda: cluster.workload("group", ns), TIMEOUT, "the group's Workload")

    def reserved() -> bool:
        wl = cluster.workload("group", ns)
        assert has_quota_reservation(wl), wl
        assert wl["status"]["admission"]["clusterQueue"] == cq
        return True

    eventually(reserved, TIMEOUT, "quota reserved in the ClusterQueue")

    def started() -> bool:
        for pod in group:
            live = _read(cluster, pod)
            assert not _gates(live), _gates(live)
            assert live.spec.node_selector == ON_DEMAND, live.spec.node_selector
        return True

    eventually(started, TIMEOUT, "the pods ungated onto on-demand")
    expect_workload_to_finish(cluster, "group", ns)
    for pod in group:
        _delete_and_wait(cluster, pod)
    expect_workloads_finalized_or_gone(cluster, "group", ns)


@kueue_case(GO, "Pod groups Single CQ Should only admit a complete group")
def test_admits_only_a_complete_group(cluster: Cluster, ns: str, cq: str) -> None:
    group = make_group(make_pod("group", ns, queue="queue", cpu=cpu(1)), 3)
    for pod in group[:2]:
        _create(cluster, pod)

    def gated() -> None:
        for pod in group[:2]:
            assert SCHEDULING_GATE in _gates(_read(cluster, pod))

    consistently(gated, 0.3)
    for pod in group[:2]:
        _delete_and_wait(cluster, pod)
    for pod in group:
        _create(cluster, pod)
    expect_workload_to_finish(cluster, "group", ns)


def _replacement_condition(cluster: Cluster, ns: str, want: tuple[str, str, str]) -> None:
    def matches() -> bool:
        found = condition(cluster.workload("group", ns), "WaitingForReplacementPods")
        got = (found.get("status"), found.get("reason"), found.get("message"))
        assert got == want, got
        return True

    eventually(matches, TIMEOUT, f"WaitingForReplacementPods {want}")


@kueue_case(GO, "Pod groups Single CQ Failed Pod can be replaced in group")
def test_a_failed_pod_can_be_replaced(cluster: Cluster, ns: str, cq: str) -> None:
    group = make_group(make_pod("group", ns, queue="queue", cpu=cpu(1), grace=1), 3)
    # The first runs much longer, so that there is time to end it.
    group[0]["spec"]["containers"][0]["args"] = BEHAVIOR_WAIT_FOR_DELETION_FAIL_ON_EXIT
    for pod in group:
        _create(cluster, pod)
    _expect_ungated(cluster, group)
    eventually(lambda: _phase(cluster, group[0]) == "Running", MEDIUM_TIMEOUT, "group-0 running")
    cluster.core.delete_namespaced_pod("group-0", ns)
    eventually(lambda: _phase(cluster, group[0]) == "Failed", LONG_TIMEOUT, "group-0 failed")
    _replacement_condition(cluster, ns, ("True", "PodsFailed", "Some Failed pods need replacement"))
    replacement = copy.deepcopy(group[2])
    replacement["metadata"]["name"] = "replacement"
    _create(cluster, replacement)
    _expect_ungated(cluster, [replacement])

    def failed_one_finalized_or_gone() -> bool:
        try:
            live = cluster.core.read_namespaced_pod("group-0", ns)
        except client.ApiException as err:
            return err.status == 404
        assert not live.metadata.finalizers, live.metadata.finalizers
        return True

    eventually(failed_one_finalized_or_gone, LONG_TIMEOUT, "group-0 finalized or gone")
    excess = copy.deepcopy(group[2])
    excess["metadata"]["name"] = "excess"
    _create(cluster, excess)
    expect_events(cluster, ns, {"excess"}, "ExcessPodDeleted")
    eventually(lambda: gone(lambda: _read(cluster, excess)), LONG_TIMEOUT, "excess deleted")
    _replacement_condition(cluster, ns, ("False", "PodsReady", "No pods need replacement"))
    expect_workload_to_finish(cluster, "group", ns)


@kueue_case(GO, "Pod groups Single CQ Unscheduled Pod which is deleted can be replaced in group")
def test_an_unscheduled_deleted_pod_can_be_replaced(cluster: Cluster, ns: str, cq: str) -> None:
    group = make_group(make_pod("group", ns, queue="queue", cpu=cpu(1)), 2)
    group[0]["spec"]["nodeSelector"] = {"missing-node-key": "missing-node-value"}
    for pod in group:
        _create(cluster, pod)
    _expect_ungated(cluster, group)

    def second_scheduled() -> bool:
        live = _read(cluster, group[1])
        assert live.status.phase != "Pending", live.status.phase
        assert live.spec.node_name, "not bound"
        return True

    eventually(second_scheduled, MEDIUM_TIMEOUT, "group-1 scheduled")

    def first_unschedulable() -> bool:
        live = _read(cluster, group[0])
        assert live.status.phase == "Pending", live.status.phase
        scheduled = [c for c in live.status.conditions or () if c.type == "PodScheduled"]
        assert scheduled, "no PodScheduled condition"
        got = (scheduled[0].status, scheduled[0].reason)
        assert got == ("False", "Unschedulable"), got
        return True

    eventually(first_unschedulable, TIMEOUT, "group-0 unschedulable")
    cluster.core.delete_namespaced_pod("group-0", ns)

    def held_pending() -> bool:
        live = _read(cluster, group[0])
        assert live.metadata.deletion_timestamp is not None
        assert live.status.phase == "Pending", live.status.phase
        assert not live.spec.node_name, live.spec.node_name
        return True

    eventually(held_pending, TIMEOUT, "group-0 deleted but held, still pending")
    replacement = copy.deepcopy(group[0])
    replacement["metadata"]["name"] = "replacement"
    _create(cluster, replacement)

    def replaced() -> bool:
        assert not _gates(_read(cluster, replacement)), "the replacement is gated"
        assert gone(lambda: _read(cluster, group[0])), "group-0 is still there"
        return True

    eventually(replaced, TIMEOUT, "the replacement ungated, group-0 gone")


@kueue_case(GO, "Pod groups Single CQ should allow to schedule a group of diverse pods")
def test_schedules_a_group_of_diverse_pods(cluster: Cluster, ns: str, cq: str) -> None:
    group = make_group(make_pod("group", ns, queue="queue", cpu=cpu(3)), 2)
    # Diverse: the first asks less (its limit stays as it was).
    group[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu(2)
    for pod in group:
        _create(cluster, pod)
    _expect_ungated(cluster, group)
    expect_workload_to_finish(cluster, "group", ns)
    for pod in group:
        _delete_and_wait(cluster, pod)
    expect_workloads_finalized_or_gone(cluster, "group", ns)


@kueue_case(GO, "Pod groups Single CQ should allow to preempt the lower priority group")
def test_preempts_the_lower_priority_group(cluster: Cluster, ns: str, cq: str) -> None:
    high = f"high-{ns}"
    cluster.create("workloadpriorityclasses", make_workload_priority_class(high, 100))
    try:
        _preempts_the_lower_priority_group(cluster, ns, high)
    finally:
        cluster.delete("workloadpriorityclasses", high)


def _preempts_the_lower_priority_group(cluster: Cluster, ns: str, high: str) -> None:
    default_group = make_group(make_pod(
        "default-priority-group", ns, queue="queue", cpu=cpu(2), grace=1,
        args=BEHAVIOR_WAIT_FOR_DELETION_FAIL_ON_EXIT,
    ), 2)  # fmt: skip
    for pod in default_group:
        _create(cluster, pod)
    _expect_ungated(cluster, default_group)
    high_group = make_group(make_pod(
        "high-priority-group", ns, queue="queue", cpu=cpu(1), grace=1, priority_class=high,
        args=BEHAVIOR_WAIT_FOR_DELETION,
    ), 2)  # fmt: skip
    for pod in high_group:
        _create(cluster, pod)
    _expect_ungated(cluster, high_group)

    def preempted() -> bool:
        wl = cluster.workload("default-priority-group", ns)
        assert condition(wl, "Evicted").get("status") == "True", wl
        assert condition(wl, "Preempted").get("status") == "True", wl
        return True

    eventually(preempted, TIMEOUT, "the default-priority workload preempted")
    names = {p["metadata"]["name"] for p in default_group}
    expect_events(cluster, ns, names, "Stopped", note="Preempted")

    def failed() -> bool:
        for pod in default_group:
            assert _phase(cluster, pod) == "Failed", pod["metadata"]["name"]
        return True

    eventually(failed, MEDIUM_TIMEOUT, "the default-priority pods failed")
    replacements = []
    for pod in default_group:
        rep = copy.deepcopy(pod)
        rep["metadata"]["name"] = f"replacement-for-{pod['metadata']['name']}"
        rep["spec"]["containers"][0]["args"] = BEHAVIOR_EXIT_FAST
        _create(cluster, rep)
        replacements.append(rep)

    def preempted_pods_gone() -> bool:
        for pod in default_group:
            assert gone(lambda p=pod: _read(cluster, p)), pod["metadata"]["name"]
        return True

    eventually(preempted_pods_gone, MEDIUM_TIMEOUT, "the preempted pods deleted")
    _expect_ungated(cluster, high_group)
    for pod in high_group:
        terminate_pod(cluster, pod)
    expect_workload_to_finish(cluster, "high-priority-group", ns)
    _expect_ungated(cluster, replacements)

    def succeeded() -> bool:
        for rep in replacements:
            assert _phase(cluster, rep) == "Succeeded", rep["metadata"]["name"]
        return True

    eventually(succeeded, MEDIUM_TIMEOUT, "the replacements succeeded")
    expect_workload_to_finish(cluster, "default-priority-group", ns)


@kueue_case(
    GO,
    "Pod groups Single CQ Pod should be admitted after the group labels are added",
    differs="#where-tower-does-more",
)
def test_admitted_after_the_group_labels_are_added(cluster: Cluster, ns: str, cq: str) -> None:
    """Kueue's webhook sees every pod of a managed namespace, so it stamps a role hash on this
    pod, created without a queue label; Tower's webhook sees only pods with the queue label
    (its objectSelector, so that a webhook outage never blocks pods Tower does not queue); its
    controller stamps the hash once the pod has joined its group, from the pod's spec as
    created. Every other step is Kueue's; the hash missing at create is the difference,
    asserted last."""
    pod = make_pod("pod-0", ns, cpu=cpu(1))
    pod["metadata"]["labels"]["app-role"] = "worker"
    pod["metadata"]["annotations"][SUSPENDING_PARENT] = "OtherController"
    pod["spec"]["schedulingGates"] = [{"name": SCHEDULING_GATE}]
    _create(cluster, pod)

    def gated() -> dict[str, str]:
        live = _read(cluster, pod)
        assert SCHEDULING_GATE in _gates(live), _gates(live)
        return live.metadata.annotations or {"": ""}

    hash_at_create = ROLE_HASH in eventually(gated, TIMEOUT, "pod-0 gated")
    live = _read(cluster, pod)
    live.metadata.labels[POD_GROUP_LABEL] = "test-group"
    live.metadata.annotations[POD_GROUP_TOTAL] = "1"
    live.metadata.annotations[SUSPENDING_PARENT] = "OtherController"
    live.metadata.labels[QUEUE_LABEL] = "queue"
    live.metadata.labels[f"{KUEUE}/managed"] = "true"
    cluster.core.replace_namespaced_pod("pod-0", ns, live)
    # Kueue's hash, stamped at create, is kept by the update (its webhook hooks creates only).
    hash_kept = bool((_read(cluster, pod).metadata.annotations or {}).get(ROLE_HASH))

    def queue_labels() -> bool:
        labels = _read(cluster, pod).metadata.labels or {}
        assert labels.get(f"{KUEUE}/cluster-queue-name") == cq, labels
        assert labels.get(f"{KUEUE}/local-queue-name") == "queue", labels
        return True

    eventually(queue_labels, TIMEOUT, "pod-0's queue labels")
    _expect_ungated(cluster, [pod])
    expect_workload_to_finish(cluster, "test-group", ns)
    cluster.core.delete_namespaced_pod("pod-0", ns)
    eventually(lambda: gone(lambda: _read(cluster, pod)), TIMEOUT, "pod-0 deleted")
    expect_workloads_finalized_or_gone(cluster, "test-group", ns)
    if not (hash_at_create and hash_kept):
        raise DifferenceError("a pod created without a queue label has no role hash")

"""Kueue v0.19.2 test/e2e/singlecluster/baseline/statefulset_test.go, ported case by case.

The ClusterQueue's 5 cpu is 1250m here, and the preemption case's pods ask 250m where Kueue's
ask 1 cpu: the on-demand flavor is the one real node here, of 2 cpu. What fits and what must
preempt is the same as in Kueue's cases (the other cases' pods ask Kueue's 200m; at most four
run at once, which fits either quota).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    AGNHOST,
    AGNHOST_OLD,
    CONTAINERD,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    QUEUE_LABEL,
    TIMEOUT,
    Cluster,
    condition,
    consistently,
    eventually,
    is_admitted,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
    make_stateful_set,
    make_workload_priority_class,
    stateful_set_workload_name,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/statefulset_test.go"


@pytest.fixture
def lq(cluster: Cluster, ns: str) -> Iterator[str]:
    """The BeforeEach: flavor on-demand, a ClusterQueue of 5 cpu (1250m, see the module's
    docstring), its LocalQueue (yielded)."""
    rf, cq, lq = f"sts-rf-{ns}", f"sts-cq-{ns}", f"sts-lq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(rf, {"instance-type": "on-demand"}))
    cluster.create_active("clusterqueues", make_cluster_queue(
        cq, make_flavor_quotas(rf, cpu="1250m"),
        preemption={"withinClusterQueue": "LowerPriority"},
    ))  # fmt: skip
    cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
    yield lq
    cluster.apps.delete_collection_namespaced_stateful_set(ns)
    cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", lq, ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", rf)


def _sts(cluster: Cluster, name: str, ns: str) -> client.V1StatefulSet:
    return cluster.apps.read_namespaced_stateful_set(name, ns)


def _ready(cluster: Cluster, name: str, ns: str) -> int:
    return int(_sts(cluster, name, ns).status.ready_replicas or 0)


def _expect_ready(
    cluster: Cluster, name: str, ns: str, want: int, timeout: float = MEDIUM_TIMEOUT
) -> None:
    eventually(lambda: _ready(cluster, name, ns) == want, timeout, f"{name}: {want} ready")


def _update(
    cluster: Cluster, name: str, ns: str, change: Callable[[Any], None], timeout: float = TIMEOUT
) -> None:
    """Get, change, Update, again on a conflict (Kueue's Eventually around an Update)."""

    def write() -> bool:
        sts = _sts(cluster, name, ns)
        change(sts)
        try:
            cluster.apps.replace_namespaced_stateful_set(name, ns, sts)
        except client.ApiException as err:
            if err.status in (409, 403, 422):
                raise AssertionError(f"update refused: {err.status} {err.body}") from None
            raise
        return True

    eventually(write, timeout, f"{name} updated")


def _scale(cluster: Cluster, name: str, ns: str, replicas: int, timeout: float = TIMEOUT) -> None:
    def change(sts: Any) -> None:
        sts.spec.replicas = replicas

    _update(cluster, name, ns, change, timeout)


def _create(cluster: Cluster, ns: str, **kwargs: Any) -> tuple[client.V1StatefulSet, str]:
    name = kwargs.pop("name", "sts")
    created = cluster.apps.create_namespaced_stateful_set(ns, make_stateful_set(name, ns, **kwargs))
    return created, stateful_set_workload_name(created)


def _workload(cluster: Cluster, name: str, ns: str) -> dict:
    wl = cluster.workload(name, ns)
    assert wl is not None, f"workload {name} not found"
    return wl


def _deleted(cluster: Cluster, read: Callable[[], Any], timeout: float, what: str) -> None:
    def gone() -> bool:
        try:
            read()
        except client.ApiException as err:
            return err.status == 404
        return False

    eventually(gone, timeout, what)


def _delete_sts(cluster: Cluster, name: str, ns: str) -> None:
    """util.ExpectObjectToBeDeleted(ctx, k8sClient, sts, true)."""
    cluster.apps.delete_namespaced_stateful_set(name, ns)
    _deleted(cluster, lambda: _sts(cluster, name, ns), LONG_TIMEOUT, f"statefulset {name} deleted")


def _on_hold(cluster: Cluster, wl_name: str, ns: str) -> None:
    def held() -> bool:
        found = condition(_workload(cluster, wl_name, ns), "QuotaReserved")
        got = (found.get("status"), found.get("reason"))
        assert got == ("False", "OnHold"), got
        return True

    eventually(held, LONG_TIMEOUT, "the workload on hold, its quota released")


def _no_pods_left(cluster: Cluster, ns: str) -> None:
    eventually(lambda: not cluster.core.list_namespaced_pod(ns).items, MEDIUM_TIMEOUT,
               "every pod deleted")  # fmt: skip


@kueue_case(GO, "StatefulSet integration StatefulSet created should admit group that fits")
def test_admits_a_group_that_fits(cluster: Cluster, ns: str, lq: str) -> None:
    sts, wl_name = _create(cluster, ns, queue=lq, replicas=3)
    _expect_ready(cluster, "sts", ns, 3)
    wl = _workload(cluster, wl_name, ns)
    assert wl["metadata"]["labels"].get("kueue.x-k8s.io/job-uid") == sts.metadata.uid, wl[
        "metadata"
    ]
    _, conflicting_wl = _create(cluster, ns, name="sts-conflict", queue=lq, replicas=1)
    _expect_ready(cluster, "sts-conflict", ns, 1)
    eventually(lambda: cluster.workload(conflicting_wl, ns), MEDIUM_TIMEOUT, "its own workload")
    assert conflicting_wl != wl_name
    _delete_sts(cluster, "sts-conflict", ns)
    _deleted(cluster, lambda: cluster.core.read_namespaced_pod("sts-conflict-0", ns), LONG_TIMEOUT,
             "sts-conflict-0 deleted")  # fmt: skip
    eventually(lambda: cluster.workload(conflicting_wl, ns) is None, MEDIUM_TIMEOUT,
               "the conflicting workload deleted")  # fmt: skip
    _delete_sts(cluster, "sts", ns)
    _deleted(cluster, lambda: cluster.core.read_namespaced_pod("sts-0", ns), LONG_TIMEOUT,
             "sts-0 deleted")  # fmt: skip
    eventually(lambda: cluster.workload(wl_name, ns) is None, MEDIUM_TIMEOUT, "workload deleted")


@pytest.fixture(scope="module")
def old_agnhost() -> str:
    """util.GetAgnHostImageOld: the node pulls nothing, so the older agnhost is the node's
    agnhost under the older tag (a tag in the node's containerd)."""
    tags = subprocess.run(["ctr", "--address", CONTAINERD, "-n", "k8s.io", "images", "ls", "-q"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    if AGNHOST_OLD not in tags.stdout.split():
        done = subprocess.run(
            ["ctr", "--address", CONTAINERD, "-n", "k8s.io", "images", "tag", AGNHOST, AGNHOST_OLD],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    return AGNHOST_OLD


@kueue_case(
    GO,
    "StatefulSet integration StatefulSet created should allow to update the PodTemplate in StatefulSet",
)
def test_updates_the_pod_template(cluster: Cluster, ns: str, lq: str, old_agnhost: str) -> None:
    _create(cluster, ns, queue=lq, replicas=3, image=old_agnhost)
    _expect_ready(cluster, "sts", ns, 3)

    def new_image(sts: Any) -> None:
        assert len(sts.spec.template.spec.containers) == 1
        sts.spec.template.spec.containers[0].image = AGNHOST

    _update(cluster, "sts", ns, new_image, MEDIUM_TIMEOUT)

    def replaced() -> bool:
        pods = cluster.core.list_namespaced_pod(ns, label_selector="app=sts-pod").items
        assert len(pods) == 3, [p.metadata.name for p in pods]
        for pod in pods:
            assert pod.spec.containers[0].image == AGNHOST, (
                pod.metadata.name,
                pod.spec.containers[0].image,
            )
        return True

    eventually(replaced, LONG_TIMEOUT, "the pods replaced with the new template")
    _expect_ready(cluster, "sts", ns, 3)


@kueue_case(
    GO, "StatefulSet integration StatefulSet created should delete all pods on scale down to zero"
)
def test_deletes_all_pods_on_scale_down_to_zero(cluster: Cluster, ns: str, lq: str) -> None:
    _, wl_name = _create(cluster, ns, queue=lq, replicas=3)
    _expect_ready(cluster, "sts", ns, 3)
    _workload(cluster, wl_name, ns)
    _scale(cluster, "sts", ns, 0)
    _expect_ready(cluster, "sts", ns, 0, LONG_TIMEOUT)
    _on_hold(cluster, wl_name, ns)


@kueue_case(
    GO, "StatefulSet integration StatefulSet created should create pods after scale up from zero"
)
def test_creates_pods_after_scale_up_from_zero(cluster: Cluster, ns: str, lq: str) -> None:
    _, wl_name = _create(cluster, ns, queue=lq, replicas=0)
    _scale(cluster, "sts", ns, 3)
    _expect_ready(cluster, "sts", ns, 3)
    _workload(cluster, wl_name, ns)


@kueue_case(
    GO,
    "StatefulSet integration StatefulSet created should allow to scale up after scale down to zero",
)
def test_scales_up_after_scale_down_to_zero(cluster: Cluster, ns: str, lq: str) -> None:
    _, wl_name = _create(cluster, ns, queue=lq, replicas=3)
    _expect_ready(cluster, "sts", ns, 3)
    _workload(cluster, wl_name, ns)
    _scale(cluster, "sts", ns, 0)
    eventually(lambda: _ready(cluster, "sts", ns) < 3, MEDIUM_TIMEOUT, "fewer than 3 ready")
    _scale(cluster, "sts", ns, 3, MEDIUM_TIMEOUT)
    _expect_ready(cluster, "sts", ns, 3)


def _relabel(queue: str) -> Callable[[Any], None]:
    def change(sts: Any) -> None:
        sts.metadata.labels[QUEUE_LABEL] = queue

    return change


@kueue_case(
    GO,
    "StatefulSet integration StatefulSet created should allow to change queue name if ReadyReplicas=0",
)
def test_changes_the_queue_name_while_none_is_ready(cluster: Cluster, ns: str, lq: str) -> None:
    _, wl_name = _create(cluster, ns, queue=f"{lq}-invalid", replicas=3)
    consistently(lambda: _expect_zero(cluster, ns), 0.3)
    _update(cluster, "sts", ns, _relabel(lq))
    _expect_ready(cluster, "sts", ns, 3)
    _workload(cluster, wl_name, ns)


def _expect_zero(cluster: Cluster, ns: str) -> None:
    assert _ready(cluster, "sts", ns) == 0


@kueue_case(
    GO,
    "StatefulSet integration StatefulSet created should allow to change queue name after scale up from zero (two-phase pattern)",
)
def test_changes_the_queue_name_after_scale_up_from_zero(
    cluster: Cluster, ns: str, lq: str
) -> None:
    invalid = f"{lq}-nonexistent"
    _, wl_name = _create(cluster, ns, queue=invalid, replicas=0)
    _scale(cluster, "sts", ns, 1)

    def gated_with_the_invalid_queue() -> bool:
        pods = cluster.core.list_namespaced_pod(ns).items
        assert len(pods) == 1, [p.metadata.name for p in pods]
        assert (pods[0].metadata.labels or {}).get(QUEUE_LABEL) == invalid, pods[0].metadata.labels
        return True

    eventually(gated_with_the_invalid_queue, TIMEOUT, "one pod, with the invalid queue")
    consistently(lambda: _expect_zero(cluster, ns), 0.3)
    _update(cluster, "sts", ns, _relabel(lq))

    def pods_relabelled() -> bool:
        pods = cluster.core.list_namespaced_pod(ns).items
        assert pods, "no pods"
        for pod in pods:
            assert (pod.metadata.labels or {}).get(QUEUE_LABEL) == lq, pod.metadata.labels
        return True

    eventually(pods_relabelled, TIMEOUT, "the pods' queue label updated")
    eventually(lambda: _workload(cluster, wl_name, ns)["spec"].get("queueName") == lq, TIMEOUT,
               "the workload's queueName updated")  # fmt: skip
    _expect_ready(cluster, "sts", ns, 1)
    eventually(lambda: is_admitted(cluster.workload(wl_name, ns)), TIMEOUT, "admitted")


@kueue_case(
    GO,
    "StatefulSet integration StatefulSet created should delete all Pods if StatefulSet was deleted after being partially ready",
)
def test_deletes_all_pods_when_deleted_partially_ready(cluster: Cluster, ns: str, lq: str) -> None:
    _, wl_name = _create(cluster, ns, queue=lq, replicas=3)
    eventually(lambda: cluster.workload(wl_name, ns), TIMEOUT, "the workload created")
    eventually(lambda: is_admitted(cluster.workload(wl_name, ns)), TIMEOUT, "admitted")
    eventually(lambda: _ready(cluster, "sts", ns) > 0, MEDIUM_TIMEOUT, "partially ready")
    cluster.apps.delete_namespaced_stateful_set("sts", ns)
    _no_pods_left(cluster, ns)


@kueue_case(
    GO,
    "StatefulSet integration StatefulSet created with WorkloadPriorityClass should preempt low-priority StatefulSet",
)
def test_preempts_a_low_priority_stateful_set(cluster: Cluster, ns: str, lq: str) -> None:
    high, low = f"high-priority-{ns}", f"low-priority-{ns}"
    cluster.create("workloadpriorityclasses", make_workload_priority_class(high, 5000))
    cluster.create("workloadpriorityclasses", make_workload_priority_class(low, 1000))
    try:
        _preempts(cluster, ns, lq, high, low)
    finally:
        cluster.expect_deleted("workloadpriorityclasses", high)
        cluster.expect_deleted("workloadpriorityclasses", low)


def _with_priority(cluster: Cluster, wl_name: str, ns: str, wpc: str, value: int) -> None:
    """util.ExpectWorkloadsWithWorkloadPriority."""

    def has() -> bool:
        spec = _workload(cluster, wl_name, ns)["spec"]
        assert (spec.get("priorityClassRef") or {}).get("name") == wpc, spec.get("priorityClassRef")
        assert spec.get("priority") == value, spec.get("priority")
        return True

    eventually(has, TIMEOUT, f"the workload's priority class {wpc}")


def _preempts(cluster: Cluster, ns: str, lq: str, high: str, low: str) -> None:
    _, low_wl = _create(cluster, ns, name="low-priority", queue=lq, replicas=3, cpu="250m",
                        priority_class=low)  # fmt: skip
    _expect_ready(cluster, "low-priority", ns, 3)
    _with_priority(cluster, low_wl, ns, low, 1000)
    eventually(lambda: is_admitted(cluster.workload(low_wl, ns)), TIMEOUT, "low admitted")
    _, high_wl = _create(cluster, ns, name="high-priority", queue=lq, replicas=3, cpu="250m",
                         priority_class=high)  # fmt: skip
    _expect_ready(cluster, "high-priority", ns, 3)
    _expect_ready(cluster, "low-priority", ns, 0)
    _with_priority(cluster, high_wl, ns, high, 5000)
    eventually(lambda: is_admitted(cluster.workload(high_wl, ns)), TIMEOUT, "high admitted")

    def low_preempted() -> bool:
        wl = cluster.workload(low_wl, ns)
        assert condition(wl, "Admitted").get("status") == "False", wl
        assert condition(wl, "Preempted").get("status") == "True", wl
        return True

    eventually(low_preempted, TIMEOUT, "the low-priority workload preempted")


@kueue_case(
    GO, "StatefulSet integration Workload deactivated shouldn't delete deactivated Workload"
)
def test_keeps_a_deactivated_workload(cluster: Cluster, ns: str, lq: str) -> None:
    _, wl_name = _create(cluster, ns, queue=lq, replicas=3)
    eventually(lambda: is_admitted(cluster.workload(wl_name, ns)), TIMEOUT, "admitted")
    uid = _workload(cluster, wl_name, ns)["metadata"]["uid"]
    _expect_ready(cluster, "sts", ns, 3)
    _set_active(cluster, wl_name, ns, False)

    def deactivated() -> bool:
        wl = _workload(cluster, wl_name, ns)
        assert wl["metadata"]["uid"] == uid, "a new workload"
        assert wl["spec"].get("active") is False, wl["spec"].get("active")
        assert condition(wl, "Evicted").get("status") == "True", wl.get("status")
        return True

    eventually(deactivated, MEDIUM_TIMEOUT, "the workload deactivated and evicted")
    _expect_ready(cluster, "sts", ns, 0)
    _set_active(cluster, wl_name, ns, True)

    def readmitted() -> bool:
        wl = _workload(cluster, wl_name, ns)
        assert wl["metadata"]["uid"] == uid, "a new workload"
        assert is_admitted(wl), wl.get("status")
        return True

    eventually(readmitted, MEDIUM_TIMEOUT, "the same workload admitted again")
    _expect_ready(cluster, "sts", ns, 3)
    cluster.apps.delete_namespaced_stateful_set("sts", ns)
    _no_pods_left(cluster, ns)
    eventually(lambda: cluster.workload(wl_name, ns) is None, MEDIUM_TIMEOUT, "workload deleted")


def _set_active(cluster: Cluster, wl_name: str, ns: str, active: bool) -> None:
    def write() -> bool:
        wl = _workload(cluster, wl_name, ns)
        wl["spec"]["active"] = active
        try:
            cluster.custom.replace_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", ns, "workloads", wl_name, wl
            )
        except client.ApiException as err:
            if err.status == 409:
                return False
            raise
        return True

    eventually(write, TIMEOUT, f"the workload's active set {active}")


@kueue_case(
    GO,
    "StatefulSet integration StatefulSet scaling to zero with quota release should set the workload OnHold on scale-to-zero and clear it on scale-up",
)
def test_on_hold_at_zero_and_cleared_on_scale_up(cluster: Cluster, ns: str, lq: str) -> None:
    _, wl_name = _create(cluster, ns, queue=lq, replicas=2)
    _expect_ready(cluster, "sts", ns, 2)
    eventually(lambda: is_admitted(cluster.workload(wl_name, ns)), TIMEOUT, "admitted")
    _scale(cluster, "sts", ns, 0)
    _on_hold(cluster, wl_name, ns)
    eventually(lambda: (_sts(cluster, "sts", ns).status.replicas or 0) == 0, LONG_TIMEOUT,
               "the scale-down complete")  # fmt: skip
    _scale(cluster, "sts", ns, 2)

    def readmitted() -> bool:
        wl = _workload(cluster, wl_name, ns)
        assert is_admitted(wl), wl.get("status")
        found = condition(wl, "QuotaReserved")
        if found.get("status") == "False":
            assert found.get("reason") != "OnHold", found
        return True

    eventually(readmitted, MEDIUM_TIMEOUT, "admitted again, no longer on hold")
    _expect_ready(cluster, "sts", ns, 2)

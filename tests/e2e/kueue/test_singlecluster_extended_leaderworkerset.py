"""Kueue v0.19.2 test/e2e/singlecluster/extended/leaderworkerset_test.go, ported case by case.

The LeaderWorkerSet controller is played by the test (tests/e2e/kueue/lws.py); Kueue's e2e
cluster runs the real one. The ClusterQueue's 5 cpu is 1250m here, and the priority cases'
pods ask 250m where Kueue's ask 1 cpu: the on-demand flavor is the one real node here, of 2
cpu. What fits and what must preempt is the same as in Kueue's cases (a group of three 250m
pods fits alone, two do not; the other cases' pods ask Kueue's 200m, at most six at once).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from extender.core.jobframework.adapter import workload_name
from tests.e2e.conftest import kubectl
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.lws import (
    GROUP,
    PLURAL,
    SET_NAME,
    VERSION,
    WORKER_INDEX,
    LeaderWorkerSetController,
    make_leader_worker_set,
)
from tests.e2e.kueue.util import (
    AGNHOST,
    AGNHOST_OLD,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    QUEUE_LABEL,
    SCHEDULING_GATE,
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
    make_workload_priority_class,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/extended/leaderworkerset_test.go"
TITLE = "LeaderWorkerSet integration LeaderWorkerSet created "
CRD = Path(__file__).resolve().parents[3] / "tests" / "data" / "lws"
VERY_LONG_TIMEOUT = 300.0  # util.VeryLongTimeout
CONSISTENT_DURATION = 1.0  # util.ConsistentDuration


@pytest.fixture(scope="module")
def lws_crd(tower: Any) -> None:
    """The LeaderWorkerSet CRD of LWS v0.9.0 (Kueue's e2e cluster installs LWS)."""
    kubectl(
        "apply", "--server-side", "-f", str(CRD / "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    )
    crd = "crd/leaderworkersets.leaderworkerset.x-k8s.io"
    eventually(
        lambda: "condition met" in kubectl("wait", "--for=condition=Established", crd, check=False),
        TIMEOUT,
        "the LeaderWorkerSet CRD to be established",
    )


class Lws:
    """The test's handle on LeaderWorkerSets of one namespace, and the played controller."""

    def __init__(self, cluster: Cluster, ns: str) -> None:
        self.cluster, self.ns = cluster, ns
        self.custom = cluster.custom
        self.controller = LeaderWorkerSetController(cluster.api, ns)

    def create(self, **kwargs: Any) -> dict[str, Any]:
        name = kwargs.pop("name", "lws")
        body = make_leader_worker_set(name, self.ns, **kwargs)
        return self.custom.create_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, body)

    def get(self, name: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)

    def update(self, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Get, change, Update, again on a conflict (Kueue's Eventually around an Update)."""

        def write() -> bool:
            lws = self.get(name)
            change(lws)
            try:
                self.custom.replace_namespaced_custom_object(
                    GROUP, VERSION, self.ns, PLURAL, name, lws
                )
            except client.ApiException as err:
                raise AssertionError(f"update refused: {err.status} {err.body}") from None
            return True

        eventually(write, TIMEOUT, f"{name} updated")

    def scale(self, name: str, replicas: int) -> None:
        self.update(name, lambda lws: lws["spec"].update(replicas=replicas))

    def workload_key(self, lws: dict[str, Any], index: int) -> str:
        """util.WorkloadKeyForLeaderWorkerSet / leaderworkerset.GetWorkloadName."""
        meta = lws["metadata"]
        return workload_name("LeaderWorkerSet", GROUP, f"{meta['name']}-{index}", meta["uid"])

    def expect_ready(self, name: str, ready: int, timeout: float = MEDIUM_TIMEOUT) -> None:
        """ReadyReplicas == ready and Available True with reason AllGroupsReady."""

        def check() -> bool:
            self.assert_no_errors()
            lws = self.get(name)
            got = int((lws.get("status") or {}).get("readyReplicas") or 0)
            assert got == ready, f"{name}: {got} ready replicas, want {ready}"
            available = condition(lws, "Available")
            assert (available.get("status"), available.get("reason")) == (
                "True",
                "AllGroupsReady",
            ), available
            return True

        eventually(check, timeout, f"{name}: {ready} ready and Available")

    def expect_unavailable(self, name: str, timeout: float = LONG_TIMEOUT) -> None:
        """ReadyReplicas 0, Progressing True (GroupsProgressing), Available False (AllGroupsReady)."""

        def check() -> bool:
            lws = self.get(name)
            got = int((lws.get("status") or {}).get("readyReplicas") or 0)
            assert got == 0, f"{name}: {got} ready replicas"
            progressing, available = condition(lws, "Progressing"), condition(lws, "Available")
            assert (progressing.get("status"), progressing.get("reason")) == (
                "True",
                "GroupsProgressing",
            ), progressing
            assert (available.get("status"), available.get("reason")) == (
                "False",
                "AllGroupsReady",
            ), available
            return True

        eventually(check, timeout, f"{name}: not ready")

    def pods(self, name: str) -> list[Any]:
        return self.cluster.core.list_namespaced_pod(
            self.ns, label_selector=f"{SET_NAME}={name}"
        ).items

    def delete(self, name: str) -> None:
        """util.ExpectObjectToBeDeleted(lws, true)."""
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)
        except client.ApiException as err:
            if err.status != 404:
                raise

        def gone() -> bool:
            try:
                self.get(name)
            except client.ApiException as err:
                return err.status == 404
            return False

        eventually(gone, LONG_TIMEOUT, f"{name} deleted")

    def expect_pods_deleted(self, name: str, timeout: float = MEDIUM_TIMEOUT) -> None:
        eventually(
            lambda: (
                not (left := self.pods(name))
                or (AssertionError(f"pods left: {[p.metadata.name for p in left]}") and False)
            ),
            timeout,
            f"{name}'s pods to be deleted",
        )

    def expect_workload_gone(self, key: str, timeout: float = MEDIUM_TIMEOUT) -> None:
        """util.ExpectObjectToBeDeletedWithTimeout(wl, false, timeout)."""
        eventually(lambda: self.cluster.workload(key, self.ns) is None, timeout, f"{key} deleted")

    def expect_admitted(self, *keys: str, timeout: float = MEDIUM_TIMEOUT) -> None:
        """util.ExpectWorkloadsToBeAdmittedByKeys."""
        for key in keys:
            eventually(lambda k=key: is_admitted(self.cluster.workload(k, self.ns)), timeout,
                       f"{key} admitted")  # fmt: skip

    def expect_priority(self, key: str, wpc: str, value: int) -> None:
        """util.ExpectWorkloadsWithWorkloadPriority."""

        def check() -> bool:
            wl = self.cluster.workload(key, self.ns)
            assert wl is not None, f"workload {key} not found"
            ref = wl["spec"].get("priorityClassRef") or {}
            assert (ref.get("group"), ref.get("kind"), ref.get("name")) == (
                "kueue.x-k8s.io", "WorkloadPriorityClass", wpc,
            ), ref  # fmt: skip
            assert wl["spec"].get("priority") == value, wl["spec"].get("priority")
            return True

        eventually(check, TIMEOUT, f"{key} of priority {wpc}")

    def assert_no_errors(self) -> None:
        assert not self.controller.errors, f"the played LWS controller: {self.controller.errors}"


@pytest.fixture
def lq(cluster: Cluster, ns: str, lws_crd: None) -> Iterator[str]:
    """The BeforeEach: flavor on-demand, a ClusterQueue of 5 cpu (1250m, see the module's
    docstring) preempting within by priority, its LocalQueue (yielded)."""
    rf, cq, lq = f"lws-rf-{ns}", f"lws-cq-{ns}", f"lws-lq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(rf, {"instance-type": "on-demand"}))
    cluster.create_active("clusterqueues", make_cluster_queue(
        cq, make_flavor_quotas(rf, cpu="1250m"),
        preemption={"withinClusterQueue": "LowerPriority"},
    ))  # fmt: skip
    cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
    yield lq
    for item in cluster.custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]:
        cluster.custom.delete_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, item["metadata"]["name"]
        )
    cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", lq, ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", rf)


@pytest.fixture
def lws(cluster: Cluster, ns: str, lq: str) -> Iterator[Lws]:
    handle = Lws(cluster, ns)
    yield handle
    handle.controller.stop()


def _delete_and_expect_gone(
    lws: Lws, name: str, *keys: str, pods_timeout: float = MEDIUM_TIMEOUT
) -> None:
    """The cases' ending: delete the set, its pods go, then its Workloads."""
    lws.delete(name)
    lws.expect_pods_deleted(name, pods_timeout)
    for key in keys:
        lws.expect_workload_gone(key)


@kueue_case(GO, TITLE + "should admit group with leader only")
def test_admit_group_with_leader_only(lws: Lws, lq: str) -> None:
    created = lws.create(queue=lq, size=1, replicas=1)
    lws.expect_ready("lws", 1)
    key = lws.workload_key(created, 0)
    wl = lws.cluster.workload(key, lws.ns)
    assert wl is not None, f"workload {key} not found"
    assert wl["metadata"]["labels"].get("kueue.x-k8s.io/job-uid") == created["metadata"]["uid"]
    _delete_and_expect_gone(lws, "lws", key)


@kueue_case(GO, TITLE + "should admit group with leader and workers")
def test_admit_group_with_leader_and_workers(lws: Lws, lq: str) -> None:
    created = lws.create(queue=lq, size=3, replicas=1)
    lws.expect_ready("lws", 1)
    key = lws.workload_key(created, 0)
    assert lws.cluster.workload(key, lws.ns) is not None, f"workload {key} not found"
    _delete_and_expect_gone(lws, "lws", key)


@kueue_case(GO, TITLE + "should admit group with multiple leaders and workers that fits")
def test_admit_multiple_groups_that_fit(lws: Lws, lq: str) -> None:
    created = lws.create(queue=lq, size=3, replicas=2)
    lws.expect_ready("lws", 2)
    keys = [lws.workload_key(created, i) for i in range(2)]
    for key in keys:
        assert lws.cluster.workload(key, lws.ns) is not None, f"workload {key} not found"
    _delete_and_expect_gone(lws, "lws", *keys)


def _scale_up(lws: Lws, lq: str, policy: str) -> None:
    created = lws.create(queue=lq, size=3, replicas=1, startup_policy=policy)
    lws.expect_ready("lws", 1)
    first, second = lws.workload_key(created, 0), lws.workload_key(created, 1)
    assert lws.cluster.workload(first, lws.ns) is not None, f"workload {first} not found"
    lws.scale("lws", 2)
    lws.expect_ready("lws", 2)
    assert lws.cluster.workload(first, lws.ns) is not None, f"workload {first} is gone"
    assert lws.cluster.workload(second, lws.ns) is not None, f"workload {second} not found"
    lws.delete("lws")
    lws.expect_pods_deleted("lws")
    lws.expect_workload_gone(first, VERY_LONG_TIMEOUT)
    lws.expect_workload_gone(second, VERY_LONG_TIMEOUT)


@kueue_case(GO, TITLE + "should allow to scale up LeaderCreatedStartupPolicy")
def test_scale_up_leader_created(lws: Lws, lq: str) -> None:
    _scale_up(lws, lq, "LeaderCreated")


@kueue_case(GO, TITLE + "should allow to scale up LeaderReadyStartupPolicy")
def test_scale_up_leader_ready(lws: Lws, lq: str) -> None:
    _scale_up(lws, lq, "LeaderReady")


def _scale_down(lws: Lws, lq: str, policy: str) -> None:
    created = lws.create(queue=lq, size=3, replicas=2, startup_policy=policy)
    lws.expect_ready("lws", 2)
    first, second = lws.workload_key(created, 0), lws.workload_key(created, 1)
    for key in (first, second):
        assert lws.cluster.workload(key, lws.ns) is not None, f"workload {key} not found"
    lws.scale("lws", 1)
    lws.expect_ready("lws", 1)
    assert lws.cluster.workload(first, lws.ns) is not None, f"workload {first} is gone"

    def released() -> bool:
        wl = lws.cluster.workload(second, lws.ns)
        assert wl is None or not wl["metadata"].get("ownerReferences"), wl["metadata"]
        return True

    eventually(released, MEDIUM_TIMEOUT, f"{second} released")
    lws.delete("lws")
    lws.expect_pods_deleted("lws")
    lws.expect_workload_gone(first)
    # util.ExpectObjectToBeDeleted(wl2, true): deleted by the test if still there.
    lws.cluster.delete("workloads", second, lws.ns)
    lws.expect_workload_gone(second, LONG_TIMEOUT)


@kueue_case(GO, TITLE + "should allow to scale down LeaderCreatedStartupPolicy")
def test_scale_down_leader_created(lws: Lws, lq: str) -> None:
    _scale_down(lws, lq, "LeaderCreated")


@kueue_case(GO, TITLE + "should allow to scale down LeaderReadyStartupPolicy")
def test_scale_down_leader_ready(lws: Lws, lq: str) -> None:
    _scale_down(lws, lq, "LeaderReady")


def _scale_up_down_fast(lws: Lws, lq: str, policy: str) -> None:
    created = lws.create(queue=lq, size=3, replicas=1, startup_policy=policy)
    lws.expect_ready("lws", 1)
    first, second = lws.workload_key(created, 0), lws.workload_key(created, 1)
    assert lws.cluster.workload(first, lws.ns) is not None, f"workload {first} not found"
    lws.scale("lws", 2)
    lws.scale("lws", 1)
    lws.expect_ready("lws", 1)
    assert lws.cluster.workload(first, lws.ns) is not None, f"workload {first} is gone"
    lws.expect_workload_gone(second)
    _delete_and_expect_gone(lws, "lws", first)


@kueue_case(GO, TITLE + "should allow to scale up, scale down fast LeaderCreatedStartupPolicy")
def test_scale_up_down_fast_leader_created(lws: Lws, lq: str) -> None:
    _scale_up_down_fast(lws, lq, "LeaderCreated")


@kueue_case(GO, TITLE + "should allow to scale up, scale down fast LeaderReadyStartupPolicy")
def test_scale_up_down_fast_leader_ready(lws: Lws, lq: str) -> None:
    _scale_up_down_fast(lws, lq, "LeaderReady")


def _different_resource_needs(lws: Lws, lq: str, policy: str) -> None:
    created = lws.create(queue=lq, size=3, replicas=2, leader_cpu="150m", startup_policy=policy)
    lws.expect_ready("lws", 2)
    keys = [lws.workload_key(created, i) for i in range(2)]
    for key in keys:
        assert lws.cluster.workload(key, lws.ns) is not None, f"workload {key} not found"
    _delete_and_expect_gone(lws, "lws", *keys)


@kueue_case(
    GO,
    TITLE + "should admit group with multiple leaders and workers that fits and have different "
    "resource needs LeaderCreatedStartupPolicy",
)
def test_different_resource_needs_leader_created(lws: Lws, lq: str) -> None:
    _different_resource_needs(lws, lq, "LeaderCreated")


@kueue_case(
    GO,
    TITLE + "should admit group with multiple leaders and workers that fits and have different "
    "resource needs LeaderReadyStartupPolicy",
)
def test_different_resource_needs_leader_ready(lws: Lws, lq: str) -> None:
    _different_resource_needs(lws, lq, "LeaderReady")


def _set_images(image: str, *which: str) -> Callable[[dict[str, Any]], None]:
    def change(lws: dict[str, Any]) -> None:
        for template in which:
            containers = lws["spec"]["leaderWorkerTemplate"][template]["spec"]["containers"]
            assert len(containers) == 1, containers
            containers[0]["image"] = image

    return change


@kueue_case(GO, TITLE + "should allow to update the PodTemplate in LeaderWorkerSet")
def test_update_pod_template(lws: Lws, lq: str) -> None:
    created = lws.create(queue=lq, size=2, replicas=2, image=AGNHOST_OLD, leader_cpu="150m")
    lws.expect_ready("lws", 2)
    lws.update("lws", _set_images(AGNHOST, "leaderTemplate", "workerTemplate"))

    def replaced() -> bool:
        pods = lws.pods("lws")
        assert len(pods) == 4, [p.metadata.name for p in pods]
        images = {p.metadata.name: p.spec.containers[0].image for p in pods}
        assert set(images.values()) == {AGNHOST}, images
        return True

    eventually(replaced, VERY_LONG_TIMEOUT, "the pods replaced with the new template")
    lws.expect_ready("lws", 2)
    keys = [lws.workload_key(created, i) for i in range(2)]
    for key in keys:
        assert lws.cluster.workload(key, lws.ns) is not None, f"workload {key} not found"
    _delete_and_expect_gone(lws, "lws", *keys, pods_timeout=LONG_TIMEOUT)


@kueue_case(
    GO,
    TITLE + "Rolling update with maxSurge creates workloads for surge pods and completes "
    "successfully",
)
def test_rolling_update_with_max_surge(lws: Lws, lq: str) -> None:
    replicas, max_surge, max_unavailable = 4, 2, 2
    body = make_leader_worker_set(
        "lws-rollout", lws.ns, queue=lq, size=1, replicas=replicas, image=AGNHOST_OLD
    )
    body["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": max_unavailable, "maxSurge": max_surge},
    }
    created = lws.custom.create_namespaced_custom_object(GROUP, VERSION, lws.ns, PLURAL, body)
    lws.expect_ready("lws-rollout", replicas)
    for i in range(replicas):
        key = lws.workload_key(created, i)
        assert lws.cluster.workload(key, lws.ns) is not None, f"workload {key} not found"
    lws.update("lws-rollout", _set_images(AGNHOST, "workerTemplate"))
    surge = {lws.workload_key(created, i) for i in range(replicas, replicas + max_surge)}
    seen: set[str] = set()

    def surged() -> bool:
        seen.update(
            surge & {wl["metadata"]["name"] for wl in lws.cluster.list("workloads", lws.ns)}
        )
        assert seen == surge, f"surge workloads seen so far: {sorted(seen)} of {sorted(surge)}"
        return True

    eventually(surged, MEDIUM_TIMEOUT, f"the {max_surge} surge workloads")

    def rolled_out() -> bool:
        status = lws.get("lws-rollout").get("status") or {}
        assert status.get("updatedReplicas") == replicas, status
        assert status.get("readyReplicas") == replicas, status
        available = condition(lws.get("lws-rollout"), "Available")
        assert (available.get("status"), available.get("reason")) == ("True", "AllGroupsReady")
        phases = {p.metadata.name: p.status.phase for p in lws.pods("lws-rollout")}
        assert set(phases.values()) == {"Running"}, phases
        return True

    eventually(rolled_out, VERY_LONG_TIMEOUT, "the rollout to complete")
    for key in sorted(surge):
        lws.expect_workload_gone(key, TIMEOUT)
    lws.delete("lws-rollout")


def _expect_gated(lws: Lws, name: str, count: int) -> None:
    def gated() -> bool:
        pods = lws.pods(name)
        assert len(pods) == count, [p.metadata.name for p in pods]
        for pod in pods:
            gates = [g.name for g in pod.spec.scheduling_gates or []]
            assert SCHEDULING_GATE in gates, f"{pod.metadata.name}: gates {gates}"
        return True

    eventually(gated, MEDIUM_TIMEOUT, f"{name}'s {count} pods gated")


def _set_active(lws: Lws, key: str, active: bool) -> None:
    def write() -> bool:
        wl = lws.cluster.workload(key, lws.ns)
        assert wl is not None, f"workload {key} not found"
        wl["spec"]["active"] = active
        try:
            lws.custom.replace_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", lws.ns, "workloads", key, wl
            )
        except client.ApiException as err:
            raise AssertionError(f"update refused: {err.status}") from None
        return True

    eventually(write, TIMEOUT, f"{key} active={active}")


@kueue_case(GO, TITLE + "should admit and evict correctly when queue-name is set on pod templates")
def test_queue_name_on_pod_templates(lws: Lws, lq: str) -> None:
    created = lws.create(queue=lq, size=3, replicas=1, worker_labels={QUEUE_LABEL: "user-queue"})
    key = lws.workload_key(created, 0)
    lws.expect_admitted(key)
    lws.expect_ready("lws", 1)
    _set_active(lws, key, False)
    _expect_gated(lws, "lws", 3)
    _delete_and_expect_gone(lws, "lws", key, pods_timeout=LONG_TIMEOUT)


@kueue_case(GO, TITLE + "should allow to change queue-name if ReadyReplicas=0")
def test_change_queue_name_while_not_ready(lws: Lws, lq: str) -> None:
    created = lws.create(queue=f"{lq}-invalid", size=1, replicas=1)
    key = lws.workload_key(created, 0)

    def inadmissible() -> bool:
        reserved = condition(lws.cluster.workload(key, lws.ns), "QuotaReserved")
        assert (reserved.get("status"), reserved.get("reason")) == ("False", "Inadmissible"), (
            reserved
        )
        return True

    eventually(inadmissible, MEDIUM_TIMEOUT, f"{key} inadmissible")
    ready = int((lws.get("lws").get("status") or {}).get("readyReplicas") or 0)
    assert ready == 0, f"{ready} ready replicas"
    lws.update("lws", lambda obj: obj["metadata"]["labels"].update({QUEUE_LABEL: lq}))
    lws.expect_admitted(key)
    eventually(
        lambda: int((lws.get("lws").get("status") or {}).get("readyReplicas") or 0) == 1,
        LONG_TIMEOUT,
        "1 ready replica",
    )


@pytest.fixture
def priorities(cluster: Cluster, ns: str) -> Iterator[tuple[str, str]]:
    """The WorkloadPriorityClass cases' BeforeEach: high (5000) and low (1000)."""
    high, low = f"high-priority-{ns}", f"low-priority-{ns}"
    cluster.create("workloadpriorityclasses", make_workload_priority_class(high, 5000))
    cluster.create("workloadpriorityclasses", make_workload_priority_class(low, 1000))
    yield high, low
    cluster.expect_deleted("workloadpriorityclasses", high)
    cluster.expect_deleted("workloadpriorityclasses", low)


WPC_TITLE = "LeaderWorkerSet integration LeaderWorkerSet created with WorkloadPriorityClass "


@kueue_case(GO, WPC_TITLE + "should allow to update the PodTemplate in LeaderWorkerSet")
def test_priority_preempts_lower(lws: Lws, lq: str, priorities: tuple[str, str]) -> None:
    high, low = priorities
    low_lws = lws.create(name="low-priority", queue=lq, size=3, cpu="250m", priority_class=low)
    lws.expect_ready("low-priority", 1)
    low_key = lws.workload_key(low_lws, 0)
    lws.expect_priority(low_key, low, 1000)
    lws.expect_admitted(low_key, timeout=TIMEOUT)
    high_lws = lws.create(name="high-priority", queue=lq, size=3, cpu="250m", priority_class=high)
    lws.expect_ready("high-priority", 1)
    lws.expect_unavailable("low-priority")
    high_key = lws.workload_key(high_lws, 0)
    lws.expect_priority(high_key, high, 5000)
    lws.expect_admitted(high_key, timeout=TIMEOUT)

    def preempted() -> bool:
        wl = lws.cluster.workload(low_key, lws.ns)
        assert condition(wl, "Admitted").get("status") == "False", condition(wl, "Admitted")
        assert condition(wl, "Preempted").get("status") == "True", condition(wl, "Preempted")
        return True

    eventually(preempted, TIMEOUT, f"{low_key} preempted")


@kueue_case(GO, WPC_TITLE + "should allow to update the workload priority in LeaderWorkerSet")
def test_update_workload_priority(lws: Lws, lq: str, priorities: tuple[str, str]) -> None:
    high, low = priorities
    low_lws = lws.create(name="low-priority", queue=lq, size=3, cpu="250m", priority_class=low)
    lws.expect_ready("low-priority", 1)
    low_key = lws.workload_key(low_lws, 0)
    lws.expect_priority(low_key, low, 1000)
    lws.expect_admitted(low_key, timeout=TIMEOUT)
    other = lws.create(name="updatable-priority", queue=lq, size=3, cpu="250m", priority_class=low)
    other_key = lws.workload_key(other, 0)
    lws.expect_priority(other_key, low, 1000)
    lws.update(
        "updatable-priority",
        lambda obj: obj["metadata"]["labels"].update({"kueue.x-k8s.io/priority-class": high}),
    )
    lws.expect_priority(other_key, high, 5000)
    eventually(
        lambda: (
            condition(lws.cluster.workload(low_key, lws.ns), "Preempted").get("status") == "True"
        ),
        MEDIUM_TIMEOUT,
        f"{low_key} preempted",
    )
    lws.expect_unavailable("low-priority")
    lws.expect_admitted(other_key, timeout=TIMEOUT)


RESTART_TITLE = "LeaderWorkerSet integration LeaderWorkerSet created with Restart Policy "


def _delete_a_worker(lws: Lws, created: dict[str, Any]) -> tuple[set[str], Any]:
    lws.expect_ready("lws", 1)
    key = lws.workload_key(created, 0)
    assert lws.cluster.workload(key, lws.ns) is not None, f"workload {key} not found"
    pods = lws.pods("lws")
    assert len(pods) == 3, [p.metadata.name for p in pods]
    uids = {p.metadata.uid for p in pods}
    worker = next(p for p in pods if p.metadata.labels[WORKER_INDEX] != "0")
    lws.cluster.core.delete_namespaced_pod(worker.metadata.name, lws.ns)

    def recreated() -> bool:
        pod = lws.cluster.core.read_namespaced_pod(worker.metadata.name, lws.ns)
        assert pod.metadata.uid != worker.metadata.uid, "not recreated yet"
        return True

    def read_recreated() -> bool:
        try:
            return recreated()
        except client.ApiException as err:
            raise AssertionError(f"{worker.metadata.name}: {err.status}") from None

    eventually(read_recreated, LONG_TIMEOUT, f"{worker.metadata.name} recreated")
    return uids, worker


def _expect_all_running(lws: Lws) -> None:
    def running() -> bool:
        pods = lws.pods("lws")
        assert len(pods) == 3, [p.metadata.name for p in pods]
        phases = {p.metadata.name: p.status.phase for p in pods}
        assert set(phases.values()) == {"Running"}, phases
        return True

    eventually(running, LONG_TIMEOUT, "all pods running")


@kueue_case(
    GO, RESTART_TITLE + "should recreate pods when policy is set to RecreateGroupOnPodRestart"
)
def test_restart_recreates_group(lws: Lws, lq: str) -> None:
    created = lws.create(queue=lq, size=3, restart_policy="RecreateGroupOnPodRestart")
    uids, _ = _delete_a_worker(lws, created)

    def all_new() -> bool:
        survived = uids & {p.metadata.uid for p in lws.pods("lws")}
        assert not survived, f"{len(survived)} original pods survived"
        return True

    eventually(all_new, LONG_TIMEOUT, "all pods recreated")
    _expect_all_running(lws)


@kueue_case(
    GO,
    RESTART_TITLE + "should only recreate the deleted pod when policy is set to NoneRestartPolicy",
)
def test_restart_none_recreates_only_the_pod(lws: Lws, lq: str) -> None:
    created = lws.create(queue=lq, size=3, restart_policy="None")
    uids, worker = _delete_a_worker(lws, created)

    def only_one_new() -> bool:
        pods = lws.pods("lws")
        assert len(pods) == 3, [p.metadata.name for p in pods]
        current = {p.metadata.uid for p in pods}
        survived, new = uids & current, current - uids
        assert len(survived) == 2, survived
        assert worker.metadata.uid not in survived, "the deleted pod survived"
        assert len(new) == 1, new
        return True

    eventually(only_one_new, LONG_TIMEOUT, "only the deleted pod recreated")
    _expect_all_running(lws)


@kueue_case(
    GO, "LeaderWorkerSet integration Workload deactivated shouldn't delete deactivated Workload"
)
def test_deactivated_workload_is_kept(lws: Lws, lq: str) -> None:
    created = lws.create(queue=lq, size=3, replicas=1)
    lws.expect_ready("lws", 1)
    key = lws.workload_key(created, 0)
    wl = lws.cluster.workload(key, lws.ns)
    assert wl is not None, f"workload {key} not found"
    uid = wl["metadata"]["uid"]
    _set_active(lws, key, False)

    def not_ready() -> bool:
        obj = lws.get("lws")
        got = int((obj.get("status") or {}).get("readyReplicas") or 0)
        assert got == 0, f"{got} ready replicas"
        available = condition(obj, "Available")
        assert (available.get("status"), available.get("reason")) == ("False", "AllGroupsReady")
        return True

    eventually(not_ready, LONG_TIMEOUT, "no ready replica")
    _expect_gated(lws, "lws", 3)

    def kept() -> bool:
        now = lws.cluster.workload(key, lws.ns)
        assert now is not None, f"workload {key} is gone"
        assert now["metadata"]["uid"] == uid, "the workload was replaced"
        assert now["spec"].get("active") is False, now["spec"].get("active")
        return True

    consistently(kept, CONSISTENT_DURATION, f"{key} kept, deactivated")
    _set_active(lws, key, True)
    lws.expect_ready("lws", 1)

    def readmitted() -> bool:
        now = lws.cluster.workload(key, lws.ns)
        assert now is not None, f"workload {key} is gone"
        assert now["metadata"]["uid"] == uid, "the workload was replaced"
        assert is_admitted(now), condition(now, "Admitted")
        return True

    eventually(readmitted, TIMEOUT, f"{key} admitted again")
    _delete_and_expect_gone(lws, "lws", key, pods_timeout=LONG_TIMEOUT)

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
    LeaderWorkerSetController,
    make_leader_worker_set,
)
from tests.e2e.kueue.util import (
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    condition,
    eventually,
    is_admitted,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
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

"""Kueue v0.19.2 test/e2e/singlecluster/baseline/e2e_v1beta1_test.go, ported case by case.

Every Kueue object here is written and read through kueue.x-k8s.io/v1beta1, which Tower
serves beside v1beta2 (its CRDs convert between them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    KUEUE,
    LONG_TIMEOUT,
    TIMEOUT,
    Cluster,
    condition,
    eventually,
    is_finished,
    make_job,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/e2e_v1beta1_test.go"
V1BETA1 = "v1beta1"


def sample_job(namespace: str, **overrides: Any) -> dict:
    """The BeforeEach's sampleJob: queue main, agnhost waiting for deletion, 1 cpu, 20Mi."""
    return make_job(
        "test-job", namespace, queue="main", requests={"cpu": "1", "memory": "20Mi"}, **overrides
    )


class V1beta1:
    """Kueue's objects through the v1beta1 API (utiltestingapi of pkg/util/testing/v1beta1)."""

    def __init__(self, cluster: Cluster) -> None:
        self.custom = cluster.custom

    def create(self, plural: str, body: dict, namespace: str | None = None) -> dict:
        body = {"apiVersion": f"{KUEUE}/{V1BETA1}", **body}
        if namespace is None:
            return self.custom.create_cluster_custom_object(KUEUE, V1BETA1, plural, body)
        return self.custom.create_namespaced_custom_object(KUEUE, V1BETA1, namespace, plural, body)

    def get(self, plural: str, name: str, namespace: str | None = None) -> dict | None:
        try:
            if namespace is None:
                return self.custom.get_cluster_custom_object(KUEUE, V1BETA1, plural, name)
            return self.custom.get_namespaced_custom_object(KUEUE, V1BETA1, namespace, plural, name)
        except client.ApiException as err:
            if err.status == 404:
                return None
            raise

    def delete(self, plural: str, name: str, namespace: str | None = None) -> None:
        try:
            if namespace is None:
                self.custom.delete_cluster_custom_object(KUEUE, V1BETA1, plural, name)
            else:
                self.custom.delete_namespaced_custom_object(KUEUE, V1BETA1, namespace, plural, name)
        except client.ApiException as err:
            if err.status != 404:
                raise

    def expect_deleted(self, plural: str, name: str) -> None:
        self.delete(plural, name)
        eventually(lambda: self.get(plural, name) is None, LONG_TIMEOUT, f"{plural}/{name} gone")


def has_quota_reservation(wl: dict | None) -> bool:
    return condition(wl, "QuotaReserved").get("status") == "True"


@kueue_case(
    GO, "Kueue v1beta1 Creating a Job without a matching LocalQueue Should stay in suspended"
)
def test_without_a_matching_local_queue_stays_suspended(cluster: Cluster, ns: str) -> None:
    api = V1beta1(cluster)
    job = cluster.batch.create_namespaced_job(ns, sample_job(ns))
    eventually(
        lambda: cluster.batch.read_namespaced_job("test-job", ns).spec.suspend is True,
        TIMEOUT,
        "the job to be suspended",
    )
    wl_name = cluster.workload_for_job(job, ns)

    def created_without_reservation() -> bool:
        wl = api.get("workloads", wl_name, ns)
        assert wl is not None, f"workload {wl_name} not created"
        assert wl["apiVersion"] == f"{KUEUE}/{V1BETA1}", wl["apiVersion"]
        return not has_quota_reservation(wl)

    eventually(created_without_reservation, TIMEOUT, "the workload, without quota")
    cluster.batch.delete_namespaced_job("test-job", ns)


@pytest.fixture
def queueing(cluster: Cluster, ns: str) -> Iterator[V1beta1]:
    """When("Creating a Job With Queueing")'s BeforeEach and AfterEach, in v1beta1."""
    api = V1beta1(cluster)
    on_demand, spot, cq = f"on-demand-{ns}", f"spot-{ns}", f"cluster-queue-{ns}"
    for name, kind in ((on_demand, "on-demand"), (spot, "spot")):
        api.create("resourceflavors", {"kind": "ResourceFlavor", "metadata": {"name": name},
                                       "spec": {"nodeLabels": {"instance-type": kind}}})  # fmt: skip
    quotas = [{"name": f, "resources": [{"name": "cpu", "nominalQuota": "1"},
                                        {"name": "memory", "nominalQuota": "1Gi"}]}
              for f in (on_demand, spot)]  # fmt: skip
    api.create("clusterqueues", {
        "kind": "ClusterQueue", "metadata": {"name": cq},
        "spec": {"namespaceSelector": {},
                 "resourceGroups": [{"coveredResources": ["cpu", "memory"], "flavors": quotas}],
                 "preemption": {"withinClusterQueue": "LowerPriority"}},
    })  # fmt: skip
    api.create("localqueues", {"kind": "LocalQueue", "metadata": {"name": "main", "namespace": ns},
                               "spec": {"clusterQueue": cq}}, ns)  # fmt: skip
    yield api
    cluster.batch.delete_collection_namespaced_cron_job(ns)
    cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    api.delete("localqueues", "main", ns)
    api.expect_deleted("clusterqueues", cq)
    api.expect_deleted("resourceflavors", on_demand)
    api.expect_deleted("resourceflavors", spot)


@kueue_case(
    GO, "Kueue v1beta1 Creating a Job With Queueing Should unsuspend a job and set nodeSelectors"
)
def test_unsuspends_a_job_and_sets_node_selectors(
    cluster: Cluster, ns: str, queueing: V1beta1
) -> None:
    job = cluster.batch.create_namespaced_job(ns, sample_job(ns, args=BEHAVIOR_EXIT_FAST))
    cluster.expect_job_unsuspended_with_node_selectors(
        "test-job", ns, {"instance-type": "on-demand"}
    )
    wl_name = cluster.workload_for_job(job, ns)
    eventually(
        lambda: is_finished(queueing.get("workloads", wl_name, ns)),
        LONG_TIMEOUT,
        "the workload to finish",
    )

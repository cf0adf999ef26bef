"""Kueue v0.19.2 test/e2e/singlecluster/baseline/hierarchical_cohort_test.go, ported case by case."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes.utils import parse_quantity

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    KUEUE,
    LONG_TIMEOUT,
    Cluster,
    V,
    consistently,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/hierarchical_cohort_test.go"


@pytest.fixture
def borrowing_tree(cluster: Cluster, ns: str) -> Iterator[str]:
    """root (1 cpu) <- child (no quota) <- cq (0 cpu), and LocalQueue lq; yields the cq."""
    rf, root, child, cq = f"rf-{ns}", f"root-{ns}", f"child-{ns}", f"cq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(rf))
    quotas = make_flavor_quotas(rf, cpu="1")
    cluster.create("cohorts", {"apiVersion": f"{KUEUE}/{V}", "kind": "Cohort",
                               "metadata": {"name": root},
                               "spec": {"resourceGroups": [{"coveredResources": ["cpu"],
                                                            "flavors": [quotas]}]}})  # fmt: skip
    cluster.create("cohorts", {"apiVersion": f"{KUEUE}/{V}", "kind": "Cohort",
                               "metadata": {"name": child}, "spec": {"parentName": root}})  # fmt: skip
    zero = make_flavor_quotas(rf, cpu="0")
    cluster.create_active("clusterqueues", make_cluster_queue(cq, zero, cohortName=child))
    cluster.create_active("localqueues", make_local_queue("lq", ns, cq), ns)
    yield cq
    cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", "lq", ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("cohorts", child)
    cluster.expect_deleted("cohorts", root)
    cluster.expect_deleted("resourceflavors", rf)


def _job(name: str, ns: str) -> dict:
    job = make_job(name, ns, queue="lq", requests={"cpu": "500m"})
    job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    return job


@kueue_case(
    GO,
    "Hierarchical Cohort a zero-quota ClusterQueue borrows from a root through a structural "
    "child Cohort should admit workloads through hierarchical borrowing",
)
def test_admits_through_hierarchical_borrowing(
    cluster: Cluster, ns: str, borrowing_tree: str
) -> None:
    cq = borrowing_tree
    for i in range(2):
        cluster.batch.create_namespaced_job(ns, _job(f"job-{i + 1}", ns))

    def status(admitted: int, pending: int) -> bool:
        got = cluster.get("clusterqueues", cq).get("status") or {}
        assert got.get("admittedWorkloads", 0) == admitted, got
        assert got.get("pendingWorkloads", 0) == pending, got
        usage = got["flavorsUsage"][0]["resources"][0]
        assert parse_quantity(usage["total"]) == 1, usage
        assert parse_quantity(usage["borrowed"]) == 1, usage
        return True

    eventually(lambda: status(2, 0), LONG_TIMEOUT, "two admitted, 1 cpu borrowed")
    cluster.batch.create_namespaced_job(ns, _job("job-overflow", ns))

    def one_pending() -> bool:
        got = cluster.get("clusterqueues", cq).get("status") or {}
        assert got.get("pendingWorkloads", 0) == 1, got
        return True

    eventually(one_pending, LONG_TIMEOUT, "the overflow job pending")
    consistently(lambda: status(2, 1), 1.0)

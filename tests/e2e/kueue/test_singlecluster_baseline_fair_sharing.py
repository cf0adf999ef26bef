"""Kueue v0.19.2 test/e2e/singlecluster/baseline/fair_sharing_test.go, ported case by case."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    TIMEOUT,
    Cluster,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/fair_sharing_test.go"


@pytest.fixture
def cohort(cluster: Cluster, ns: str) -> Iterator[list[str]]:
    """The BeforeEach: three ClusterQueues of 9 cpu and 36G in one cohort, a LocalQueue each."""
    rf = f"rf-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(rf))
    names = [f"cq{i}-{ns}" for i in (1, 2, 3)]
    for i, name in enumerate(names, 1):
        quotas = make_flavor_quotas(rf, cpu="9", memory="36G")
        cluster.create_active(
            "clusterqueues", make_cluster_queue(name, quotas, cohortName=f"cohort-{ns}")
        )
        cluster.create_active("localqueues", make_local_queue(f"lq{i}", ns, name), ns)
    yield names
    cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    for i in (1, 2, 3):
        cluster.delete("localqueues", f"lq{i}", ns)
    for name in names:
        cluster.expect_deleted("clusterqueues", name)
    cluster.expect_deleted("resourceflavors", rf)


@kueue_case(
    GO,
    "Fair Sharing the cluster queue starts borrowing should update the "
    "ClusterQueue.status.fairSharing.weightedShare",
)
def test_weighted_share_of_a_borrowing_cluster_queue(
    cluster: Cluster, ns: str, cohort: list[str]
) -> None:
    for i in range(4):
        job = make_job(f"j{i + 1}", ns, queue="lq1", parallelism=3, completions=3,
                       requests={"cpu": "1", "memory": "200Mi"})  # fmt: skip
        job["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 1
        cluster.batch.create_namespaced_job(ns, job)

    def shares() -> bool:
        got = {}
        for name in cohort:
            status = cluster.get("clusterqueues", name).get("status") or {}
            fair = status.get("fairSharing")
            assert fair is not None, f"{name}: no status.fairSharing"
            got[name] = (status.get("admittedWorkloads", 0), fair.get("weightedShare", 0))
        assert list(got.values()) == [(4, 112), (0, 0), (0, 0)], got
        return True

    eventually(shares, TIMEOUT, "cq1 admitting 4 with weighted share 112, the others 0")

"""Kueue v0.19.2 test/e2e/sequential/baseline/admission_fair_sharing_test.go, ported: with
admissionFairSharing (usage halved every second, sampled every second), a ClusterQueue in
UsageBasedAdmissionFairSharing mode admits from the LocalQueue that used less, and reclaims
from a cohort by preemption."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.utils import parse_quantity

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.sequential import configuration_with
from tests.e2e.kueue.util import (
    LONG_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/admission_fair_sharing_test.go"
RF = "afs-rf"
USAGE_BASED = {"admissionMode": "UsageBasedAdmissionFairSharing"}


@pytest.fixture(scope="module")
def fair_sharing(tower: Tower, api_client: client.ApiClient) -> Iterator[None]:
    """BeforeAll: the restart with admissionFairSharing, the flavor; AfterAll."""
    restart_with(
        tower,
        configuration_with(
            admissionFairSharing={"usageHalfLifeTime": "1s", "usageSamplingInterval": "1s"}
        ),
    )
    cluster = Cluster(api_client)
    cluster.create("resourceflavors", make_resource_flavor(RF))
    yield
    cluster.expect_deleted("resourceflavors", RF)
    tower.restart_controller()


@pytest.fixture
def afs_ns(fair_sharing: None, cluster: Cluster, kubelet_namespaces: set[str]) -> Iterator[str]:
    """BeforeEach's namespace from prefix afs-; JustAfterEach deletes it."""
    name = cluster.create_namespace_from_prefix("afs-")
    kubelet_namespaces.add(name)
    yield name
    cluster.delete_namespace(name)


def fair_local_queue(name: str, ns: str, cq: str) -> dict:
    lq = make_local_queue(name, ns, cq)
    lq["spec"]["fairSharing"] = {"weight": "1"}
    return lq


def job(name: str, ns: str, queue: str, cpu: str) -> dict:
    return make_job(name, ns, queue=queue, requests={"cpu": cpu, "memory": "200Mi"})


def unsuspended(cluster: Cluster, name: str, ns: str) -> bool:
    """util.ExpectJobUnsuspended's check."""
    return cluster.batch.read_namespaced_job(name, ns).spec.suspend is False


def consumed_cpu(cluster: Cluster, lq: str, ns: str) -> float:
    status = cluster.get("localqueues", lq, ns).get("status") or {}
    afs = (status.get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
    return float(parse_quantity(str((afs.get("consumedResources") or {}).get("cpu") or "0")))


@pytest.fixture
def one_queue(cluster: Cluster, afs_ns: str) -> Iterator[str]:
    cq = make_cluster_queue(
        "afs-cq", make_flavor_quotas(RF, cpu="8", memory="36G"), admissionScope=USAGE_BASED
    )
    cluster.create_active("clusterqueues", cq)
    for name in ("lq-a", "lq-b"):
        cluster.create_active("localqueues", fair_local_queue(name, afs_ns, "afs-cq"), afs_ns)
    yield afs_ns
    cluster.delete_namespace(afs_ns)
    cluster.expect_deleted("clusterqueues", "afs-cq")


@kueue_case(
    GO,
    "Admission Fair Sharing using UsageBasedAdmissionFairSharing within a ClusterQueue should "
    "prioritize LocalQueues with lower usage",
)
def test_the_local_queue_that_used_less_goes_first(cluster: Cluster, one_queue: str) -> None:
    ns = one_queue
    for name in ("job-a-1", "job-a-2"):
        cluster.batch.create_namespaced_job(ns, job(name, ns, "lq-a", "4"))
    for name in ("job-a-1", "job-a-2"):
        eventually(lambda n=name: unsuspended(cluster, n, ns), TIMEOUT, f"{name} unsuspended")
    eventually(lambda: consumed_cpu(cluster, "lq-a", ns) > 4.0, TIMEOUT, "lq-a's usage over 4")
    cluster.batch.create_namespaced_job(ns, job("job-a-3", ns, "lq-a", "4"))
    cluster.batch.create_namespaced_job(ns, job("job-b-1", ns, "lq-b", "4"))
    cluster.batch.delete_namespaced_job("job-a-1", ns, propagation_policy="Foreground")
    eventually(lambda: unsuspended(cluster, "job-b-1", ns), TIMEOUT, "job-b-1 unsuspended")
    assert cluster.batch.read_namespaced_job("job-a-3", ns).spec.suspend is True


@pytest.fixture
def cohort(cluster: Cluster, afs_ns: str) -> Iterator[str]:
    for name in ("afs-cq1", "afs-cq2"):
        cq = make_cluster_queue(
            name,
            make_flavor_quotas(RF, cpu="4", memory="12G"),
            cohortName="afs-cohort",
            admissionScope=USAGE_BASED,
            preemption={"reclaimWithinCohort": "Any"},
        )
        cluster.create_active("clusterqueues", cq)
    for name, lq in (("afs-cq1", "lq1-a"), ("afs-cq2", "lq2-a")):
        cluster.create_active("localqueues", fair_local_queue(lq, afs_ns, name), afs_ns)
    yield afs_ns
    cluster.delete_namespace(afs_ns)
    cluster.expect_deleted("clusterqueues", "afs-cq1", LONG_TIMEOUT)
    cluster.expect_deleted("clusterqueues", "afs-cq2", LONG_TIMEOUT)


@kueue_case(
    GO,
    "Admission Fair Sharing preemption is enabled across ClusterQueues in a cohort should "
    "preempt workloads when reclaiming quota from cohort",
)
def test_a_cohort_reclaims_by_preemption(cluster: Cluster, cohort: str) -> None:
    ns = cohort
    for name in ("job1-a-1", "job1-a-2"):
        cluster.batch.create_namespaced_job(ns, job(name, ns, "lq1-a", "3"))
    for name in ("job1-a-1", "job1-a-2"):
        eventually(lambda n=name: unsuspended(cluster, n, ns), TIMEOUT, f"{name} unsuspended")
    eventually(lambda: consumed_cpu(cluster, "lq1-a", ns) > 3.0, TIMEOUT, "lq1-a's usage over 3")
    cluster.batch.create_namespaced_job(ns, job("job2-a-1", ns, "lq2-a", "3"))
    eventually(lambda: unsuspended(cluster, "job2-a-1", ns), TIMEOUT, "job2-a-1 unsuspended")

    def one_admitted() -> bool:
        status = cluster.get("clusterqueues", "afs-cq1").get("status") or {}
        assert status.get("admittedWorkloads") == 1, status.get("admittedWorkloads")
        return True

    eventually(one_admitted, TIMEOUT, "afs-cq1 with one admitted workload")

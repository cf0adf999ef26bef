"""Kueue v0.19.2 test/e2e/certmanager/visibility_test.go, ported: the visibility API's pending
workloads while capacity is held by an admitted job. Tower's cert-manager deployment
(deploy/cert-manager) issues the webhook's certificate only; its visibility server keeps its
own certificate behind APIServices with insecureSkipTLSVerify (deploy/visibility), as here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    VisibilityClient,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "certmanager/visibility_test.go"


@pytest.fixture
def queues(cluster: Cluster, ns: str, visibility_api: str) -> Iterator[str]:
    cluster.create("resourceflavors", make_resource_flavor("default-flavor"))
    cluster.create_active(
        "clusterqueues",
        make_cluster_queue("cluster-queue", make_flavor_quotas("default-flavor", cpu="1")),
    )
    cluster.create_active("localqueues", make_local_queue("local-queue", ns, "cluster-queue"), ns)
    yield ns
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", "cluster-queue", MEDIUM_TIMEOUT)
    cluster.expect_deleted("resourceflavors", "default-flavor", MEDIUM_TIMEOUT)


@kueue_case(
    GO,
    "Kueue secure visibility server Capacity is maxed by the admitted job Should allow fetching "
    "information about pending workloads in ClusterQueue",
)
def test_pending_workloads_of_a_full_cluster_queue(cluster: Cluster, queues: str) -> None:
    ns = queues
    visibility = VisibilityClient()
    first = make_job("job-1", ns, queue="local-queue", requests={"cpu": "1"}, backoff_limit=0)
    created = cluster.batch.create_namespaced_job(ns, first)
    unsuspended = lambda name: cluster.batch.read_namespaced_job(name, ns).spec.suspend is False  # noqa: E731
    eventually(lambda: unsuspended("job-1"), TIMEOUT, "job-1 unsuspended")
    assert visibility.cluster_queue_pending("cluster-queue") == []
    second = make_job(
        "job-2", ns, queue="local-queue", requests={"cpu": "1"}, args=BEHAVIOR_EXIT_FAST
    )
    cluster.batch.create_namespaced_job(ns, second)
    eventually(
        lambda: len(visibility.cluster_queue_pending("cluster-queue")) == 1,
        TIMEOUT,
        "one pending workload",
    )
    cluster.batch.delete_namespaced_job("job-1", ns, propagation_policy="Background")
    wl = cluster.workload_for_job(created, ns)
    cluster.delete("workloads", wl, ns)
    eventually(lambda: cluster.workload(wl, ns) is None, TIMEOUT, "job-1's Workload deleted")
    eventually(lambda: unsuspended("job-2"), TIMEOUT, "job-2 unsuspended")
    eventually(
        lambda: visibility.cluster_queue_pending("cluster-queue") == [],
        MEDIUM_TIMEOUT,
        "no pending workloads",
    )

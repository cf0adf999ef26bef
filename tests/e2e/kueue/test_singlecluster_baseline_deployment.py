"""Kueue v0.19.2 test/e2e/singlecluster/baseline/deployment_test.go, ported case by case."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    MEDIUM_TIMEOUT,
    QUEUE_LABEL,
    TIMEOUT,
    Cluster,
    condition,
    eventually,
    gone,
    is_admitted,
    make_cluster_queue,
    make_deployment,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
    pod_workload_name,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/deployment_test.go"
SELECTOR = "app=deployment-pod"


@pytest.fixture
def lq(cluster: Cluster, ns: str) -> Iterator[str]:
    """The BeforeEach: flavor on-demand, a ClusterQueue of 5 cpu, its LocalQueue (yielded)."""
    rf, cq, lq = f"deployment-rf-{ns}", f"deployment-cq-{ns}", f"deployment-lq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(rf, {"instance-type": "on-demand"}))
    cluster.create_active("clusterqueues", make_cluster_queue(
        cq, make_flavor_quotas(rf, cpu="5"), preemption={"withinClusterQueue": "LowerPriority"}
    ))  # fmt: skip
    cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
    yield lq
    cluster.apps.delete_collection_namespaced_deployment(ns)
    cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", lq, ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", rf)


def _status(cluster: Cluster, ns: str) -> client.V1DeploymentStatus:
    return cluster.apps.read_namespaced_deployment("deployment", ns).status


def _ready(cluster: Cluster, ns: str, want: int) -> None:
    eventually(lambda: (_status(cluster, ns).ready_replicas or 0) == want, MEDIUM_TIMEOUT,
               f"{want} ready replicas")  # fmt: skip


def _delete_deployment(cluster: Cluster, ns: str) -> None:
    """util.ExpectObjectToBeDeleted(ctx, k8sClient, deployment, true)."""
    cluster.apps.delete_namespaced_deployment("deployment", ns)
    read = lambda: cluster.apps.read_namespaced_deployment("deployment", ns)  # noqa: E731
    eventually(lambda: gone(read), MEDIUM_TIMEOUT, "the deployment deleted")


def _workloads_deleted(cluster: Cluster, ns: str, names: list[str]) -> None:
    for name in names:
        eventually(lambda n=name: cluster.workload(n, ns) is None, MEDIUM_TIMEOUT,
                   f"workload {name} deleted")  # fmt: skip


@kueue_case(GO, "Deployment should admit workloads that fits")
def test_admits_workloads_that_fit(cluster: Cluster, ns: str, lq: str) -> None:
    cluster.apps.create_namespaced_deployment(ns, make_deployment(
        "deployment", ns, queue=lq, replicas=3))  # fmt: skip
    _ready(cluster, ns, 3)
    pods = cluster.core.list_namespaced_pod(ns, label_selector=SELECTOR).items
    names = []
    for pod in pods:
        name = pod_workload_name(pod)
        wl = cluster.workload(name, ns)
        assert wl is not None, f"no workload {name} for pod {pod.metadata.name}"
        assert is_admitted(wl), wl.get("status")
        names.append(name)
    _delete_deployment(cluster, ns)
    _workloads_deleted(cluster, ns, names)


@kueue_case(
    GO, "Deployment should admit workloads after change queue-name if AvailableReplicas = 0"
)
def test_admits_after_the_queue_name_changes(cluster: Cluster, ns: str, lq: str) -> None:
    cluster.apps.create_namespaced_deployment(ns, make_deployment(
        "deployment", ns, queue="invalid-queue-name", replicas=3))  # fmt: skip

    def unavailable() -> bool:
        status = _status(cluster, ns)
        got = (status.replicas, status.unavailable_replicas, status.available_replicas or 0)
        assert got == (3, 3, 0), got
        return True

    eventually(unavailable, TIMEOUT, "3 replicas, all unavailable")
    pods = cluster.core.list_namespaced_pod(ns, label_selector=SELECTOR).items
    assert len(pods) == 3, [p.metadata.name for p in pods]

    def created_not_admitted() -> list[str]:
        workloads = cluster.list("workloads", ns)
        assert len(workloads) == 3, [w["metadata"]["name"] for w in workloads]
        for wl in workloads:
            assert condition(wl, "QuotaReserved").get("status") == "False", wl.get("status")
        return [w["metadata"]["name"] for w in workloads]

    previous = eventually(created_not_admitted, TIMEOUT, "3 workloads without quota")

    def relabel() -> bool:
        deployment = cluster.apps.read_namespaced_deployment("deployment", ns)
        deployment.metadata.labels[QUEUE_LABEL] = lq
        try:
            cluster.apps.replace_namespaced_deployment("deployment", ns, deployment)
        except client.ApiException as err:
            if err.status == 409:
                return False
            raise
        return True

    eventually(relabel, TIMEOUT, "the queue-name changed")
    _ready(cluster, ns, 3)
    eventually(
        lambda: len(cluster.core.list_namespaced_pod(ns, label_selector=SELECTOR).items) == 3,
        MEDIUM_TIMEOUT,
        "3 pods, the old ones gone",
    )
    _workloads_deleted(cluster, ns, previous)

    def admitted() -> list[str]:
        workloads = cluster.list("workloads", ns)
        assert len(workloads) == 3, [w["metadata"]["name"] for w in workloads]
        for wl in workloads:
            assert is_admitted(wl), wl.get("status")
        return [w["metadata"]["name"] for w in workloads]

    current = eventually(admitted, TIMEOUT, "3 admitted workloads")
    _delete_deployment(cluster, ns)
    _workloads_deleted(cluster, ns, current)

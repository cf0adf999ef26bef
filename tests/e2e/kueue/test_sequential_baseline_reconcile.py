"""Kueue v0.19.2 test/e2e/sequential/baseline/reconcile_test.go, ported: with a
managedJobsNamespaceSelector, a queued Job or pod outside the selected namespaces gets no
Workload, one inside gets exactly one. The controller is restarted with that Configuration for
the module (Kueue's UpdateKueueConfigurationAndRestart) and put back after.

Kueue lists the Workloads right after the create; here the unmanaged cases watch for a few
seconds, so that a Workload the controller would make late is seen too."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.util import (
    AGNHOST,
    BEHAVIOR_EXIT_FAST,
    BEHAVIOR_WAIT_FOR_DELETION,
    CONFIGURATION,
    KUEUE,
    TIMEOUT,
    Cluster,
    Tower,
    consistently,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/reconcile_test.go"
CQ, RF, LQ = "cluster-queue", "default", "user-queue"
DESCRIBE = " Testing namespace selector behavior "


def selecting_configuration() -> str:
    document = yaml.safe_load(CONFIGURATION)
    document["managedJobsNamespaceSelector"] = {
        "matchExpressions": [{"key": "managed-by-kueue", "operator": "In", "values": ["true"]}]
    }
    return yaml.safe_dump(document)


@pytest.fixture(scope="module")
def managed_ns(api_client: client.ApiClient, tower: Tower) -> Iterator[str]:
    """BeforeAll: Kueue restarted with the selector, a namespace it selects, the queues."""
    tower.restart_controller(selecting_configuration())
    cluster = Cluster(api_client)
    name = f"managed-ns-{uuid.uuid4().hex[:5]}"
    cluster.core.create_namespace(
        {"metadata": {"name": name, "labels": {"managed-by-kueue": "true"}}}
    )
    cluster.create("resourceflavors", make_resource_flavor(RF))
    cluster.create_active("clusterqueues", make_cluster_queue(CQ, make_flavor_quotas(RF, cpu="5")))
    cluster.create_active("localqueues", make_local_queue(LQ, name, CQ), name)
    yield name
    cluster.delete_namespace(name)
    cluster.expect_deleted("clusterqueues", CQ)
    cluster.expect_deleted("resourceflavors", RF)
    tower.restart_controller()


@pytest.fixture
def cleanup(cluster: Cluster) -> Iterator[list[tuple[str, str, str]]]:
    """AfterEach: the test's Job or pod deleted."""
    made: list[tuple[str, str, str]] = []
    yield made
    for kind, name, namespace in made:
        with contextlib.suppress(client.ApiException):
            if kind == "job":
                cluster.batch.delete_namespaced_job(
                    name, namespace, propagation_policy="Background"
                )
            else:
                cluster.core.delete_namespaced_pod(name, namespace)


def no_workload(cluster: Cluster, namespace: str, name: str) -> None:
    def none() -> bool:
        mine = [
            w
            for w in cluster.list("workloads", namespace)
            if any(o.get("name") == name for o in w["metadata"].get("ownerReferences") or [])
        ]
        assert mine == [], f"a Workload in an unmanaged namespace: {mine[0]['metadata']['name']}"
        return True

    consistently(none, 3.0, "no Workload")


@kueue_case(GO, DESCRIBE + "should not reconcile a job in the default (unmanaged) namespace")
def test_a_job_in_an_unmanaged_namespace_gets_no_workload(
    cluster: Cluster, managed_ns: str, cleanup: list
) -> None:
    job = make_job("unmanaged-job", "default", queue=LQ, args=BEHAVIOR_EXIT_FAST)
    cluster.batch.create_namespaced_job("default", job)
    cleanup.append(("job", "unmanaged-job", "default"))
    no_workload(cluster, "default", "unmanaged-job")


@kueue_case(GO, DESCRIBE + "should reconcile a job in managed namespace and create a workload")
def test_a_job_in_a_managed_namespace_gets_one_workload(
    cluster: Cluster, managed_ns: str, cleanup: list
) -> None:
    job = make_job("managed-job", managed_ns, queue=LQ, args=BEHAVIOR_EXIT_FAST)
    cluster.batch.create_namespaced_job(managed_ns, job)
    cleanup.append(("job", "managed-job", managed_ns))

    def one() -> bool:
        count = len(cluster.list("workloads", managed_ns))
        assert count == 1, f"{count} Workloads"
        return True

    eventually(one, TIMEOUT, "only one workload")


@kueue_case(GO, DESCRIBE + "should not reconcile a pod in the default (unmanaged) namespace")
def test_a_pod_in_an_unmanaged_namespace_gets_no_workload(
    cluster: Cluster, managed_ns: str, cleanup: list
) -> None:
    # Kueue's name, made unique: a pod of that name may still be going from another case.
    name = f"test-pod-{uuid.uuid4().hex[:5]}"
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {f"{KUEUE}/queue-name": LQ}},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": AGNHOST, "args": BEHAVIOR_WAIT_FOR_DELETION}],
        },
    }
    cluster.core.create_namespaced_pod("default", pod)
    cleanup.append(("pod", name, "default"))
    no_workload(cluster, "default", name)

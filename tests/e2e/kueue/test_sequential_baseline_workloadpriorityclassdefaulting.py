"""Kueue v0.19.2 test/e2e/sequential/baseline/workloadpriorityclassdefaulting_test.go, ported:
with the WorkloadPriorityClassDefaulting gate on, a queued Job without a WorkloadPriorityClass
label is given `default` (when that class exists) and admitted at its priority; an explicit
label is kept. The controller is restarted with the gate for the module and put back after."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    CONFIGURATION,
    KUEUE,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    consistently,
    eventually,
    is_admitted,
    is_finished,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
    make_workload_priority_class,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/workloadpriorityclassdefaulting_test.go"
DESCRIBE = "WorkloadPriorityClassDefaulting "
PRIORITY_CLASS = f"{KUEUE}/priority-class"


def gated_configuration() -> str:
    document = yaml.safe_load(CONFIGURATION)
    document["featureGates"] = {"WorkloadPriorityClassDefaulting": True}
    return yaml.safe_dump(document)


@pytest.fixture(scope="module")
def gate_on(api_client: client.ApiClient, tower: Tower) -> Iterator[None]:
    """BeforeAll: Kueue restarted with the gate; the flavor and ClusterQueue."""
    cluster = Cluster(api_client)
    restart_with(tower, gated_configuration())
    cluster.create("resourceflavors", make_resource_flavor("default"))
    cluster.create_active(
        "clusterqueues", make_cluster_queue("cluster-queue", make_flavor_quotas("default", cpu="5"))
    )
    yield
    cluster.expect_deleted("clusterqueues", "cluster-queue")
    cluster.expect_deleted("resourceflavors", "default")
    tower.restart_controller()


@pytest.fixture
def wpc_ns(cluster: Cluster, gate_on: None, kubelet_namespaces: set[str]) -> Iterator[str]:
    """BeforeEach: a namespace, its LocalQueue `main`, the WorkloadPriorityClass `default`."""
    ns = f"wpc-defaulting-{uuid.uuid4().hex[:5]}"
    cluster.core.create_namespace({"metadata": {"name": ns}})
    kubelet_namespaces.add(ns)
    cluster.create_active("localqueues", make_local_queue("main", ns, "cluster-queue"), ns)
    cluster.create("workloadpriorityclasses", make_workload_priority_class("default", 100))
    yield ns
    cluster.delete_namespace(ns)
    cluster.expect_deleted("workloadpriorityclasses", "default")


def priority_of(cluster: Cluster, name: str, ns: str) -> tuple[str, int]:
    wl = cluster.workload(name, ns) or {}
    spec = wl.get("spec") or {}
    return (spec.get("priorityClassRef") or {}).get("name", ""), spec.get("priority", 0)


@kueue_case(
    GO,
    DESCRIBE + "should default the WorkloadPriorityClass and admit a job with the defaulted "
    "priority",
)
def test_a_job_without_a_class_gets_the_default_and_runs(cluster: Cluster, wpc_ns: str) -> None:
    job = make_job("job-no-wpc", wpc_ns, queue="main", args=BEHAVIOR_EXIT_FAST,
                   requests={"cpu": "100m"})  # fmt: skip
    created = cluster.batch.create_namespaced_job(wpc_ns, job)

    def labelled() -> bool:
        labels = cluster.batch.read_namespaced_job("job-no-wpc", wpc_ns).metadata.labels or {}
        assert labels.get(PRIORITY_CLASS) == "default", f"labels: {labels}"
        return True

    eventually(labelled, TIMEOUT, "the default WorkloadPriorityClass label on the job")
    name = cluster.workload_for_job(created, wpc_ns)
    eventually(lambda: priority_of(cluster, name, wpc_ns) == ("default", 100), TIMEOUT,
               "the Workload at the default class's priority")  # fmt: skip
    eventually(lambda: is_admitted(cluster.workload(name, wpc_ns)), MEDIUM_TIMEOUT, "admitted")
    eventually(lambda: is_finished(cluster.workload(name, wpc_ns)), MEDIUM_TIMEOUT, "finished")


@kueue_case(GO, DESCRIBE + "should not override an existing WorkloadPriorityClass label")
def test_an_explicit_class_is_kept(cluster: Cluster, wpc_ns: str) -> None:
    cluster.create("workloadpriorityclasses", make_workload_priority_class("high", 1000))
    try:
        job = make_job("job-with-wpc", wpc_ns, queue="main", args=BEHAVIOR_EXIT_FAST,
                       requests={"cpu": "100m"}, priority_class="high")  # fmt: skip
        created = cluster.batch.create_namespaced_job(wpc_ns, job)

        def kept() -> None:
            labels = cluster.batch.read_namespaced_job("job-with-wpc", wpc_ns).metadata.labels
            assert (labels or {}).get(PRIORITY_CLASS) == "high", f"labels: {labels}"

        consistently(kept, 1.0, "the explicit label kept")
        name = cluster.workload_for_job(created, wpc_ns)
        eventually(lambda: priority_of(cluster, name, wpc_ns) == ("high", 1000), TIMEOUT,
                   "the Workload at the explicit class's priority")  # fmt: skip
    finally:
        cluster.expect_deleted("workloadpriorityclasses", "high", LONG_TIMEOUT)

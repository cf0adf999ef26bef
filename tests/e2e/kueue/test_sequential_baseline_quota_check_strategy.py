"""Kueue v0.19.2 test/e2e/sequential/baseline/quota_check_strategy_test.go, ported: with
resources.quotaCheckStrategy IgnoreUndeclared, a Job asking for memory is admitted to a
ClusterQueue with quota for cpu only; memory has no usage series, and such workloads preempt
each other by priority. The controller is restarted with that Configuration for the module
(Kueue's UpdateKueueConfigurationAndRestart) and put back after."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.test_singlecluster_baseline_metrics import Scraper, generated, scraper
from tests.e2e.kueue.util import (
    CONFIGURATION,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    condition,
    eventually,
    is_admitted,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
    make_workload_priority_class,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/quota_check_strategy_test.go"
DESCRIBE = "QuotaCheckStrategy "
FLAVOR = "test-flavor"
__all__ = ["scraper"]  # a fixture, used by name


def ignoring_configuration() -> str:
    document = yaml.safe_load(CONFIGURATION)
    document["resources"] = {"quotaCheckStrategy": "IgnoreUndeclared"}
    document["metrics"] = {"enableClusterQueueResources": True}
    return yaml.safe_dump(document)


@pytest.fixture(scope="module")
def cluster_queue(api_client: client.ApiClient, tower: Tower) -> Iterator[str]:
    """BeforeAll: Kueue restarted with IgnoreUndeclared; a flavor and a ClusterQueue with 100
    cpu and nothing else, preempting lower priorities within itself."""
    cluster = Cluster(api_client)
    restart_with(tower, ignoring_configuration())
    cluster.create("resourceflavors", make_resource_flavor(FLAVOR))
    name = generated("test-cq-ignoreundeclared-")
    body = make_cluster_queue(
        name,
        make_flavor_quotas(FLAVOR, cpu="100"),
        preemption={"withinClusterQueue": "LowerPriority"},
    )
    cluster.create_active("clusterqueues", body)
    yield name
    cluster.expect_deleted("clusterqueues", name)
    cluster.expect_deleted("resourceflavors", FLAVOR)
    tower.restart_controller()


def local_queue(cluster: Cluster, ns: str, cq: str, prefix: str) -> str:
    name = generated(prefix)
    cluster.create_active("localqueues", make_local_queue(name, ns, cq), ns)
    return name


def job_with_memory(name: str, ns: str, lq: str, cpu: str, priority: str | None = None) -> dict:
    """testingjob.MakeJob(...).RequestAndLimit(cpu, ...).RequestAndLimit(memory, "1Gi")."""
    return make_job(
        name, ns, queue=lq, requests={"cpu": cpu, "memory": "1Gi"}, priority_class=priority
    )


def admitted_job(cluster: Cluster, ns: str, body: dict) -> str:
    created = cluster.batch.create_namespaced_job(ns, body)
    name = cluster.workload_for_job(created, ns)
    eventually(lambda: is_admitted(cluster.workload(name, ns)), MEDIUM_TIMEOUT, f"{name} admitted")
    return name


@kueue_case(
    GO,
    DESCRIBE + "Metrics is available should not report metrics for resource usage for "
    "undeclared resources",
)
def test_no_usage_series_for_an_undeclared_resource(
    cluster_queue: str, cluster: Cluster, ns: str, scraper: Scraper
) -> None:
    lq = local_queue(cluster, ns, cluster_queue, "test-lq-ignoreundeclared-")
    admitted_job(cluster, ns, job_with_memory("ignoreundeclared-job", ns, lq, "1"))
    scraper.expect_available([["kueue_cluster_queue_resource_usage", cluster_queue, "cpu"]])
    scraper.expect_not_available([["kueue_cluster_queue_resource_usage", cluster_queue, "memory"]])


@pytest.fixture
def priority_classes(cluster: Cluster) -> Iterator[None]:
    yield
    for name in ("high", "low"):
        cluster.expect_deleted("workloadpriorityclasses", name)


@kueue_case(
    GO,
    DESCRIBE + "Preemption is enabled should preempt workloads with undeclared resource that "
    "have lower priority",
)
def test_a_higher_priority_preempts_with_an_undeclared_resource(
    cluster_queue: str, cluster: Cluster, ns: str, priority_classes: None
) -> None:
    lq = local_queue(cluster, ns, cluster_queue, "test-lq-preemption-")
    cluster.create("workloadpriorityclasses", make_workload_priority_class("low", 10))
    cluster.create("workloadpriorityclasses", make_workload_priority_class("high", 1000))
    low = admitted_job(cluster, ns, job_with_memory("low-job", ns, lq, "100", "low"))
    admitted_job(cluster, ns, job_with_memory("high-job", ns, lq, "100", "high"))

    def preempted() -> bool:
        wl = cluster.workload(low, ns)
        assert condition(wl, "Admitted").get("status") == "False", wl
        assert condition(wl, "Preempted").get("status") == "True", wl
        return True

    eventually(preempted, TIMEOUT, "the low priority workload preempted")

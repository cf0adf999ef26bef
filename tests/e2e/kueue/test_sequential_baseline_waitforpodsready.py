"""Kueue v0.19.2 test/e2e/sequential/baseline/waitforpodsready_test.go, ported: the three
WaitForPodsReady Configurations (a tiny timeout; a tiny recoveryTimeout; a long one), each a
restart of the controller for its case (Kueue's BeforeAll) and the suite's put back after.

Pods run on the real node; a running pod is made to fail by deleting it at once (Kueue asks its
agnhost to exit 1, which this node's images cannot: see fail_active_pods). The
metrics are scraped from this machine with a kueue-metrics-reader token, as in the metrics
cases, instead of from a curl pod in Kueue's namespace."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml
from kubernetes import client

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.restarts import restart_with
from tests.e2e.kueue.test_singlecluster_baseline_metrics import Scraper, scraper
from tests.e2e.kueue.util import (
    BEHAVIOR_WAIT_FOR_DELETION,
    CONFIGURATION,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    condition,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/waitforpodsready_test.go"
__all__ = ["scraper"]  # a fixture, used by name
CQ, LQ, RF = "cq", "lq", "default"


def waiting_configuration(timeout: str, recovery: str | None, base: int, limit: int) -> str:
    document = yaml.safe_load(CONFIGURATION)
    document["waitForPodsReady"] = {
        "blockAdmission": True,
        "timeout": timeout,
        "requeuingStrategy": {
            "timestamp": "Eviction",
            "backoffBaseSeconds": base,
            "backoffLimitCount": limit,
        },
    }
    if recovery is not None:
        document["waitForPodsReady"]["recoveryTimeout"] = recovery
    return yaml.safe_dump(document)


def queues(tower: Tower, cluster: Cluster, ns: str, configuration: str) -> Iterator[None]:
    """BeforeAll's restart, BeforeEach's queues; their AfterEach and AfterAll."""
    restart_with(tower, configuration)
    cluster.create("resourceflavors", make_resource_flavor(RF))
    cluster.create_active("clusterqueues", make_cluster_queue(CQ, make_flavor_quotas(RF, cpu="10")))
    cluster.create_active("localqueues", make_local_queue(LQ, ns, CQ), ns)
    yield
    for job in cluster.batch.list_namespaced_job(ns).items:
        cluster.batch.delete_namespaced_job(job.metadata.name, ns, propagation_policy="Background")
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", CQ)
    cluster.expect_deleted("resourceflavors", RF)
    tower.restart_controller()


@pytest.fixture
def tiny_timeout(tower: Tower, cluster: Cluster, ns: str) -> Iterator[None]:
    yield from queues(tower, cluster, ns, waiting_configuration("10ms", None, 10, 1))


@pytest.fixture
def tiny_recovery(tower: Tower, cluster: Cluster, ns: str) -> Iterator[None]:
    yield from queues(tower, cluster, ns, waiting_configuration("5m", "10ms", 1, 2))


@pytest.fixture
def long_recovery(tower: Tower, cluster: Cluster, ns: str) -> Iterator[None]:
    yield from queues(tower, cluster, ns, waiting_configuration("5m", "90s", 1, 1))


def indexed_job(name: str, ns: str) -> dict:
    """MakeJob(...).Request(cpu, 2).Parallelism(1).BackoffLimitPerIndex(2)
    .CompletionMode(Indexed).Completions(1)."""
    job = make_job(name, ns, queue=LQ, args=BEHAVIOR_WAIT_FOR_DELETION, requests={"cpu": "2"})
    job["spec"].update(completionMode="Indexed", backoffLimitPerIndex=2)
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {}
    # On the real node (labelled as Kueue's kind worker): its pods are asked to exit through
    # `kubectl exec`, which the stand-in kubelet of the hand-made nodes does not serve.
    job["spec"]["template"]["spec"]["nodeSelector"] = {"instance-type": "on-demand"}
    return job


def workload_of(cluster: Cluster, job: client.V1Job, ns: str) -> dict:
    name = cluster.workload_for_job(job, ns)
    return eventually(lambda: cluster.workload(name, ns), TIMEOUT, f"Workload {name}")


def has(wl: dict | None, kind: str, status: str, reason: str | None = None) -> bool:
    found = condition(wl, kind)
    assert found.get("status") == status, f"{kind}: {found}"
    assert reason is None or found.get("reason") == reason, f"{kind}: {found}"
    return True


def evictions(wl: dict | None) -> list[dict]:
    return (((wl or {}).get("status") or {}).get("schedulingStats") or {}).get("evictions") or []


def requeue_count(wl: dict | None) -> int:
    return int((((wl or {}).get("status") or {}).get("requeueState") or {}).get("count") or 0)


def fail_active_pods(cluster: Cluster, ns: str, count: int) -> None:
    """util.WaitForActivePodsAndTerminate, as this node can do it: `count` running pods, each
    made to fail. Kueue asks the pod's agnhost to exit 1 (kubectl exec, curl /exit); here
    neither exec nor agnhost's HTTP verbs exist (shared/realk8s/node: no kubelet client, images
    made from busybox), so each pod is deleted at once, its container killed: the Job counts a
    failed pod and makes its replacement, as after Kueue's exit 1."""

    def active() -> list[client.V1Pod]:
        running = [
            p
            for p in cluster.core.list_namespaced_pod(ns).items
            if p.status.pod_ip and p.status.phase == "Running" and not p.metadata.deletion_timestamp
        ]
        assert len(running) == count, f"{len(running)} active pods"
        return running

    for pod in eventually(active, LONG_TIMEOUT, f"{count} active pods"):
        cluster.core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)


@kueue_case(
    GO,
    "WaitForPodsReady with tiny Timeout and no RecoveryTimeout should evict and requeue "
    "workload when pods readiness timeout is surpassed",
)
def test_a_tiny_timeout_evicts_requeues_then_deactivates(
    cluster: Cluster, ns: str, tiny_timeout: None, scraper: Scraper
) -> None:
    job = make_job("job-timeout", ns, queue=LQ, args=BEHAVIOR_WAIT_FOR_DELETION,
                   requests={"cpu": "2"})  # fmt: skip
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {}
    created = cluster.batch.create_namespaced_job(ns, job)
    name = workload_of(cluster, created, ns)["metadata"]["name"]

    def not_admitted() -> bool:
        wl = cluster.workload(name, ns)
        assert ((wl or {}).get("status") or {}).get("admission") is None, "admitted"
        return True

    eventually(not_admitted, TIMEOUT, "the workload not admitted")

    def evicted() -> bool:
        wl = cluster.workload(name, ns)
        has(wl, "PodsReady", "False", "WaitForStart")
        has(wl, "Evicted", "True", "PodsReadyTimeout")
        assert evictions(wl) == [
            {"reason": "PodsReadyTimeout", "underlyingCause": "WaitForStart", "count": 1}
        ], evictions(wl)
        return True

    eventually(evicted, TIMEOUT, "the workload evicted")
    scraper.expect_available(
        [["kueue_evicted_workloads_once_total", CQ, "PodsReadyTimeout", "WaitForStart", "1"]]
    )
    eventually(lambda: cluster.batch.read_namespaced_job("job-timeout", ns).spec.suspend is True,
               TIMEOUT, "the job suspended")  # fmt: skip
    eventually(lambda: requeue_count(cluster.workload(name, ns)) == 1, TIMEOUT, "requeued once")
    eventually(
        lambda: ((cluster.workload(name, ns) or {}).get("spec") or {}).get("active") is False,
        MEDIUM_TIMEOUT,
        "deactivated after the second eviction",
    )


@kueue_case(
    GO,
    "WaitForPodsReady with default Timeout and a tiny RecoveryTimeout should evict and requeue "
    "workload when pod failure causes recovery timeout",
)
def test_a_tiny_recovery_timeout_evicts_and_requeues_a_failed_pods_workload(
    cluster: Cluster, ns: str, tiny_recovery: None, scraper: Scraper
) -> None:
    created = cluster.batch.create_namespaced_job(ns, indexed_job("job-recovery-timeout", ns))
    name = workload_of(cluster, created, ns)["metadata"]["name"]
    eventually(lambda: has(cluster.workload(name, ns), "PodsReady", "True"), MEDIUM_TIMEOUT,
               "PodsReady")  # fmt: skip
    fail_active_pods(cluster, ns, 1)

    def requeued() -> bool:
        wl = cluster.workload(name, ns)
        assert requeue_count(wl) >= 1, f"requeueState: {(wl or {}).get('status', {})}"
        has(wl, "PodsReady", "True", "Started")
        has(wl, "Evicted", "False")
        has(wl, "Requeued", "True")
        [eviction] = evictions(wl)
        assert (eviction["reason"], eviction["underlyingCause"]) == (
            "PodsReadyTimeout",
            "WaitForRecovery",
        ), eviction
        assert eviction["count"] >= 1
        return True

    eventually(requeued, MEDIUM_TIMEOUT, "the workload requeued and running again")
    scraper.expect_available(
        [["kueue_evicted_workloads_once_total", CQ, "PodsReadyTimeout", "WaitForRecovery", "1"]]
    )


@kueue_case(
    GO,
    "WaitForPodsReady with default Timeout and a long RecoveryTimeout should continue running "
    "workload if pod recovers before recoveryTimeout",
)
def test_a_pod_that_recovers_in_time_keeps_its_workload_running(
    cluster: Cluster, ns: str, long_recovery: None, scraper: Scraper
) -> None:
    created = cluster.batch.create_namespaced_job(ns, indexed_job("job-recovery-timeout", ns))
    name = workload_of(cluster, created, ns)["metadata"]["name"]
    eventually(lambda: has(cluster.workload(name, ns), "PodsReady", "True"), MEDIUM_TIMEOUT,
               "PodsReady")  # fmt: skip
    scraper.expect_available([
        ["kueue_ready_wait_time_seconds_count", CQ, ""],
        ["kueue_admitted_until_ready_wait_time_seconds_count", CQ, ""],
        ["kueue_local_queue_ready_wait_time_seconds", ns, LQ, ""],
        ["kueue_local_queue_admitted_until_ready_wait_time_seconds", ns, LQ, ""],
    ])  # fmt: skip
    fail_active_pods(cluster, ns, 1)
    eventually(
        lambda: has(cluster.workload(name, ns), "PodsReady", "True", "Recovered"),
        LONG_TIMEOUT,
        "the pod recovered before recoveryTimeout",
    )
    scraper.expect_not_available([["kueue_evicted_workloads_once_total", ns]])
    scraper.expect_available([
        ["kueue_ready_wait_time_seconds_count", CQ, "} 1"],
        ["kueue_admitted_until_ready_wait_time_seconds_count", CQ, "} 1"],
        ["kueue_local_queue_ready_wait_time_seconds_count", ns, LQ, "} 1"],
        ["kueue_local_queue_admitted_until_ready_wait_time_seconds_count", ns, LQ, "} 1"],
    ])  # fmt: skip

"""Kueue v0.19.2 test/e2e/singlecluster/baseline/metrics_test.go, ported case by case.

Kueue scrapes /metrics from a curl pod whose ServiceAccount (kueue-controller-manager) is bound
to kueue-metrics-reader. Tower's controller runs on this machine, so the scrape goes from here,
over HTTPS, with a token of that same ServiceAccount (a TokenRequest) and the same binding:
Tower checks it by TokenReview and SubjectAccessReview as Kueue's filter does.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from kubernetes import client

from tests.e2e.kueue.cases import DifferenceError, kueue_case
from tests.e2e.kueue.util import (
    KUEUE,
    KUEUE_NS,
    LONG_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    V,
    condition,
    eventually,
    has_quota_reservation,
    is_admitted,
    make_admission_check,
    make_cluster_queue,
    make_flavor_quotas,
    make_job,
    make_local_queue,
    make_resource_flavor,
    make_workload_priority_class,
    set_admission_check_active,
    set_workloads_admission_check,
)
from tests.scrape import get

pytestmark = pytest.mark.e2e
GO = "singlecluster/baseline/metrics_test.go"
SERVICE_ACCOUNT = "kueue-controller-manager"
METRICS_READER = "kueue-metrics-reader"


@dataclass(frozen=True)
class Scraper:
    port: int
    token: str

    def samples(self) -> list[str]:
        """The scrape's sample lines. Kueue's matcher reads every line, but Go's client omits
        a family with no series, where prometheus_client keeps its # HELP and # TYPE lines:
        those name no series, so they are left out here."""
        status, body = get(self.port, "/metrics", self.token)
        assert status == 200, f"GET /metrics: {status} {body[:200]}"
        return [line for line in body.splitlines() if not line.startswith("#")]

    def expect_available(self, metrics: list[list[str]]) -> None:
        """util.ExpectMetricsToBeAvailable: each metric has a line holding all its strings."""

        def check() -> bool:
            lines = self.samples()
            missing = [m for m in metrics if not any(all(s in ln for s in m) for ln in lines)]
            assert not missing, f"metrics missing: {missing}"
            return True

        eventually(check, LONG_TIMEOUT, "the metrics to be available")

    def expect_not_available(self, metrics: list[list[str]]) -> None:
        """util.ExpectMetricsNotToBeAvailable: no line holds all of a metric's strings."""

        def check() -> bool:
            lines = self.samples()
            present = [m for m in metrics if any(all(s in ln for s in m) for ln in lines)]
            assert not present, f"metrics still there: {present}"
            return True

        eventually(check, LONG_TIMEOUT, "the metrics to be gone")


def generated(prefix: str) -> str:
    """GeneratedName(prefix): the API server's suffix, made here so the name is known."""
    return f"{prefix}{uuid.uuid4().hex[:5]}"


@pytest.fixture
def scraper(
    api_client: client.ApiClient, tower: Tower, user_roles: None, ns: str
) -> Iterator[Scraper]:
    """The BeforeEach's metrics-reader binding of the ServiceAccount, and its token."""
    core = client.CoreV1Api(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    try:
        core.create_namespaced_service_account(KUEUE_NS, {"metadata": {"name": SERVICE_ACCOUNT}})
    except client.ApiException as err:
        if err.status != 409:
            raise
    binding = f"metrics-reader-rolebinding-{ns}"
    rbac.create_cluster_role_binding({
        "metadata": {"name": binding},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": KUEUE_NS}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": METRICS_READER},
    })  # fmt: skip
    token = core.create_namespaced_service_account_token(
        SERVICE_ACCOUNT, KUEUE_NS, {"spec": {"expirationSeconds": 3600}}
    ).status.token
    yield Scraper(tower.metrics_port, token)
    rbac.delete_cluster_role_binding(binding)


@pytest.fixture
def flavor(cluster: Cluster, ns: str) -> Iterator[str]:
    name = f"test-flavor-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(name))
    yield name
    cluster.expect_deleted("resourceflavors", name)


def make_workload(name: str, namespace: str, queue: str, cpu: str) -> dict:
    """utiltestingapi.MakeWorkload(...).Queue(...).PodSets(MakePodSet("ps1", 1))
    .RequestAndLimit(cpu, ...)."""
    resources = {"cpu": cpu}
    container = {"name": "c", "image": "pause", "resources": {"requests": resources,
                                                               "limits": resources}}  # fmt: skip
    return {
        "apiVersion": f"{KUEUE}/{V}",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"queueName": queue, "podSets": [{"name": "ps1", "count": 1, "template": {
            "spec": {"restartPolicy": "Never", "containers": [container]}}}]},
    }  # fmt: skip


def expect_admitted(cluster: Cluster, name: str, namespace: str) -> None:
    eventually(lambda: is_admitted(cluster.workload(name, namespace)), TIMEOUT, f"{name} admitted")


@kueue_case(
    GO,
    "Metrics workload is admitted should ensure the default metrics are available",
    differs="#metrics-of-a-deleted-clusterqueue",
)
def test_default_metrics(cluster: Cluster, ns: str, flavor: str, scraper: Scraper) -> None:
    cq, lq = generated("test-cq-"), generated("test-lq-")
    cluster.create_active(
        "clusterqueues", make_cluster_queue(cq, make_flavor_quotas(flavor, cpu="1", memory="1Gi"))
    )
    cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
    cluster.create("workloads", make_workload("test-workload", ns, lq, "1"), ns)
    expect_admitted(cluster, "test-workload", ns)

    scraper.expect_available([
        ["kueue_admission_attempts_total"],
        ["kueue_admission_attempt_duration_seconds"],
        ["kueue_pending_workloads", cq],
        ["kueue_reserving_active_workloads", cq],
        ["kueue_admitted_active_workloads", cq],
        ["kueue_quota_reserved_workloads_total", cq],
        ["kueue_quota_reserved_wait_time_seconds", cq],
        ["kueue_admitted_workloads_total", cq],
        ["kueue_admission_wait_time_seconds", cq],
        ["kueue_cluster_queue_resource_usage", cq],
        ["kueue_cluster_queue_status", cq],
        ["kueue_cluster_queue_resource_reservation", cq],
        ["kueue_cluster_queue_resource_pending", cq],
        ["kueue_cluster_queue_nominal_quota", cq],
        ["kueue_cluster_queue_borrowing_limit", cq],
        ["kueue_cluster_queue_lending_limit", cq],
        ["kueue_cluster_queue_weighted_share", cq],
        ["kueue_local_queue_pending_workloads", ns, lq],
        ["kueue_local_queue_reserving_active_workloads", ns, lq],
        ["kueue_local_queue_admitted_active_workloads", ns, lq],
        ["kueue_local_queue_quota_reserved_workloads_total", ns, lq],
        ["kueue_local_queue_quota_reserved_wait_time_seconds", ns, lq],
        ["kueue_local_queue_admitted_workloads_total", ns, lq, ""],
        ["kueue_local_queue_admission_wait_time_seconds", ns, lq],
        ["kueue_local_queue_status", ns, lq],
    ])  # fmt: skip

    cluster.delete("workloads", "test-workload", ns, strip_finalizers=True)
    eventually(lambda: cluster.workload("test-workload", ns) is None, TIMEOUT, "workload gone")
    cluster.expect_deleted("clusterqueues", cq)
    scraper.expect_not_available([
        ["kueue_pending_workloads", cq],
        ["kueue_reserving_active_workloads", cq],
        ["kueue_admitted_active_workloads", cq],
        ["kueue_quota_reserved_workloads_total", cq],
        ["kueue_quota_reserved_wait_time_seconds", cq],
        ["kueue_admitted_workloads_total", cq],
        ["kueue_admission_wait_time_seconds", cq],
        ["kueue_cluster_queue_resource_usage", cq],
        ["kueue_cluster_queue_status", cq],
        ["kueue_cluster_queue_resource_reservation", cq],
        ["kueue_cluster_queue_resource_pending", cq],
        ["kueue_cluster_queue_nominal_quota", cq],
        ["kueue_cluster_queue_borrowing_limit", cq],
        ["kueue_cluster_queue_lending_limit", cq],
        ["kueue_local_queue_reserving_active_workloads", ns, lq],
        ["kueue_local_queue_admitted_active_workloads", ns, lq],
    ])  # fmt: skip
    scraper.expect_available([
        ["kueue_admission_attempts_total"],
        ["kueue_admission_attempt_duration_seconds"],
        ["kueue_local_queue_pending_workloads", "active", "0", ns, lq],
        ["kueue_local_queue_pending_workloads", "inadmissible", "0", ns, lq],
        ["kueue_local_queue_quota_reserved_workloads_total", ns, lq],
        ["kueue_local_queue_quota_reserved_wait_time_seconds", ns, lq],
        ["kueue_local_queue_admitted_workloads_total", ns, lq, ""],
        ["kueue_local_queue_admission_wait_time_seconds", ns, lq],
        ["kueue_local_queue_status", ns, lq],
    ])  # fmt: skip

    # Kueue keeps the deleted ClusterQueue's weighted share (it clears that gauge only when
    # the cohort changes); Tower drops it with the queue's other series. Read now, asserted
    # last, so that every other step of the case still counts.
    weighted_share_kept = any(
        "kueue_cluster_queue_weighted_share" in line and cq in line for line in scraper.samples()
    )

    cluster.delete("localqueues", lq, ns)
    scraper.expect_not_available([
        ["kueue_local_queue_pending_workloads", ns, lq],
        ["kueue_local_queue_quota_reserved_workloads_total", ns, lq],
        ["kueue_local_queue_quota_reserved_wait_time_seconds", ns, lq],
        ["kueue_local_queue_admitted_workloads_total", ns, lq, ""],
        ["kueue_local_queue_admission_wait_time_seconds", ns, lq],
    ])  # fmt: skip
    if not weighted_share_kept:
        raise DifferenceError(f"kueue_cluster_queue_weighted_share of the deleted {cq} is gone")


@kueue_case(
    GO,
    "Metrics workload is admitted with admission checks should ensure the admission check metrics are available",
)
def test_admission_check_metrics(cluster: Cluster, ns: str, flavor: str, scraper: Scraper) -> None:
    check = f"check1-{ns}"
    cluster.create("admissionchecks", make_admission_check(check, "ac-controller"))
    set_admission_check_active(cluster, check)
    cq, lq = generated("test-admission-check-cq-"), generated("test-admission-checked-lq-")
    body = make_cluster_queue(cq, make_flavor_quotas(flavor, cpu="1", memory="1Gi"))
    body["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    try:
        cluster.create_active("clusterqueues", body)
        cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
        job = cluster.batch.create_namespaced_job(
            ns, make_job("admission-checked-job", ns, queue=lq, requests={"cpu": "1"})
        )
        wl = cluster.workload_for_job(job, ns)
        eventually(lambda: has_quota_reservation(cluster.workload(wl, ns)), TIMEOUT, "quota")
        set_workloads_admission_check(cluster, wl, ns, check, "Ready")
        metrics = [
            ["kueue_admission_checks_wait_time_seconds", cq],
            ["kueue_local_queue_admission_checks_wait_time_seconds", ns, lq],
        ]
        scraper.expect_available(metrics)
        cluster.batch.delete_namespaced_job(
            "admission-checked-job", ns, propagation_policy="Background"
        )
        cluster.delete("workloads", wl, ns, strip_finalizers=True)
        cluster.delete("localqueues", lq, ns)
        cluster.expect_deleted("clusterqueues", cq)
        scraper.expect_not_available(metrics)
    finally:
        cluster.expect_deleted("clusterqueues", cq)
        cluster.expect_deleted("admissionchecks", check)


def preempting_queue(name: str, flavor: str, cpu: str) -> dict:
    return make_cluster_queue(
        name,
        make_flavor_quotas(flavor, cpu=cpu),
        cohortName="test-cohort",
        preemption={"reclaimWithinCohort": "LowerPriority", "withinClusterQueue": "LowerPriority",
                    "borrowWithinCohort": {"policy": "LowerPriority"}},
    )  # fmt: skip


@kueue_case(
    GO,
    "Metrics workload is admitted with eviction and preemption should ensure the eviction and preemption metrics are available",
)
def test_eviction_and_preemption_metrics(
    cluster: Cluster, ns: str, flavor: str, scraper: Scraper
) -> None:
    cq1, cq2 = generated("test-cq-1-"), generated("test-cq-2-")
    lq1, lq2 = generated("test-lq-1-"), generated("test-lq-2-")
    high = f"high-{ns}"
    try:
        cluster.create_active("clusterqueues", preempting_queue(cq1, flavor, "2"))
        cluster.create_active("clusterqueues", preempting_queue(cq2, flavor, "3"))
        cluster.create_active("localqueues", make_local_queue(lq1, ns, cq1), ns)
        cluster.create_active("localqueues", make_local_queue(lq2, ns, cq2), ns)
        cluster.create("workloadpriorityclasses", make_workload_priority_class(high, 100))

        def submit(name: str, queue: str, cpu: str, priority: str | None = None) -> str:
            body = make_job(name, ns, queue=queue, requests={"cpu": cpu}, priority_class=priority)
            job = cluster.batch.create_namespaced_job(ns, body)
            return cluster.workload_for_job(job, ns)

        for name, queue in (("lower-job-1", lq1), ("lower-job-2", lq2)):
            expect_admitted(cluster, submit(name, queue, "1"), ns)
        blocker = submit("blocker", lq2, "3", high)
        expect_admitted(cluster, blocker, ns)
        higher = [submit("high-large-1", lq1, "4", high), submit("high-large-2", lq2, "4", high)]

        def pending() -> bool:
            for name in higher:
                wl = cluster.workload(name, ns)
                assert wl is not None, f"{name} not created"
                assert condition(wl, "QuotaReserved").get("status") == "False", (
                    f"{name} not pending"
                )
            return True

        eventually(pending, TIMEOUT, "the high-priority workloads to be pending")
        cluster.custom.patch_namespaced_custom_object(
            KUEUE, V, ns, "workloads", blocker, {"spec": {"active": False}}
        )

        def deactivated() -> bool:
            evicted = condition(cluster.workload(blocker, ns), "Evicted")
            assert evicted.get("status") == "True", f"Evicted: {evicted}"
            assert evicted.get("reason") == "Deactivated", f"Evicted: {evicted}"
            return True

        eventually(deactivated, TIMEOUT, "the blocker evicted as Deactivated")
        eventually(
            lambda: sum(is_admitted(cluster.workload(n, ns)) for n in higher) == 1,
            TIMEOUT,
            "one high-priority workload admitted",
        )
        metrics = [
            ["kueue_admission_cycle_preemption_skips"],
            ["kueue_evicted_workloads_total"],
            ["kueue_evicted_workloads_once_total"],
            ["kueue_preempted_workloads_total"],
            ["kueue_local_queue_evicted_workloads_total", ns, lq2],
            ["kueue_local_queue_resource_reservation", ns, lq1],
            ["kueue_local_queue_resource_usage", ns, lq1],
        ]
        scraper.expect_available(metrics)
        cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
        for wl in cluster.list("workloads", ns):
            cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
        cluster.delete("localqueues", lq1, ns)
        cluster.delete("localqueues", lq2, ns)
        cluster.expect_deleted("clusterqueues", cq1)
        cluster.expect_deleted("clusterqueues", cq2)
        scraper.expect_not_available(metrics)
    finally:
        cluster.batch.delete_collection_namespaced_job(ns, propagation_policy="Background")
        for wl in cluster.list("workloads", ns):
            cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
        cluster.delete("workloadpriorityclasses", high)
        cluster.expect_deleted("clusterqueues", cq1)
        cluster.expect_deleted("clusterqueues", cq2)

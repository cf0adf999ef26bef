"""Kueue v0.19.2 test/e2e/sequential/baseline/metrics_test.go, ported: LocalQueue metrics
with a localQueueSelector. The controller is restarted with that Configuration for the
module (Kueue's UpdateKueueConfigurationAndRestart), and put back after. Scraped from this
machine as in the singlecluster metrics cases (a kueue-metrics-reader token)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.test_singlecluster_baseline_metrics import (
    Scraper,
    expect_admitted,
    flavor,
    generated,
    make_workload,
    scraper,
)
from tests.e2e.kueue.util import (
    CONFIGURATION,
    TIMEOUT,
    Cluster,
    Tower,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/metrics_test.go"
__all__ = ["flavor", "scraper"]  # fixtures, used by name

LQ_METRICS = ("kueue_local_queue_pending_workloads", "kueue_local_queue_reserving_active_workloads",
              "kueue_local_queue_admitted_active_workloads",
              "kueue_local_queue_quota_reserved_workloads_total",
              "kueue_local_queue_quota_reserved_wait_time_seconds",
              "kueue_local_queue_admission_wait_time_seconds", "kueue_local_queue_status")  # fmt: skip


def selecting_configuration() -> str:
    document = yaml.safe_load(CONFIGURATION)
    document["metrics"]["localQueueMetrics"] = {
        "enable": True,
        "localQueueSelector": {"matchLabels": {"metrics-test": "true"}},
    }
    return yaml.safe_dump(document)


@pytest.fixture(scope="module")
def selector_configured(tower: Tower) -> Iterator[None]:
    tower.restart_controller(selecting_configuration())
    yield
    tower.restart_controller()


def admitted_workload(
    cluster: Cluster, ns: str, flavor: str, labels: dict[str, str]
) -> tuple[str, str]:
    cq, lq = generated("test-cq-"), generated("test-lq-")
    cluster.create_active(
        "clusterqueues", make_cluster_queue(cq, make_flavor_quotas(flavor, cpu="1", memory="1Gi"))
    )
    body = make_local_queue(lq, ns, cq)
    body["metadata"]["labels"] = labels
    cluster.create_active("localqueues", body, ns)
    cluster.create("workloads", make_workload("test-workload", ns, lq, "1"), ns)
    expect_admitted(cluster, "test-workload", ns)
    return cq, lq


def metrics_of(ns: str, lq: str) -> list[list[str]]:
    return [[name, ns, lq] for name in LQ_METRICS] + [
        ["kueue_local_queue_admitted_workloads_total", ns, lq, ""]
    ]


@kueue_case(
    GO,
    "LocalQueue metrics workload is admitted to a lq with matching labels should ensure the localqueue metrics are available",
)
def test_local_queue_metrics_of_a_selected_queue(
    selector_configured: None, cluster: Cluster, ns: str, flavor: str, scraper: Scraper
) -> None:
    cq, lq = admitted_workload(cluster, ns, flavor, {"metrics-test": "true"})
    try:
        scraper.expect_available(metrics_of(ns, lq))
        cluster.delete("workloads", "test-workload", ns, strip_finalizers=True)
        eventually(lambda: cluster.workload("test-workload", ns) is None, TIMEOUT, "workload gone")
        cluster.expect_deleted("clusterqueues", cq)
        scraper.expect_not_available([
            ["kueue_local_queue_reserving_active_workloads", ns, lq],
            ["kueue_local_queue_admitted_active_workloads", ns, lq],
        ])  # fmt: skip
        scraper.expect_available([
            ["kueue_local_queue_pending_workloads", "active", "0", ns, lq],
            ["kueue_local_queue_pending_workloads", "inadmissible", "0", ns, lq],
            ["kueue_local_queue_quota_reserved_workloads_total", ns, lq],
            ["kueue_local_queue_quota_reserved_wait_time_seconds", ns, lq],
            ["kueue_local_queue_admitted_workloads_total", ns, lq, ""],
            ["kueue_local_queue_admission_wait_time_seconds", ns, lq],
            ["kueue_local_queue_status", ns, lq],
        ])  # fmt: skip
        cluster.delete("localqueues", lq, ns)
        scraper.expect_not_available([
            ["kueue_local_queue_pending_workloads", ns, lq],
            ["kueue_local_queue_quota_reserved_workloads_total", ns, lq],
            ["kueue_local_queue_quota_reserved_wait_time_seconds", ns, lq],
            ["kueue_local_queue_admitted_workloads_total", ns, lq, ""],
            ["kueue_local_queue_admission_wait_time_seconds", ns, lq],
        ])  # fmt: skip
    finally:
        cluster.delete("workloads", "test-workload", ns, strip_finalizers=True)
        cluster.expect_deleted("clusterqueues", cq)


@kueue_case(
    GO,
    "LocalQueue metrics workload is admitted to a lq without labels should ensure the localqueue metrics are not available",
)
def test_no_local_queue_metrics_of_a_queue_left_out(
    selector_configured: None, cluster: Cluster, ns: str, flavor: str, scraper: Scraper
) -> None:
    cq, lq = admitted_workload(cluster, ns, flavor, {})
    try:
        scraper.expect_not_available(metrics_of(ns, lq))
    finally:
        cluster.delete("workloads", "test-workload", ns, strip_finalizers=True)
        cluster.expect_deleted("clusterqueues", cq)

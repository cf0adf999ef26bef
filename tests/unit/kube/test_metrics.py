"""Kueue's metric families as Tower shows them: buckets, gates, series kept and removed."""

from __future__ import annotations

import re

from prometheus_client import generate_latest

from extender.core.config.kueue_config import LabelSelector, MetricsConfig
from extender.kube.api.metrics import (
    ACTIVE,
    ClusterQueueReport,
    LocalQueueReport,
    Metrics,
    QuotaReport,
    Subject,
)

ROLE = {"replica_role": "standalone"}
SUBJECT = Subject("default", "user-queue", "high", local_queue=True, cohorts=("research",))


def buckets(metrics: Metrics, family: str) -> list[float]:
    """The upper bounds of a histogram's buckets, as scraped (one series observed)."""
    text = generate_latest(metrics.registry).decode()
    bounds = []
    for line in text.splitlines():
        if line.startswith(f"{family}_bucket{{") and 'cluster_queue="cq"' in line:
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            bounds.append(float(bound))
    return bounds


def report(name: str = "cq", **overrides) -> ClusterQueueReport:
    fields = {
        "name": name,
        "status": ACTIVE,
        "parent_cohort": "research",
        "root_cohort": "research",
        "pending_active": 2,
        "pending_inadmissible": 1,
        "reserving": 1,
        "admitted": 1,
        "finished": 0,
        "quotas": (QuotaReport("default", "cpu", 4.0, float("inf"), float("inf"), 3.0, 3.0),),
        "pending_resources": {"cpu": 6.0},
        **overrides,
    }
    return ClusterQueueReport(**fields)


def test_histograms_have_kueues_buckets():
    metrics = Metrics()
    metrics.admitted(SUBJECT, "cq", 3.0, 1.0)
    metrics.quota_reserved(SUBJECT, "cq", 3.0)
    kueue_16 = [1.0] + [2.5 * 2**i for i in range(15)] + [float("inf")]
    assert buckets(metrics, "kueue_admission_wait_time_seconds") == kueue_16
    kueue_14 = [*kueue_16[:14], float("inf")]
    assert buckets(metrics, "kueue_quota_reserved_wait_time_seconds") == kueue_14
    metrics.cycle("success", 0.01, {})
    text = generate_latest(metrics.registry).decode()
    go_default = ["0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0"]
    got = [
        line.split('le="', 1)[1].split('"', 1)[0]
        for line in text.splitlines()
        if line.startswith("kueue_admission_attempt_duration_seconds_bucket")
    ]
    assert got == [*go_default, "10.0", "+Inf"]


def test_no_created_series_and_a_gauge_beside_a_counter_of_the_same_stem():
    metrics = Metrics()
    metrics.finished(SUBJECT, "cq")
    metrics.report_cluster_queue(report(finished=1))
    text = generate_latest(metrics.registry).decode()
    assert "_created" not in text
    assert "# TYPE kueue_finished_workloads gauge" in text
    assert "# TYPE kueue_finished_workloads_total counter" in text
    labels = {"cluster_queue": "cq", **ROLE}
    sample = metrics.registry.get_sample_value
    assert sample("kueue_finished_workloads", labels) == 1
    assert sample("kueue_finished_workloads_total", {**labels, "priority_class": "high"}) == 1


def test_the_gates_take_families_out_as_kueue_registers_them():
    metrics = Metrics(config=MetricsConfig(local_queues=False, workload_creation_latency=False))
    metrics.admitted(SUBJECT, "cq", 1.0, None)
    metrics.workload_created("Job", 0.2)
    text = generate_latest(metrics.registry).decode()
    assert "kueue_local_queue_" not in text
    assert "kueue_workload_creation_latency_seconds" not in text
    assert 'kueue_admitted_workloads_total{cluster_queue="cq"' in text


def test_cluster_queue_resources_only_with_enable_cluster_queue_resources():
    off, on = Metrics(), Metrics(config=MetricsConfig(cluster_queue_resources=True))
    for metrics in (off, on):
        metrics.report_cluster_queue(report(weighted_share=float("inf")))
    cpu = {"cohort": "research", "cluster_queue": "cq", "flavor": "default", "resource": "cpu"}
    assert (
        off.registry.get_sample_value("kueue_cluster_queue_nominal_quota", {**cpu, **ROLE}) is None
    )
    sample = on.registry.get_sample_value
    assert sample("kueue_cluster_queue_nominal_quota", {**cpu, **ROLE}) == 4.0
    assert sample("kueue_cluster_queue_lending_limit", {**cpu, **ROLE}) == float("inf")
    assert sample("kueue_cluster_queue_resource_usage", {**cpu, **ROLE}) == 3.0
    pending = {"cluster_queue": "cq", "resource": "cpu", **ROLE}
    assert sample("kueue_cluster_queue_resource_pending", pending) == 6.0
    # Kueue: a ClusterQueue of weight 0 that borrows reports NaN.
    share = sample("kueue_cluster_queue_weighted_share", {"cluster_queue": "cq", "cohort": "research", **ROLE})  # fmt: skip
    assert share != share
    # Ungated, in both.
    for metrics in (off, on):
        status = {"cluster_queue": "cq", "status": "active", **ROLE}
        assert metrics.registry.get_sample_value("kueue_cluster_queue_status", status) == 1


def test_a_cluster_queue_moved_to_another_cohort_leaves_no_series_under_the_old_one():
    metrics = Metrics(config=MetricsConfig(cluster_queue_resources=True))
    metrics.report_cluster_queue(report())
    metrics.report_cluster_queue(report(parent_cohort="other", root_cohort="other"))
    text = generate_latest(metrics.registry).decode()
    assert 'cohort="research"' not in text
    assert 'parent_cohort="research"' not in text
    assert 'cohort="other",flavor="default"' in text


def test_a_deleted_cluster_queue_and_its_preemptions_lose_their_series_only_theirs():
    metrics = Metrics(config=MetricsConfig(cluster_queue_resources=True))
    for name in ("cq", "other"):
        metrics.report_cluster_queue(report(name))
        metrics.admitted(SUBJECT, name, 1.0, None)
        metrics.preempted(name, "InClusterQueue")
    metrics.forget_cluster_queue("cq")
    names = [
        (s.name, s.labels)
        for family in metrics.registry.collect()
        for s in family.samples
        if "cq" in s.labels.values()
    ]
    assert names == []
    preempted = {"preempting_cluster_queue": "other", "reason": "InClusterQueue", **ROLE}
    assert metrics.registry.get_sample_value("kueue_preempted_workloads_total", preempted) == 1


def test_a_term_that_ends_empties_the_gauges_and_keeps_the_counts():
    metrics = Metrics(replica_role="leader")
    metrics.report_cluster_queue(report())
    metrics.admitted(SUBJECT, "cq", 1.0, None)
    leader = {"cluster_queue": "cq", "replica_role": "leader"}
    sample = metrics.registry.get_sample_value
    assert sample("kueue_reserving_active_workloads", leader) == 1
    metrics.end_of_term()
    assert sample("kueue_reserving_active_workloads", leader) is None
    assert sample("kueue_admitted_workloads_total", {**leader, "priority_class": "high"}) == 1
    text = generate_latest(metrics.registry).decode()  # build info is no queue's gauge
    assert re.search(r'^kueue_build_info\{.*git_version="v[^"]+".*\} 1\.0$', text, re.M)


def test_a_local_queue_the_selector_leaves_out_has_no_series():
    chosen = MetricsConfig(local_queue_selector=LabelSelector((("team", "a"),), ()))
    metrics = Metrics(config=chosen)
    lq = LocalQueueReport("default", "user-queue", "True", 1, 0, 1, 1, 0)
    metrics.report_local_queue(lq, {"team": "b"})
    assert "kueue_local_queue_status{" not in generate_latest(metrics.registry).decode()
    metrics.report_local_queue(lq, {"team": "a"})
    assert "kueue_local_queue_status{" in generate_latest(metrics.registry).decode()
    metrics.report_local_queue(lq, {"team": "b"})  # its label changed: its series go
    assert "kueue_local_queue_status{" not in generate_latest(metrics.registry).decode()


def test_a_local_queue_whose_cluster_queue_is_gone_loses_the_caches_gauges_only():
    """Kueue's e2e metrics case: after the ClusterQueue's deletion, the LocalQueue's reserving
    and admitted-active series go; its pending, status and counters stay."""
    metrics = Metrics(config=MetricsConfig())
    lq = LocalQueueReport("default", "user-queue", "True", 1, 0, 1, 1, 0)
    metrics.report_local_queue(lq, {})
    text = generate_latest(metrics.registry).decode()
    assert 'kueue_local_queue_reserving_active_workloads{name="user-queue"' in text
    orphan = LocalQueueReport(
        "default", "user-queue", "False", 0, 1, 0, 0, 0, in_cluster_queue=False
    )
    metrics.report_local_queue(orphan, {})
    text = generate_latest(metrics.registry).decode()
    assert 'kueue_local_queue_reserving_active_workloads{name="user-queue"' not in text
    assert 'kueue_local_queue_admitted_active_workloads{name="user-queue"' not in text
    assert 'kueue_local_queue_pending_workloads{name="user-queue"' in text
    assert 'kueue_local_queue_status{active="False",name="user-queue"' in text


def test_a_deleted_cluster_queue_takes_its_local_queues_cache_gauges_with_it():
    """Even when no report of the LocalQueue follows the ClusterQueue's deletion."""
    metrics = Metrics(config=MetricsConfig())
    mine = LocalQueueReport("default", "mine", "True", 1, 0, 1, 1, 0, cluster_queue="cq")
    other = LocalQueueReport("default", "other", "True", 1, 0, 1, 1, 0, cluster_queue="cq2")
    metrics.report_local_queue(mine, {})
    metrics.report_local_queue(other, {})
    metrics.forget_cluster_queue("cq")
    text = generate_latest(metrics.registry).decode()
    assert 'kueue_local_queue_reserving_active_workloads{name="mine"' not in text
    assert 'kueue_local_queue_admitted_active_workloads{name="mine"' not in text
    assert 'kueue_local_queue_reserving_active_workloads{name="other"' in text
    assert 'kueue_local_queue_status{active="True",name="mine"' in text

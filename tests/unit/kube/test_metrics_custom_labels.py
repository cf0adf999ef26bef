"""metrics.customLabels on Kueue's metrics (CustomMetricLabels): which families carry which
custom_<name> labels, in Kueue's order; each queue's values as its labels and annotations say
now; a changed value takes the queue's old series away; the gate off leaves Kueue's own sets."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from extender.core.config.custom_labels import UNTRACKED, parse
from extender.core.config.kueue_config import MetricsConfig
from extender.kube.api import resources as r
from extender.kube.api.metrics import (
    ACTIVE,
    ClusterQueueReport,
    CohortReport,
    LocalQueueReport,
    Metrics,
    Subject,
)

SUBJECT = Subject("default", "user-queue", "", local_queue=True, cohorts=("research",))
ENTRIES = [
    {"name": "team"},  # a ClusterQueue's label "team"
    {"name": "cost", "sourceAnnotationKey": "billing/cost", "sourceKind": "ClusterQueue"},
    {"name": "env", "sourceLabelKey": "environment", "sourceKind": "LocalQueue"},
    {"name": "org", "sourceKind": "Cohort", "trackedValues": ["ml"]},
    {"name": "tier", "sourceKind": "Workload", "trackedValues": ["gold", "silver"]},
]


class Store:
    """The controller's store, as the metrics read it."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Any] = {}

    def put(self, resource: r.Resource, key: str, labels=None, annotations=None) -> None:
        meta = {"labels": labels or {}, "annotations": annotations or {}}
        self.objects[(resource.plural, key)] = {"metadata": meta}

    def get(self, resource: r.Resource, key: str) -> Any:
        return self.objects.get((resource.plural, key))


def metrics_with(entries=ENTRIES, *, gate: bool = True) -> tuple[Metrics, Store]:
    store = Store()
    metrics = Metrics(custom_labels=parse(entries, enabled=gate))
    metrics.read_objects_from(store)
    return metrics, store


def samples(metrics: Metrics, family: str) -> list[dict[str, str]]:
    """Every scraped series' labels of a family (histograms: their _count)."""
    text = generate_latest(metrics.registry).decode()
    out = []
    for fam in text_string_to_metric_families(text):
        if fam.name != family:
            continue
        for s in fam.samples:
            if s.name in (family, f"{family}_total", f"{family}_count"):
                out.append({**s.labels, "value": str(s.value)})
    return out


def cq_report(name: str = "cq", **overrides: Any) -> ClusterQueueReport:
    fields: dict[str, Any] = {
        "name": name,
        "status": ACTIVE,
        "parent_cohort": "research",
        "root_cohort": "research",
        "pending_active": 1,
        "pending_inadmissible": 0,
        "reserving": 1,
        "admitted": 1,
        "finished": 0,
        **overrides,
    }
    return ClusterQueueReport(**fields)


def lq_report() -> LocalQueueReport:
    return LocalQueueReport("default", "user-queue", "True", 1, 0, 1, 1, 0, cluster_queue="cq")


def cohort_report() -> CohortReport:
    return CohortReport("research", "", "research", {("default", "cpu"): 4.0}, {}, 1)


# ----- label names ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("family", "custom"),
    [
        ("kueue_pending_workloads", ("custom_team", "custom_cost")),
        ("kueue_admitted_workloads_total", ("custom_team", "custom_cost")),
        ("kueue_preempted_workloads_total", ("custom_team", "custom_cost")),
        ("kueue_pod_scheduling_gate_removal_seconds", ("custom_team", "custom_cost")),
        ("kueue_cluster_queue_info", ("custom_team", "custom_cost")),
        # Kueue's one family with two kinds: the ClusterQueue's, then the Workload's.
        ("kueue_admitted_active_workloads", ("custom_team", "custom_cost", "custom_tier")),
        ("kueue_local_queue_pending_workloads", ("custom_env",)),
        ("kueue_local_queue_admission_fair_sharing_usage", ("custom_env",)),
        ("kueue_workload_creation_latency_seconds", ("custom_env",)),
        ("kueue_cohort_subtree_quota", ("custom_org",)),
        ("kueue_cohort_info", ("custom_org",)),
        # Kueue defines it with the ClusterQueue's custom labels, not the Cohort's.
        ("kueue_cohort_subtree_admitted_active_workloads", ("custom_team", "custom_cost")),
        ("kueue_admission_attempts_total", ()),
        ("multikueue_workloads_dispatched_total", ()),
    ],
)
def test_each_family_carries_its_kinds_custom_labels_after_replica_role(family, custom):
    metrics, _ = metrics_with()
    names = metrics.families.label_names[family]
    assert names[names.index("replica_role") + 1 :] == custom


@pytest.mark.parametrize("gate", [False, True])
def test_without_the_gate_or_entries_the_label_sets_are_kueues_own(gate):
    plain = Metrics()
    other = Metrics(custom_labels=parse(ENTRIES if not gate else [], enabled=gate))
    assert other.custom is None
    assert other.families.label_names == plain.families.label_names


# ----- values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "annotations", "team", "cost"),
    [
        ({"team": "infra"}, {"billing/cost": "c-12"}, "infra", "c-12"),
        ({}, {}, "", ""),  # the object lacks the key: an empty value
        ({"billing/cost": "c-12"}, {"team": "infra"}, "", ""),  # label vs annotation
    ],
)
def test_a_cluster_queues_values_come_from_its_label_or_annotation(labels, annotations, team, cost):
    metrics, store = metrics_with()
    store.put(r.CLUSTER_QUEUES, "cq", labels, annotations)
    metrics.admitted(SUBJECT, "cq", 1.0, None)
    [series] = samples(metrics, "kueue_admitted_workloads")
    assert (series["custom_team"], series["custom_cost"]) == (team, cost)


def test_a_queue_not_in_the_store_has_empty_values():
    metrics, _ = metrics_with()
    metrics.report_cluster_queue(cq_report())
    for series in samples(metrics, "kueue_pending_workloads"):
        assert (series["custom_team"], series["custom_cost"]) == ("", "")


def test_local_queue_and_cohort_values_and_untracked_ones():
    metrics, store = metrics_with()
    store.put(r.LOCAL_QUEUES, "default/user-queue", {"environment": "prod"})
    store.put(r.COHORTS, "research", {"org": "physics"})
    metrics.report_local_queue(lq_report(), {})
    metrics.report_cohort(cohort_report())
    metrics.admitted(SUBJECT, "cq", 1.0, None)
    [status] = [s for s in samples(metrics, "kueue_local_queue_status") if s["active"] == "True"]
    assert status["custom_env"] == "prod"
    [quota] = samples(metrics, "kueue_cohort_subtree_quota")
    assert quota["custom_org"] == UNTRACKED  # "physics" is not among trackedValues
    [admitted] = samples(metrics, "kueue_cohort_subtree_admitted_workloads")
    assert admitted["custom_org"] == UNTRACKED


def test_creation_latency_carries_the_workloads_local_queue_values():
    metrics, store = metrics_with()
    store.put(r.LOCAL_QUEUES, "default/user-queue", {"environment": "prod"})
    made = {"metadata": {"namespace": "default"}, "spec": {"queueName": "user-queue"}}
    metrics.workload_created("Job", 0.5, made)
    metrics.workload_created("JobSet", 0.5)  # no Workload named: empty values
    got = {
        (s["job_kind"], s["custom_env"])
        for s in samples(metrics, "kueue_workload_creation_latency_seconds")
    }
    assert got == {("Job", "prod"), ("JobSet", "")}


def test_admitted_active_workloads_counts_by_the_workloads_values():
    metrics, store = metrics_with()
    store.put(r.CLUSTER_QUEUES, "cq", {"team": "infra"})
    metrics.report_cluster_queue(cq_report(admitted_by_workload={("gold",): 2, ("silver",): 1}))
    assert active(metrics) == {("infra", "gold"): "2.0", ("infra", "silver"): "1.0"}
    # The silver one finished: its series stays at 0, as Kueue's does.
    metrics.report_cluster_queue(cq_report(admitted_by_workload={("gold",): 2}))
    assert active(metrics) == {("infra", "gold"): "2.0", ("infra", "silver"): "0.0"}


def active(metrics: Metrics) -> dict[tuple[str, str], str]:
    return {
        (s["custom_team"], s["custom_tier"]): s["value"]
        for s in samples(metrics, "kueue_admitted_active_workloads")
    }


# ----- a value changes --------------------------------------------------------------------


def test_a_changed_cluster_queue_value_takes_its_old_series_away():
    metrics, store = metrics_with()
    store.put(r.CLUSTER_QUEUES, "cq", {"team": "infra"})
    store.put(r.CLUSTER_QUEUES, "other", {"team": "infra"})
    metrics.report_cluster_queue(cq_report())
    metrics.report_cluster_queue(cq_report("other"))
    metrics.admitted(SUBJECT, "cq", 1.0, None)
    store.put(r.CLUSTER_QUEUES, "cq", {"team": "platform"})
    metrics.report_cluster_queue(cq_report())
    teams = {
        (s["cluster_queue"], s["custom_team"])
        for s in samples(metrics, "kueue_cluster_queue_status")
    }
    assert teams == {("cq", "platform"), ("other", "infra")}
    # Kueue's counters of the queue go too; the next admission counts anew.
    assert samples(metrics, "kueue_admitted_workloads") == []
    metrics.admitted(SUBJECT, "cq", 1.0, None)
    [admitted] = samples(metrics, "kueue_admitted_workloads")
    assert admitted["custom_team"] == "platform"


def test_a_changed_local_queue_or_cohort_value_takes_their_old_series_away():
    metrics, store = metrics_with()
    store.put(r.LOCAL_QUEUES, "default/user-queue", {"environment": "prod"})
    store.put(r.COHORTS, "research", {"org": "ml"})
    metrics.report_local_queue(lq_report(), {})
    metrics.report_cohort(cohort_report())
    store.put(r.LOCAL_QUEUES, "default/user-queue", {"environment": "dev"})
    store.put(r.COHORTS, "research", {"org": "other"})
    metrics.report_local_queue(lq_report(), {})
    metrics.report_cohort(cohort_report())
    envs = {s["custom_env"] for s in samples(metrics, "kueue_local_queue_pending_workloads")}
    assert envs == {"dev"}
    orgs = {s["custom_org"] for s in samples(metrics, "kueue_cohort_info")}
    assert orgs == {UNTRACKED}
    assert metrics.reported_cohorts() == ["research"]


def test_a_deleted_queue_forgets_its_values():
    metrics, store = metrics_with()
    store.put(r.CLUSTER_QUEUES, "cq", {"team": "infra"})
    metrics.report_cluster_queue(cq_report())
    metrics.forget_cluster_queue("cq")
    assert samples(metrics, "kueue_pending_workloads") == []
    store.put(r.CLUSTER_QUEUES, "cq", {"team": "platform"})
    metrics.report_cluster_queue(cq_report())
    assert {s["custom_team"] for s in samples(metrics, "kueue_pending_workloads")} == {"platform"}


def test_workload_values_are_read_only_with_workload_entries():
    metrics, _ = metrics_with()
    read = metrics.workload_values
    assert read is not None
    assert read({"metadata": {"labels": {"tier": "gold"}}}) == ("gold",)
    assert read({"metadata": {"labels": {"tier": "bronze"}}}) == (UNTRACKED,)
    assert read(None) == (UNTRACKED,)  # no Workload: no value, and "" is not tracked
    assert metrics_with(ENTRIES[:1])[0].workload_values is None
    assert Metrics(config=MetricsConfig()).workload_values is None


def test_the_gate_off_keeps_entries_from_the_metrics():
    metrics, store = metrics_with(gate=False)
    store.put(r.CLUSTER_QUEUES, "cq", {"team": "infra"})
    metrics.report_cluster_queue(cq_report())
    assert all("custom_team" not in s for s in samples(metrics, "kueue_pending_workloads"))

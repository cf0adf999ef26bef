"""metrics.customLabels on the scraped metrics, over the API double (CustomMetricLabels on): a
ClusterQueue family, a LocalQueue family and kueue_admitted_active_workloads carry the
custom_<name> labels read from the queues' and the Workload's labels; relabelling the
ClusterQueue takes its old series away."""

from __future__ import annotations

import pytest

from extender.core.config.custom_labels import parse
from extender.kube.api import resources as r
from extender.kube.api.metrics import Metrics
from tests.controller.conftest import Running, eventually
from tests.controller.test_kueue_metrics import (
    ROLE,
    cluster_queue,
    local_queue,
    running,
    start,
)

ENTRIES = [
    {"name": "team"},  # the ClusterQueue's label "team" (ClusterQueue is the default kind)
    {"name": "env", "sourceLabelKey": "environment", "sourceKind": "LocalQueue"},
    {"name": "tier", "sourceKind": "Workload", "trackedValues": ["gold"]},
]
FLAVOR = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {"name": "default-flavor"},
    "spec": {},
}


@pytest.fixture
def controllers():
    started: list[Running] = []
    yield started
    for running_controller in started:
        running_controller.halt()


def value(metrics: Metrics, sample: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(sample, {**labels, **ROLE})


def status_teams(metrics: Metrics) -> set[str]:
    """The custom_team of every kueue_cluster_queue_status series of team-a."""
    return {
        s.labels["custom_team"]
        for family in metrics.registry.collect()
        if family.name == "kueue_cluster_queue_status"
        for s in family.samples
        if s.labels["cluster_queue"] == "team-a"
    }


def test_queue_and_workload_families_carry_custom_labels_and_follow_a_relabel(cluster, controllers):
    labelled_cq = cluster_queue("team-a", "4")
    labelled_cq["metadata"]["labels"] = {"team": "infra"}
    cluster.apply(
        FLAVOR, labelled_cq, local_queue("user-queue", "team-a", labels={"environment": "prod"})
    )
    custom = parse(ENTRIES, enabled=True)
    metrics = Metrics(custom_labels=custom)
    # The Workload entries' keys are copied to Workloads (config_file does it from the file).
    controllers.append(start(cluster, metrics, label_keys_to_copy=custom.label_keys_to_copy(())))
    cluster.job("gold", "1", queue="user-queue", duration="600s", labels={"tier": "gold"})
    eventually(lambda: running(cluster, "gold"), what="the job to start")

    def scraped() -> bool:
        return (
            value(
                metrics,
                "kueue_cluster_queue_status",
                cluster_queue="team-a",
                status="active",
                custom_team="infra",
            )
            == 1.0
            and value(
                metrics,
                "kueue_local_queue_status",
                name="user-queue",
                namespace="default",
                active="True",
                custom_env="prod",
            )
            == 1.0
            and value(
                metrics,
                "kueue_admitted_active_workloads",
                cluster_queue="team-a",
                custom_team="infra",
                custom_tier="gold",
            )
            == 1.0
        )

    eventually(scraped, what="the custom labels on the three families")
    latencies = {
        s.labels["custom_env"]
        for family in metrics.registry.collect()
        if family.name == "kueue_workload_creation_latency_seconds"
        for s in family.samples
    }
    assert latencies == {"prod"}  # the new Workload's LocalQueue's
    admitted = value(
        metrics,
        "kueue_admitted_workloads_total",
        cluster_queue="team-a",
        priority_class="",
        custom_team="infra",
    )
    assert admitted == 1.0

    cluster.admin.patch(r.CLUSTER_QUEUES, "team-a", {"metadata": {"labels": {"team": "platform"}}})
    eventually(lambda: status_teams(metrics) == {"platform"}, what="the series relabelled")
    assert (
        value(
            metrics,
            "kueue_admitted_active_workloads",
            cluster_queue="team-a",
            custom_team="platform",
            custom_tier="gold",
        )
        == 1.0
    )
    # Kueue clears the queue's counters with its old series: the old admission is not kept.
    assert value(metrics, "kueue_admitted_workloads_total", cluster_queue="team-a",
                 priority_class="", custom_team="infra") is None  # fmt: skip

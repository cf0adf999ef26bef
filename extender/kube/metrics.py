"""The controller's Prometheus metrics, with Kueue's names so Kueue's dashboards keep working."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class Metrics:
    """One registry per controller (tests make several controllers in one process)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.pending = Gauge(
            "kueue_pending_workloads",
            "Pending workloads per ClusterQueue and status (active or inadmissible)",
            ["cluster_queue", "status"],
            registry=r,
        )
        self.reserving = Gauge(
            "kueue_reserving_active_workloads",
            "Workloads holding quota per ClusterQueue",
            ["cluster_queue"],
            registry=r,
        )
        self.admitted_active = Gauge(
            "kueue_admitted_active_workloads",
            "Admitted workloads that have not finished, per ClusterQueue",
            ["cluster_queue"],
            registry=r,
        )
        self.admitted_total = Counter(
            "kueue_admitted_workloads_total",
            "Workloads admitted, per ClusterQueue",
            ["cluster_queue"],
            registry=r,
        )
        self.evicted_total = Counter(
            "kueue_evicted_workloads_total",
            "Workloads evicted, per ClusterQueue and reason",
            ["cluster_queue", "reason"],
            registry=r,
        )
        self.preempted_total = Counter(
            "kueue_preempted_workloads_total",
            "Workloads preempted, per preempting ClusterQueue and reason",
            ["preempting_cluster_queue", "reason"],
            registry=r,
        )
        self.evictions_dropped = Counter(
            "tower_evictions_dropped_total",
            "Evictions decided but not written: the workload finished, or its preemptor went "
            "away, while the eviction waited for the API budget",
            registry=r,
        )
        self.wait_time = Histogram(
            "kueue_admission_wait_time_seconds",
            "Time from creation (or requeue) to admission",
            ["cluster_queue"],
            buckets=(1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 3600),
            registry=r,
        )
        self.attempt_duration = Histogram(
            "kueue_admission_attempt_duration_seconds",
            "Duration of one scheduling cycle, by result",
            ["result"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
            registry=r,
        )
        self.attempts_total = Counter(
            "kueue_admission_attempts_total",
            "Scheduling cycles, by result (success when something was admitted)",
            ["result"],
            registry=r,
        )
        self.resource_usage = Gauge(
            "kueue_cluster_queue_resource_usage",
            "Quota used per ClusterQueue, flavor and resource",
            ["cluster_queue", "flavor", "resource"],
            registry=r,
        )
        self.nominal_quota = Gauge(
            "kueue_cluster_queue_nominal_quota",
            "Nominal quota per ClusterQueue, flavor and resource",
            ["cluster_queue", "flavor", "resource"],
            registry=r,
        )
        self.api_writes = Counter(
            "tower_kube_api_writes_total",
            "Writes to the Kubernetes API, by verb and resource",
            ["verb", "resource"],
            registry=r,
        )
        self.write_failures = Counter(
            "tower_kube_api_write_failures_total",
            "Writes the API server refused, by resource and HTTP status",
            ["resource", "code"],
            registry=r,
        )

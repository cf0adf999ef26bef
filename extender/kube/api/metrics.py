"""The controller's Prometheus metrics, with Kueue's names so Kueue's dashboards keep working."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# The series labelled by a ClusterQueue, removed when the ClusterQueue is deleted (as Kueue's
# ClearClusterQueueMetrics does), so a deleted queue's gauges do not linger forever.
_BY_CLUSTER_QUEUE: dict[str, tuple[str, ...]] = {
    "pending": ("cluster_queue", "status"),
    "reserving": ("cluster_queue",),
    "admitted_active": ("cluster_queue",),
    "admitted_total": ("cluster_queue",),
    "evicted_total": ("cluster_queue", "reason"),
    "preempted_total": ("preempting_cluster_queue", "reason"),
    "wait_time": ("cluster_queue",),
    "resource_usage": ("cluster_queue", "flavor", "resource"),
    "nominal_quota": ("cluster_queue", "flavor", "resource"),
}


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
            "Writes that failed, by resource and HTTP status or transport error",
            ["resource", "code"],
            registry=r,
        )
        self.api_errors = Counter(
            "tower_kube_api_errors_total",
            "Failed API requests of any kind (each is retried with backoff), by verb and HTTP "
            "status or transport error (connection-refused, connection-reset, timeout, tls)",
            ["verb", "code"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "tower_reconcile_errors_total",
            "Reconciles that failed and were requeued with backoff, by controller and reason "
            "(api: the API server refused or did not answer; unexpected: a bug, logged with "
            "its traceback)",
            ["controller", "reason"],
            registry=r,
        )
        self.start_refused = Counter(
            "tower_job_start_refused_total",
            "Starts of admitted Jobs that an admission webhook kept suspended (the webhook's "
            "--controller-username does not name this controller)",
            registry=r,
        )
        self.leading = Gauge(
            "tower_leader",
            "1 while this replica leads (and writes), 0 while it stands by",
            registry=r,
        )
        self.extender_duration = Histogram(
            "tower_scheduler_extender_request_duration_seconds",
            "Time to answer kube-scheduler's filter and prioritize calls",
            ["verb", "code"],
            buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
            registry=r,
        )
        self.placement_refused = Counter(
            "tower_placement_refused_total",
            "Admissions held back because no node plan fits the workload's pods",
            ["cluster_queue"],
            registry=r,
        )

    def forget_cluster_queue(self, name: str) -> None:
        """Remove every series of a deleted ClusterQueue."""
        for attribute, names in _BY_CLUSTER_QUEUE.items():
            metric = getattr(self, attribute)
            series = {
                tuple(sample.labels.get(n, "") for n in names)
                for family in metric.collect()
                for sample in family.samples
            }
            for values in series:
                if values[0] == name:
                    metric.remove(*values)

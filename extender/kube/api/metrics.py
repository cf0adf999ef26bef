"""The controller's Prometheus metrics, with Kueue's names so Kueue's dashboards keep working."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from extender.kube.api.writes import WriteObserver

# Seconds, for a job's way from creation to running: a burst is measured in tenths of a
# second, a queue that waits for quota in hours.
_WAIT_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 3600, 14400)

# The series labelled by a ClusterQueue, removed when the ClusterQueue is deleted (as Kueue's
# ClearClusterQueueMetrics does), so a deleted queue's gauges do not linger forever.
_BY_CLUSTER_QUEUE: dict[str, tuple[str, ...]] = {
    "pending": ("cluster_queue", "status"),
    "reserving": ("cluster_queue",),
    "admitted_active": ("cluster_queue",),
    "admitted_total": ("cluster_queue",),
    "evicted_total": ("cluster_queue", "reason", "underlying_cause"),
    "ready_to_evicted": ("cluster_queue", "reason", "underlying_cause"),
    "preempted_total": ("preempting_cluster_queue", "reason"),
    "wait_time": ("cluster_queue",),
    "start_wait_time": ("cluster_queue",),
    "admitted_until_start": ("cluster_queue",),
    "ready_wait_time": ("cluster_queue",),
    "checks_wait_time": ("cluster_queue",),
    "admitted_until_ready": ("cluster_queue",),
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
            "Workloads evicted, per ClusterQueue and reason (a deactivation: reason Deactivated "
            "and its cause in underlying_cause, as Kueue counts it)",
            ["cluster_queue", "reason", "underlying_cause"],
            registry=r,
        )
        self.ready_to_evicted = Histogram(
            "kueue_pods_ready_to_evicted_time_seconds",
            "The number of seconds between a workload's start, based on its PodsReady "
            "condition, and its eviction",
            ["cluster_queue", "reason", "underlying_cause"],
            buckets=_WAIT_BUCKETS,
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
        self.start_wait_time = Histogram(
            "tower_start_wait_time_seconds",
            "Time from a job's creation to its start (unsuspended after admission), per "
            "ClusterQueue",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.admitted_until_start = Histogram(
            "tower_admitted_until_start_wait_time_seconds",
            "Time from a Workload's admission to its job's start, per ClusterQueue",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        # WaitForPodsReady's, by Kueue's names: observed once, when PodsReady first turns True.
        self.lq_fair_sharing_usage = Gauge(
            "kueue_local_queue_admission_fair_sharing_usage",
            "Reports a value representing the LocalQueue's Admission Fair Sharing usage, "
            "calculated from the resource-weighted sum of consumed resources and pending "
            "admission penalties, divided by the LocalQueue's fair sharing weight",
            ["name", "namespace", "cluster_queue"],
            registry=r,
        )
        self.checks_wait_time = Histogram(
            "kueue_admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission, per "
            "'cluster_queue'",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.ready_wait_time = Histogram(
            "kueue_ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, per 'cluster_queue'",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.admitted_until_ready = Histogram(
            "kueue_admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'cluster_queue'",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.writes_queued = Gauge(
            "tower_kube_api_writes_queued",
            "Writes waiting to be sent (for a sender, or behind a write to the same object)",
            registry=r,
        )
        self.writes_in_flight = Gauge(
            "tower_kube_api_writes_in_flight",
            "Writes sent and not yet answered",
            registry=r,
        )
        self.write_queue_wait = Histogram(
            "tower_kube_api_write_queue_wait_seconds",
            "Time a write waited between being decided and being sent (the budget's wait "
            "is part of the send, not of this)",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
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

    def write_observer(self) -> WriteObserver:
        """The write pool's gauges and wait histogram."""
        return _WriteMetrics(self)

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


class _WriteMetrics(WriteObserver):
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def queued(self, count: int) -> None:
        self.metrics.writes_queued.set(count)

    def in_flight(self, count: int) -> None:
        self.metrics.writes_in_flight.set(count)

    def waited(self, seconds: float) -> None:
        self.metrics.write_queue_wait.observe(seconds)

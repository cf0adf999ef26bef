"""Tower's own metrics (tower_*): its API writes and errors, its leadership, its extender."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from extender.kube.api.metrics.families import Families
from extender.kube.api.writes import WriteObserver

# Seconds, for a job's way from creation to running: a burst is measured in tenths of a
# second, a queue that waits for quota in hours.
_WAIT_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 3600, 14400)


class TowerMetrics:
    """Tower's own families: what Kueue has no name for."""

    def __init__(self, families: Families) -> None:
        add = families.add
        self.evictions_dropped = Counter(
            "tower_evictions_dropped_total",
            "Evictions decided but not written: the workload finished, or its preemptor went "
            "away, while the eviction waited for the API budget",
            registry=None,
        )
        add(self.evictions_dropped)
        self.start_wait_time = Histogram(
            "tower_start_wait_time_seconds",
            "Time from a job's creation to its start (unsuspended after admission), per "
            "ClusterQueue",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=None,
        )
        add(self.start_wait_time)
        self.admitted_until_start = Histogram(
            "tower_admitted_until_start_wait_time_seconds",
            "Time from a Workload's admission to its job's start, per ClusterQueue",
            ["cluster_queue"],
            buckets=_WAIT_BUCKETS,
            registry=None,
        )
        add(self.admitted_until_start)
        self.writes_queued = Gauge(
            "tower_kube_api_writes_queued",
            "Writes waiting to be sent (for a sender, or behind a write to the same object)",
            registry=None,
        )
        add(self.writes_queued)
        self.writes_in_flight = Gauge(
            "tower_kube_api_writes_in_flight", "Writes sent and not yet answered", registry=None
        )
        add(self.writes_in_flight)
        self.write_queue_wait = Histogram(
            "tower_kube_api_write_queue_wait_seconds",
            "Time a write waited between being decided and being sent (the budget's wait "
            "is part of the send, not of this)",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=None,
        )
        add(self.write_queue_wait)
        self.api_writes = Counter(
            "tower_kube_api_writes_total",
            "Writes to the Kubernetes API, by verb and resource",
            ["verb", "resource"],
            registry=None,
        )
        add(self.api_writes)
        self.write_failures = Counter(
            "tower_kube_api_write_failures_total",
            "Writes that failed, by resource and HTTP status or transport error",
            ["resource", "code"],
            registry=None,
        )
        add(self.write_failures)
        self.api_errors = Counter(
            "tower_kube_api_errors_total",
            "Failed API requests of any kind (each is retried with backoff), by verb and HTTP "
            "status or transport error (connection-refused, connection-reset, timeout, tls)",
            ["verb", "code"],
            registry=None,
        )
        add(self.api_errors)
        self.reconcile_errors = Counter(
            "tower_reconcile_errors_total",
            "Reconciles that failed and were requeued with backoff, by controller and reason "
            "(api: the API server refused or did not answer; unexpected: a bug, logged with "
            "its traceback)",
            ["controller", "reason"],
            registry=None,
        )
        add(self.reconcile_errors)
        self.start_refused = Counter(
            "tower_job_start_refused_total",
            "Starts of admitted Jobs that an admission webhook kept suspended (the webhook's "
            "--controller-username does not name this controller)",
            registry=None,
        )
        add(self.start_refused)
        self.leading = Gauge(
            "tower_leader",
            "1 while this replica leads (and writes), 0 while it stands by",
            registry=None,
        )
        add(self.leading)
        self.extender_duration = Histogram(
            "tower_scheduler_extender_request_duration_seconds",
            "Time to answer kube-scheduler's filter and prioritize calls",
            ["verb", "code"],
            buckets=(0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5),
            registry=None,
        )
        add(self.extender_duration)
        self.placement_refused = Counter(
            "tower_placement_refused_total",
            "Admissions held back because no node plan fits the workload's pods",
            ["cluster_queue"],
            registry=None,
        )
        add(self.placement_refused)

    def forget_cluster_queue(self, name: str) -> None:
        """A deleted ClusterQueue's series of Tower's own families go too."""
        for metric in (self.start_wait_time, self.admitted_until_start, self.placement_refused):
            for family in metric.collect():
                for queue in {s.labels.get("cluster_queue") for s in family.samples}:
                    if queue == name:
                        metric.remove(name)

    def write_observer(self) -> WriteObserver:
        """The write pool's gauges and wait histogram."""
        return _WriteMetrics(self)


class _WriteMetrics(WriteObserver):
    def __init__(self, metrics: TowerMetrics) -> None:
        self.metrics = metrics

    def queued(self, count: int) -> None:
        self.metrics.writes_queued.set(count)

    def in_flight(self, count: int) -> None:
        self.metrics.writes_in_flight.set(count)

    def waited(self, seconds: float) -> None:
        self.metrics.write_queue_wait.observe(seconds)

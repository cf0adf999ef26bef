"""Kueue's LocalQueue metrics (its LocalQueueMetrics feature): one series per LocalQueue."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.config.custom_labels import LOCAL_QUEUE
from extender.kube.api.metrics.families import Custom, Families, Vec, kueue_buckets
from extender.kube.api.metrics.texts import CAUSES, EVICTION_REASONS, PENDING_STATUS

LQ = ("name", "namespace")
_BY_LQ = Custom((LOCAL_QUEUE,), ("namespace", "name"))  # its custom_ labels, from the LocalQueue
PC = "priority_class"
_CONDITION_STATUSES = ("True", "False", "Unknown")


@dataclass(frozen=True, slots=True)
class LocalQueueUsage:
    """One flavor-resource of a LocalQueue's ClusterQueue, in Kueue's units."""

    flavor: str
    resource: str
    reserved: float
    used: float


@dataclass(frozen=True, slots=True)
class LocalQueueReport:
    """What the gauges of one LocalQueue say now."""

    namespace: str
    name: str
    active: str  # its Active condition: True, False or Unknown
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    finished: int
    usage: tuple[LocalQueueUsage, ...] = ()
    # Its ClusterQueue, and whether it exists. Kueue reports reserving and admitted-active
    # from its cache's ClusterQueue, and clears them when that ClusterQueue is deleted.
    cluster_queue: str = ""
    in_cluster_queue: bool = True


class LocalQueueMetrics:
    """The families labelled by a LocalQueue (18 of Kueue's 60)."""

    def __init__(self, f: Families) -> None:
        b14 = kueue_buckets(14)
        self.pending = f.gauge(
            "kueue_local_queue_pending_workloads",
            "The number of pending workloads, per 'local_queue' and 'status'." + PENDING_STATUS,
            [*LQ, "status"],
            custom=_BY_LQ,
        )
        self.finished = f.gauge(
            "kueue_local_queue_finished_workloads",
            "The number of finished workloads, per 'local_queue'.",
            LQ,
            custom=_BY_LQ,
        )
        self.quota_reserved_total = f.counter(
            "kueue_local_queue_quota_reserved_workloads_total",
            "The total number of quota reserved workloads per 'local_queue'",
            [*LQ, PC],
            custom=_BY_LQ,
        )
        self.finished_total = f.counter(
            "kueue_local_queue_finished_workloads_total",
            "The total number of finished workloads per 'local_queue'",
            [*LQ, PC],
            custom=_BY_LQ,
        )
        self.quota_reserved_wait = f.histogram(
            "kueue_local_queue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota "
            "reservation, per 'local_queue'",
            [*LQ, PC],
            b14,
            custom=_BY_LQ,
        )
        self.admitted_total = f.counter(
            "kueue_local_queue_admitted_workloads_total",
            "The total number of admitted workloads per 'local_queue'",
            [*LQ, PC],
            custom=_BY_LQ,
        )
        self.admission_wait = f.histogram(
            "kueue_local_queue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per "
            "'local_queue'",
            [*LQ, PC],
            b14,
            custom=_BY_LQ,
        )
        self.checks_wait = f.histogram(
            "kueue_local_queue_admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission, per "
            "'local_queue'",
            [*LQ, PC],
            b14,
            custom=_BY_LQ,
        )
        self.ready_wait = f.histogram(
            "kueue_local_queue_ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, per 'local_queue'",
            [*LQ, PC],
            b14,
            custom=_BY_LQ,
        )
        self.admitted_until_ready = f.histogram(
            "kueue_local_queue_admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'local_queue'",
            [*LQ, PC],
            b14,
            custom=_BY_LQ,
        )
        self.evicted_total = f.counter(
            "kueue_local_queue_evicted_workloads_total",
            "The number of evicted workloads per 'local_queue'," + EVICTION_REASONS + CAUSES,
            [*LQ, "reason", "underlying_cause", PC],
            custom=_BY_LQ,
        )
        self.reserving = f.gauge(
            "kueue_local_queue_reserving_active_workloads",
            "The number of Workloads that are reserving quota, per 'localQueue'",
            LQ,
            custom=_BY_LQ,
        )
        self.admitted_active = f.gauge(
            "kueue_local_queue_admitted_active_workloads",
            "The number of admitted Workloads that are active, per 'localQueue'",
            LQ,
            custom=_BY_LQ,
        )
        self.status = f.gauge(
            "kueue_local_queue_status",
            "Reports 'localQueue' with its 'active' status (with possible values 'True', "
            "'False', or 'Unknown').\nFor a LocalQueue, the metric only reports a value of 1 "
            "for one of the statuses.",
            [*LQ, "active"],
            custom=_BY_LQ,
        )
        self.reservation = f.gauge(
            "kueue_local_queue_resource_reservation",
            "Reports the localQueue's total resource reservation within all the flavors",
            [*LQ, "flavor", "resource"],
            custom=_BY_LQ,
        )
        self.usage = f.gauge(
            "kueue_local_queue_resource_usage",
            "Reports the localQueue's total resource usage within all the flavors",
            [*LQ, "flavor", "resource"],
            custom=_BY_LQ,
        )
        self.fair_sharing_usage = f.gauge(
            "kueue_local_queue_admission_fair_sharing_usage",
            "Reports a value representing the LocalQueue's Admission Fair Sharing usage,\n"
            "calculated from the resource-weighted sum of consumed resources and pending\n"
            "admission penalties, divided by the LocalQueue's fair sharing weight",
            [*LQ, "cluster_queue"],
            custom=_BY_LQ,
        )
        self.unadmitted = f.gauge(
            "kueue_local_queue_unadmitted_workloads",
            "The number of unadmitted workloads, per 'name', 'namespace', 'cluster_queue', "
            "'reason', and 'underlying_cause'. This metric is only emitted when "
            "UnadmittedWorkloadsObservability feature gate is enabled.",
            [*LQ, "cluster_queue", "reason", "underlying_cause"],
            custom=_BY_LQ,
        )
        self._usage_series: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self._cluster_queue_of: dict[tuple[str, str], str] = {}

    @property
    def every(self) -> Sequence[Vec[Any]]:
        return (
            self.pending,
            self.finished,
            self.quota_reserved_total,
            self.finished_total,
            self.quota_reserved_wait,
            self.admitted_total,
            self.admission_wait,
            self.checks_wait,
            self.ready_wait,
            self.admitted_until_ready,
            self.evicted_total,
            self.reserving,
            self.admitted_active,
            self.status,
            self.reservation,
            self.usage,
            self.fair_sharing_usage,
            self.unadmitted,
        )

    def report(self, r: LocalQueueReport) -> None:
        """Every gauge of one LocalQueue, as it is now."""
        lq = (r.name, r.namespace)
        self.pending.labels(*lq, "active").set(r.pending_active)
        self.pending.labels(*lq, "inadmissible").set(r.pending_inadmissible)
        if r.in_cluster_queue:
            self._cluster_queue_of[lq] = r.cluster_queue
            self.reserving.labels(*lq).set(r.reserving)
            self.admitted_active.labels(*lq).set(r.admitted)
        else:
            self._forget_cache_gauges(lq)
        self.finished.labels(*lq).set(r.finished)
        for status in _CONDITION_STATUSES:
            self.status.labels(*lq, status).set(1 if status == r.active else 0)
        series = {(u.flavor, u.resource) for u in r.usage}
        for flavor, resource in self._usage_series.get(lq, set()) - series:
            self.reservation.remove(*lq, flavor, resource)
            self.usage.remove(*lq, flavor, resource)
        self._usage_series[lq] = series
        for u in r.usage:
            self.reservation.labels(*lq, u.flavor, u.resource).set(u.reserved)
            self.usage.labels(*lq, u.flavor, u.resource).set(u.used)

    def _forget_cache_gauges(self, lq: tuple[str, str]) -> None:
        self._cluster_queue_of.pop(lq, None)
        self.reserving.remove_matching(name=lq[0], namespace=lq[1])
        self.admitted_active.remove_matching(name=lq[0], namespace=lq[1])

    def forget_cluster_queue(self, cluster_queue: str) -> None:
        """A deleted ClusterQueue: its LocalQueues' reserving and admitted-active series go
        (Kueue's cache clears them then: ClearLocalQueueCacheMetrics); their other series stay
        until the LocalQueue goes."""
        for lq, cq in list(self._cluster_queue_of.items()):
            if cq == cluster_queue:
                self._forget_cache_gauges(lq)

    def forget(self, namespace: str, name: str) -> None:
        """A deleted LocalQueue, or one the selector no longer picks: its series go (Kueue's
        ClearLocalQueueMetrics, ClearLocalQueueCacheMetrics, ClearLocalQueueResourceMetrics)."""
        for vec in self.every:
            vec.remove_matching(name=name, namespace=namespace)
        self._usage_series.pop((name, namespace), None)
        self._cluster_queue_of.pop((name, namespace), None)

    def end_of_term(self) -> None:
        self._usage_series.clear()

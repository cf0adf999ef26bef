"""Kueue's ClusterQueue metrics: its workloads' course (counters, waits) and its gauges."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from extender.core.config.custom_labels import CLUSTER_QUEUE, WORKLOAD
from extender.kube.api.metrics.families import Custom, Families, kueue_buckets
from extender.kube.api.metrics.texts import (
    CAUSES,
    EVICTION_REASONS,
    ONCE_CAUSES,
    PENDING_STATUS,
    SHARE,
)

ACTIVE, PENDING, TERMINATING = "active", "pending", "terminating"  # Kueue's CQStatuses
_STATUSES = (PENDING, ACTIVE, TERMINATING)

CQ = "cluster_queue"
PC = "priority_class"
_BY_CQ = Custom((CLUSTER_QUEUE,), (CQ,))  # its custom_ labels, from the ClusterQueue


@dataclass(frozen=True, slots=True)
class QuotaReport:
    """One flavor-resource of a ClusterQueue, in Kueue's units (cores, bytes, counts)."""

    flavor: str
    resource: str
    nominal: float
    borrowing_limit: float  # +Inf when unset, as Kueue reports it
    lending_limit: float
    reserved: float  # held by every workload with quota
    used: float  # held by the admitted ones


@dataclass(frozen=True, slots=True)
class ClusterQueueReport:
    """What the gauges of one ClusterQueue say now."""

    name: str
    status: str  # ACTIVE, PENDING or TERMINATING
    parent_cohort: str  # "" without a cohort
    root_cohort: str
    pending_active: int
    pending_inadmissible: int
    reserving: int
    admitted: int
    finished: int
    quotas: tuple[QuotaReport, ...] = ()
    pending_resources: Mapping[str, float] | None = None  # None: not counted
    weighted_share: float | None = None  # None: fair sharing is off
    # The admitted ones by their custom values of metrics.customLabels' Workload entries
    # (None: there are none; `admitted` is then their one series).
    admitted_by_workload: Mapping[tuple[str, ...], int] | None = None


class ClusterQueueMetrics:
    """The families labelled by a ClusterQueue (29 of Kueue's 60)."""

    def __init__(self, f: Families, *, resources: bool, info: bool) -> None:
        self.resources = resources  # metrics.enableClusterQueueResources
        self.info_on = info  # feature gate MetricsForCohorts
        b14, b16 = kueue_buckets(14), kueue_buckets(16)
        self.pending = f.gauge(
            "kueue_pending_workloads",
            "The number of pending workloads, per 'cluster_queue' and 'status'." + PENDING_STATUS,
            [CQ, "status"],
            custom=_BY_CQ,
        )
        self.finished = f.gauge(
            "kueue_finished_workloads",
            "The number of finished workloads per 'cluster_queue'.",
            [CQ],
            custom=_BY_CQ,
        )
        self.quota_reserved_total = f.counter(
            "kueue_quota_reserved_workloads_total",
            "The total number of quota reserved workloads per 'cluster_queue'",
            [CQ, PC],
            custom=_BY_CQ,
        )
        self.finished_total = f.counter(
            "kueue_finished_workloads_total",
            "The total number of finished workloads per 'cluster_queue'",
            [CQ, PC],
            custom=_BY_CQ,
        )
        self.quota_reserved_wait = f.histogram(
            "kueue_quota_reserved_wait_time_seconds",
            "The time between a workload was created or requeued until it got quota "
            "reservation, per 'cluster_queue'",
            [CQ, PC],
            b14,
            custom=_BY_CQ,
        )
        self.ready_to_evicted = f.histogram(
            "kueue_pods_ready_to_evicted_time_seconds",
            "The number of seconds between a workload's pods being ready and eviction "
            "workloads per 'cluster_queue'," + EVICTION_REASONS + CAUSES,
            [CQ, "reason", "underlying_cause"],
            b14,
            custom=_BY_CQ,
        )
        self.admitted_total = f.counter(
            "kueue_admitted_workloads_total",
            "The total number of admitted workloads per 'cluster_queue'",
            [CQ, PC],
            custom=_BY_CQ,
        )
        self.admission_wait = f.histogram(
            "kueue_admission_wait_time_seconds",
            "The time between a workload was created or requeued until admission, per "
            "'cluster_queue'",
            [CQ, PC],
            b16,
            custom=_BY_CQ,
        )
        self.ready_wait = f.histogram(
            "kueue_ready_wait_time_seconds",
            "The time between a workload was created or requeued until ready, per 'cluster_queue'",
            [CQ, PC],
            b14,
            custom=_BY_CQ,
        )
        self.admitted_until_ready = f.histogram(
            "kueue_admitted_until_ready_wait_time_seconds",
            "The time between a workload was admitted until ready, per 'cluster_queue'",
            [CQ, PC],
            b14,
            custom=_BY_CQ,
        )
        self.checks_wait = f.histogram(
            "kueue_admission_checks_wait_time_seconds",
            "The time from when a workload got the quota reservation until admission, per "
            "'cluster_queue'",
            [CQ, PC],
            b14,
            custom=_BY_CQ,
        )
        self.evicted_total = f.counter(
            "kueue_evicted_workloads_total",
            "The number of evicted workloads per 'cluster_queue'," + EVICTION_REASONS + CAUSES,
            [CQ, "reason", "underlying_cause", PC],
            custom=_BY_CQ,
        )
        self.replaced_slices = f.counter(
            "kueue_replaced_workload_slices_total",
            "The number of replaced workload slices per 'cluster_queue'",
            [CQ],
            custom=_BY_CQ,
        )
        self.evicted_once = f.counter(
            "kueue_evicted_workloads_once_total",
            "The number of unique workload evictions per 'cluster_queue',"
            + EVICTION_REASONS
            + ONCE_CAUSES,
            [CQ, "reason", "underlying_cause", PC],
            custom=_BY_CQ,
        )
        self.preempted = f.counter(
            "kueue_preempted_workloads_total",
            "The number of preempted workloads per 'preempting_cluster_queue',\n"
            "The label 'reason' can have the following values:\n"
            '- "InClusterQueue" means that the workload was preempted by a workload in the '
            "same ClusterQueue.\n"
            '- "InCohortReclamation" means that the workload was preempted by a workload in '
            "the same cohort due to reclamation of nominal quota.\n"
            '- "InCohortFairSharing" means that the workload was preempted by a workload in '
            "the same cohort Fair Sharing.\n"
            '- "InCohortReclaimWhileBorrowing" means that the workload was preempted by a '
            "workload in the same cohort due to reclamation of nominal quota while borrowing.",
            ["preempting_cluster_queue", "reason"],
            custom=Custom((CLUSTER_QUEUE,), ("preempting_cluster_queue",)),
        )
        self.eviction_latency = f.histogram(
            "kueue_workload_eviction_latency_seconds",
            "The time from workload eviction (WorkloadEvicted condition becomes True) until "
            "the workload returns to Pending (quota released)." + EVICTION_REASONS,
            [CQ, "reason"],
            b14,
            custom=_BY_CQ,
        )
        self.reserving = f.gauge(
            "kueue_reserving_active_workloads",
            "The number of Workloads that are reserving quota, per 'cluster_queue'",
            [CQ],
            custom=_BY_CQ,
        )
        self.admitted_active = f.gauge(
            "kueue_admitted_active_workloads",
            "The number of admitted Workloads that are active, per 'cluster_queue'",
            [CQ],
            custom=Custom((CLUSTER_QUEUE, WORKLOAD), (CQ,)),
        )
        self.status = f.gauge(
            "kueue_cluster_queue_status",
            "Reports 'cluster_queue' with its 'status' (with possible values 'pending', "
            "'active' or 'terminated').\nFor a ClusterQueue, the metric only reports a value "
            "of 1 for one of the statuses.",
            [CQ, "status"],
            custom=_BY_CQ,
        )
        self.unadmitted = f.gauge(
            "kueue_unadmitted_workloads",
            "The number of unadmitted workloads, per 'cluster_queue', 'reason', and "
            "'underlying_cause'. This metric is only emitted when "
            "UnadmittedWorkloadsObservability feature gate is enabled.",
            [CQ, "reason", "underlying_cause"],
            custom=_BY_CQ,
        )
        by_resource = ["cohort", CQ, "flavor", "resource"]
        self.reservation = f.gauge(
            "kueue_cluster_queue_resource_reservation",
            "Reports the cluster_queue's total resource reservation within all the flavors",
            by_resource,
            custom=_BY_CQ,
        )
        self.resource_pending = f.gauge(
            "kueue_cluster_queue_resource_pending",
            "Reports the cluster_queue's total pending resource requests. Unlike "
            "resource_reservation, pending workloads have not yet been assigned to flavors.",
            [CQ, "resource"],
            custom=_BY_CQ,
        )
        self.usage = f.gauge(
            "kueue_cluster_queue_resource_usage",
            "Reports the cluster_queue's total resource usage within all the flavors",
            by_resource,
            custom=_BY_CQ,
        )
        self.nominal_quota = f.gauge(
            "kueue_cluster_queue_nominal_quota",
            "Reports the cluster_queue's resource nominal quota within all the flavors",
            by_resource,
            custom=_BY_CQ,
        )
        self.borrowing_limit = f.gauge(
            "kueue_cluster_queue_borrowing_limit",
            "Reports the cluster_queue's resource borrowing limit within all the flavors. If "
            "borrowingLimit is unset, this metric reports +Inf.",
            by_resource,
            custom=_BY_CQ,
        )
        self.lending_limit = f.gauge(
            "kueue_cluster_queue_lending_limit",
            "Reports the cluster_queue's resource lending limit within all the flavors. If "
            "lendingLimit is unset, this metric reports +Inf.",
            by_resource,
            custom=_BY_CQ,
        )
        self.weighted_share = f.gauge(
            "kueue_cluster_queue_weighted_share",
            SHARE.format(where="cohort", what="ClusterQueue"),
            [CQ, "cohort"],
            custom=_BY_CQ,
        )
        self.info = f.gauge(
            "kueue_cluster_queue_info",
            "Reports ClusterQueue hierarchy information. The metric has value 1 and can be "
            "joined using labels.",
            [CQ, "parent_cohort", "root_cohort"],
            custom=_BY_CQ,
        )
        self.preemption_skips = f.gauge(
            "kueue_admission_cycle_preemption_skips",
            "The number of Workloads in the ClusterQueue that got preemption candidates but "
            "had to be skipped because other ClusterQueues needed the same resources in the "
            "same cycle",
            [CQ],
            custom=_BY_CQ,
        )
        # What was last reported per ClusterQueue, so what no longer holds (another cohort,
        # a flavor taken out) is removed rather than left behind.
        self._resource_series: dict[str, set[tuple[str, str, str]]] = {}
        self._pending_resources: dict[str, set[str]] = {}
        self._placed: dict[str, tuple[str, str]] = {}  # parent cohort, root cohort
        # The Workloads' custom values each ClusterQueue had admitted ones of: such a series
        # stays at 0 when they are gone, as Kueue's (it adds and takes one per Workload).
        self._admitted_values: dict[str, set[tuple[str, ...]]] = {}

    def _report_admitted(self, r: ClusterQueueReport) -> None:
        if r.admitted_by_workload is None:
            self.admitted_active.labels(r.name).set(r.admitted)
            return
        seen = self._admitted_values.setdefault(r.name, set())
        seen.update(r.admitted_by_workload)
        for values in seen:
            count = r.admitted_by_workload.get(values, 0)
            self.admitted_active.labels(r.name, workload=values).set(count)

    def report(self, r: ClusterQueueReport) -> None:
        """Every gauge of one ClusterQueue, as it is now."""
        name = r.name
        self.pending.labels(name, "active").set(r.pending_active)
        self.pending.labels(name, "inadmissible").set(r.pending_inadmissible)
        self.reserving.labels(name).set(r.reserving)
        self._report_admitted(r)
        self.finished.labels(name).set(r.finished)
        for status in _STATUSES:
            self.status.labels(name, status).set(1 if status == r.status else 0)
        placed = (r.parent_cohort, r.root_cohort)
        before = self._placed.get(name)
        if before is not None and before != placed:
            self.info.remove(name, *before)
            self.weighted_share.remove(name, before[0])
        self._placed[name] = placed
        if self.info_on:
            self.info.labels(name, r.parent_cohort, r.root_cohort).set(1)
        if not self.resources:
            return
        cohort = r.parent_cohort
        series = {(cohort, q.flavor, q.resource) for q in r.quotas}
        for gone in self._resource_series.get(name, set()) - series:
            for vec in (
                self.reservation,
                self.usage,
                self.nominal_quota,
                self.borrowing_limit,
                self.lending_limit,
            ):
                vec.remove(gone[0], name, gone[1], gone[2])
        self._resource_series[name] = series
        for q in r.quotas:
            labels = (cohort, name, q.flavor, q.resource)
            self.nominal_quota.labels(*labels).set(q.nominal)
            self.borrowing_limit.labels(*labels).set(q.borrowing_limit)
            self.lending_limit.labels(*labels).set(q.lending_limit)
            self.reservation.labels(*labels).set(q.reserved)
            self.usage.labels(*labels).set(q.used)
        pending = dict(r.pending_resources or {})
        for resource in self._pending_resources.get(name, set()) - set(pending):
            self.resource_pending.remove(name, resource)
        self._pending_resources[name] = set(pending)
        for resource, amount in pending.items():
            self.resource_pending.labels(name, resource).set(amount)
        if r.weighted_share is not None:
            # Kueue: a ClusterQueue of weight 0 that borrows reports NaN, not +Inf.
            share = math.nan if r.weighted_share == math.inf else r.weighted_share
            self.weighted_share.labels(name, cohort).set(share)

    def forget(self, name: str) -> None:
        """A deleted ClusterQueue: none of its series stay (Kueue's ClearClusterQueueMetrics,
        ClearCacheMetrics and ClearClusterQueueResourceMetrics)."""
        for vec in (
            self.pending,
            self.finished,
            self.quota_reserved_total,
            self.finished_total,
            self.quota_reserved_wait,
            self.ready_to_evicted,
            self.admitted_total,
            self.admission_wait,
            self.ready_wait,
            self.admitted_until_ready,
            self.checks_wait,
            self.evicted_total,
            self.replaced_slices,
            self.evicted_once,
            self.eviction_latency,
            self.reserving,
            self.admitted_active,
            self.status,
            self.unadmitted,
            self.reservation,
            self.resource_pending,
            self.usage,
            self.nominal_quota,
            self.borrowing_limit,
            self.lending_limit,
            self.weighted_share,
            self.info,
            self.preemption_skips,
        ):
            vec.remove_matching(cluster_queue=name)
        self.preempted.remove_matching(preempting_cluster_queue=name)
        self._resource_series.pop(name, None)
        self._pending_resources.pop(name, None)
        self._placed.pop(name, None)
        self._admitted_values.pop(name, None)

    def end_of_term(self) -> None:
        """What was last reported is forgotten with the gauges (the next term reports anew)."""
        self._resource_series.clear()
        self._pending_resources.clear()
        self._placed.clear()
        self._admitted_values.clear()

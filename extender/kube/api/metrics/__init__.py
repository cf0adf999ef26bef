"""The controller's Prometheus metrics: Kueue's 60 by Kueue's names, labels, buckets; Tower's own.

The reconcilers tell `Metrics` what happened (a quota reserved, an admission, an eviction, a
finish, ...) and what their queues hold now (`report_*`, once per status round); it fills
Kueue's families, gated as Kueue gates them (metrics.enableClusterQueueResources,
metrics.localQueueMetrics and the metrics' feature gates). Every series is per queue, cohort,
flavor or resource, never per Workload. docs/metrics.md lists each family and where it is fed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from extender.core.config.custom_labels import (
    CLUSTER_QUEUE,
    COHORT,
    LOCAL_QUEUE,
    WORKLOAD,
    CustomLabels,
)
from extender.core.config.kueue_config import MetricsConfig
from extender.kube.api.metrics.cluster_queue import (
    ACTIVE,
    PENDING,
    TERMINATING,
    ClusterQueueMetrics,
    ClusterQueueReport,
    QuotaReport,
)
from extender.kube.api.metrics.cohort import CohortMetrics, CohortReport
from extender.kube.api.metrics.custom import CustomValues, ObjectStore
from extender.kube.api.metrics.families import Exposition, Families
from extender.kube.api.metrics.health import HealthMetrics
from extender.kube.api.metrics.local_queue import (
    LocalQueueMetrics,
    LocalQueueReport,
    LocalQueueUsage,
)
from extender.kube.api.metrics.tower import TowerMetrics

__all__ = [
    "ACTIVE",
    "PENDING",
    "TERMINATING",
    "ClusterQueueReport",
    "CohortReport",
    "LocalQueueReport",
    "LocalQueueUsage",
    "Metrics",
    "MetricsConfig",
    "QuotaReport",
    "Subject",
]

STANDALONE, LEADER = "standalone", "leader"  # Kueue's replica_role without and with election


@dataclass(frozen=True, slots=True)
class Subject:
    """A Workload as its metrics label it."""

    namespace: str
    queue: str  # its LocalQueue's name
    priority_class: str  # spec.priorityClassRef's name, "" without one
    local_queue: bool  # whether its LocalQueue's metrics are reported
    cohorts: tuple[str, ...] = ()  # the cohorts above its ClusterQueue, nearest first


class Metrics(TowerMetrics):
    """One controller's families in one registry (tests make several controllers in one
    process). Tower's own families are the attributes of TowerMetrics; Kueue's are fed
    through the methods below."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        config: MetricsConfig | None = None,
        replica_role: str = STANDALONE,
        custom_labels: CustomLabels | None = None,
    ) -> None:
        self.config = config = config or MetricsConfig()
        # metrics.customLabels: only with the CustomMetricLabels gate on and some entries do
        # Kueue's families carry custom_<name> labels; else their label sets are Kueue's own.
        on = custom_labels is not None and custom_labels.enabled and bool(custom_labels.entries)
        self.custom = CustomValues(custom_labels) if on and custom_labels else None
        self.families = families = Families(replica_role, self.custom)
        self.health = HealthMetrics(families, creation_latency=config.workload_creation_latency)
        self.cluster_queue = ClusterQueueMetrics(
            families, resources=config.cluster_queue_resources, info=config.cohorts
        )
        self.cohort = CohortMetrics(families, info=config.cohorts)
        # Kueue registers the LocalQueue families only with its LocalQueueMetrics gate.
        self.local_queue = LocalQueueMetrics(families) if config.local_queues else None
        super().__init__(families)
        self._local_queues: set[tuple[str, str]] = set()  # reported, (namespace, name)
        self.registry = registry or CollectorRegistry()
        self.registry.register(Exposition(families.metrics))
        if self.custom is not None:
            self.custom.on_change.update(
                {
                    CLUSTER_QUEUE: self._cluster_queue_relabelled,
                    LOCAL_QUEUE: self._local_queue_relabelled,
                    COHORT: self.cohort.relabelled,
                }
            )

    def read_objects_from(self, store: ObjectStore) -> None:
        """Where the custom labels' values are read: the controller's store of queues."""
        if self.custom is not None:
            self.custom.store = store

    @property
    def workload_values(self) -> Callable[[Any], tuple[str, ...]] | None:
        """A Workload's custom values for kueue_admitted_active_workloads (None: there are
        no entries of kind Workload)."""
        custom = self.custom
        return custom.of_workload if custom is not None and custom.has(WORKLOAD) else None

    # ----- what happened -------------------------------------------------------------------

    def cycle(self, result: str, seconds: float, preemption_skips: Mapping[str, int]) -> None:
        """One scheduling cycle with heads: `success` when it admitted something."""
        self.health.attempts_total.labels(result).inc()
        self.health.attempt_duration.labels(result).observe(seconds)
        for cq, count in preemption_skips.items():
            self.cluster_queue.preemption_skips.labels(cq).set(count)

    def quota_reserved(self, s: Subject, cq: str, waited: float) -> None:
        """Quota reserved, `waited` seconds after it was created or requeued."""
        waited = max(0.0, waited)
        self.cluster_queue.quota_reserved_total.labels(cq, s.priority_class).inc()
        self.cluster_queue.quota_reserved_wait.labels(cq, s.priority_class).observe(waited)
        lq = self._lq(s)
        if lq is not None:
            lq.quota_reserved_total.labels(s.queue, s.namespace, s.priority_class).inc()
            lq.quota_reserved_wait.labels(s.queue, s.namespace, s.priority_class).observe(waited)

    def admitted(self, s: Subject, cq: str, waited: float, checks_waited: float | None) -> None:
        """Admitted, `waited` seconds after it was created or requeued; `checks_waited` after
        its quota was reserved when it had AdmissionChecks to pass."""
        waited = max(0.0, waited)
        pc = s.priority_class
        self.cluster_queue.admitted_total.labels(cq, pc).inc()
        self.cluster_queue.admission_wait.labels(cq, pc).observe(waited)
        for cohort in s.cohorts:
            self.cohort.subtree_admitted_total.labels(cohort, pc).inc()
        if checks_waited is not None:
            self.cluster_queue.checks_wait.labels(cq, pc).observe(max(0.0, checks_waited))
        lq = self._lq(s)
        if lq is not None:
            lq.admitted_total.labels(s.queue, s.namespace, pc).inc()
            lq.admission_wait.labels(s.queue, s.namespace, pc).observe(waited)
            if checks_waited is not None:
                lq.checks_wait.labels(s.queue, s.namespace, pc).observe(max(0.0, checks_waited))

    def evicted(
        self,
        s: Subject,
        cq: str,
        reason: str,
        cause: str,
        *,
        ready_for: float | None,
        first: bool,
    ) -> None:
        """Evicted from `cq`; `ready_for` seconds after its pods were ready (None: they were
        not); `first` when it is its first eviction for this reason and cause."""
        pc = s.priority_class
        self.cluster_queue.evicted_total.labels(cq, reason, cause, pc).inc()
        if first:
            self.cluster_queue.evicted_once.labels(cq, reason, cause, pc).inc()
        if ready_for is not None:
            self.cluster_queue.ready_to_evicted.labels(cq, reason, cause).observe(
                max(0.0, ready_for)
            )
        lq = self._lq(s)
        if lq is not None:
            lq.evicted_total.labels(s.queue, s.namespace, reason, cause, pc).inc()

    def slice_replaced(self, cq: str) -> None:
        """An elastic job's slice in `cq` replaced by its admitted scale-up slice."""
        self.cluster_queue.replaced_slices.labels(cq).inc()

    def preempted(self, preempting_cq: str, reason: str) -> None:
        """A workload preempted for one of `preempting_cq` (reason InClusterQueue, ...)."""
        self.cluster_queue.preempted.labels(preempting_cq, reason).inc()

    def released_after_eviction(self, cq: str, reason: str, seconds: float) -> None:
        """An evicted Workload's quota given back, `seconds` after it was evicted."""
        self.cluster_queue.eviction_latency.labels(cq, reason).observe(max(0.0, seconds))

    def finished(self, s: Subject, cq: str) -> None:
        """Finished (`cq`: where it held quota, "" when it held none, as Kueue labels it)."""
        self.cluster_queue.finished_total.labels(cq, s.priority_class).inc()
        lq = self._lq(s)
        if lq is not None:
            lq.finished_total.labels(s.queue, s.namespace, s.priority_class).inc()

    def ready(self, s: Subject, cq: str, queued_for: float, admitted_for: float) -> None:
        """Its pods first all ready (WaitForPodsReady), this long after it was queued and
        after it was admitted."""
        pc = s.priority_class
        self.cluster_queue.ready_wait.labels(cq, pc).observe(max(0.0, queued_for))
        self.cluster_queue.admitted_until_ready.labels(cq, pc).observe(max(0.0, admitted_for))
        lq = self._lq(s)
        if lq is not None:
            lq.ready_wait.labels(s.queue, s.namespace, pc).observe(max(0.0, queued_for))
            lq.admitted_until_ready.labels(s.queue, s.namespace, pc).observe(max(0.0, admitted_for))

    def workload_created(
        self, job_kind: str, seconds: float, workload: Mapping[str, Any] | None = None
    ) -> None:
        """A Workload made for a job of `job_kind`, `seconds` after the job was created
        (`workload`: the one made, whose LocalQueue's custom labels the series carries)."""
        latency = self.health.creation_latency
        if latency is None:
            return
        queue = None
        if workload is not None:
            namespace = (workload.get("metadata") or {}).get("namespace") or ""
            queue = f"{namespace}/{(workload.get('spec') or {}).get('queueName') or ''}"
        latency.labels(job_kind, queue=queue).observe(max(0.0, seconds))

    def gate_removed(self, gate: str, cq: str, is_group: bool, seconds: float) -> None:
        """A pod's scheduling gate removed, `seconds` after its Workload was admitted."""
        group = "true" if is_group else "false"
        self.health.gate_removal.labels(gate, cq, group).observe(max(0.0, seconds))

    def dispatched(self, cq: str, cluster: str) -> None:
        """MultiKueue made a Workload's copy on a worker cluster."""
        self.health.dispatched.labels(cq, cluster).inc()

    def admitted_on_worker(self, cq: str, cluster: str) -> None:
        """A worker cluster admitted a Workload MultiKueue dispatched (its check turned Ready)."""
        self.health.admitted_on_worker.labels(cq, cluster).inc()

    def fair_sharing_usage(
        self, namespace: str, name: str, cq: str, usage: float, labels: Mapping[str, str]
    ) -> None:
        """A LocalQueue's admission fair sharing usage, sampled (`labels`: the LocalQueue's)."""
        if self.local_queue is not None and self.config.exposes_local_queue(labels):
            self.local_queue.fair_sharing_usage.labels(name, namespace, cq).set(usage)

    # ----- what the queues hold now ----------------------------------------------------------

    def report_cluster_queue(self, report: ClusterQueueReport) -> None:
        self._relabel(CLUSTER_QUEUE, report.name)
        self.cluster_queue.report(report)

    def report_cohort(self, report: CohortReport) -> None:
        self._relabel(COHORT, report.name)
        self.cohort.report(report)

    def report_local_queue(self, report: LocalQueueReport, labels: Mapping[str, str]) -> None:
        """A LocalQueue's gauges, if its metrics are reported (its labels against
        metrics.localQueueMetrics); a LocalQueue no longer selected loses its series."""
        if self.local_queue is None:
            return
        key = (report.namespace, report.name)
        if not self.config.exposes_local_queue(labels):
            if key in self._local_queues:
                self.forget_local_queue(*key)
            return
        self._local_queues.add(key)
        self._relabel(LOCAL_QUEUE, f"{report.namespace}/{report.name}")
        self.local_queue.report(report)

    def exposes_local_queue(self, labels: Mapping[str, str] | None) -> bool:
        """Whether a LocalQueue (its labels; None: it does not exist) has metrics."""
        return labels is not None and self.config.exposes_local_queue(labels)

    def forget_cluster_queue(self, name: str) -> None:
        """A deleted ClusterQueue: its series go, with its LocalQueues' cache gauges."""
        self.cluster_queue.forget(name)
        self.health.gate_removal.remove_matching(cluster_queue=name)
        if self.local_queue is not None:
            self.local_queue.forget_cluster_queue(name)
        super().forget_cluster_queue(name)
        if self.custom is not None:
            self.custom.forget(CLUSTER_QUEUE, name)

    def forget_local_queue(self, namespace: str, name: str) -> None:
        """A deleted LocalQueue: its series go."""
        self._local_queues.discard((namespace, name))
        if self.local_queue is not None:
            self.local_queue.forget(namespace, name)
        if self.custom is not None:
            self.custom.forget(LOCAL_QUEUE, f"{namespace}/{name}")

    def forget_cohort(self, name: str) -> None:
        """A cohort gone from the tree: its series go."""
        self.cohort.forget(name)
        if self.custom is not None:
            self.custom.forget(COHORT, name)

    def reported_cohorts(self) -> list[str]:
        return self.cohort.reported()

    def end_of_term(self) -> None:
        """This replica stops leading: it keeps no queue's state, so Kueue's gauges are
        emptied (counters and histograms keep counting across terms); the next term reports
        every queue anew."""
        for gauge in self.families.gauges:
            gauge.clear()
        self._local_queues.clear()
        self.cluster_queue.end_of_term()
        self.cohort.end_of_term()
        if self.local_queue is not None:
            self.local_queue.end_of_term()

    def _relabel(self, kind: str, ref: str) -> None:
        """Read a queue's custom values before its gauges are reported: when they changed,
        its old series go first (custom.py), not halfway through the report."""
        if self.custom is not None:
            self.custom.of(kind, ref)

    def _cluster_queue_relabelled(self, name: str) -> None:
        """A ClusterQueue's custom values changed: every series of it goes (Kueue's
        resyncClusterQueueGaugeMetrics); the next report makes its gauges anew."""
        self.cluster_queue.forget(name)
        self.health.gate_removal.remove_matching(cluster_queue=name)

    def _local_queue_relabelled(self, ref: str) -> None:
        namespace, name = ref.split("/", 1)
        if self.local_queue is not None:
            self.local_queue.forget(namespace, name)

    def _lq(self, s: Subject) -> LocalQueueMetrics | None:
        return self.local_queue if s.local_queue else None

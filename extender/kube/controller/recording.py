"""What the metrics are told: a Workload's labels, and what each queue and cohort holds now.

`subject` labels a Workload as Kueue's metrics do (its LocalQueue, its priority class, the
cohorts above its ClusterQueue). The reports are built from the core's state and one status
round's counts (queue_status.py), in Kueue's units: cores, bytes, counts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from extender.core.api.models import FlavorResource, LocalQueue
from extender.core.api.quantity import MILLI_RESOURCES
from extender.core.scheduling.fairsharing import dominant_resource_share
from extender.kube.api import objects as o
from extender.kube.api.metrics import (
    ACTIVE,
    PENDING,
    TERMINATING,
    ClusterQueueReport,
    CohortReport,
    LocalQueueReport,
    LocalQueueUsage,
    QuotaReport,
    Subject,
)
from extender.kube.api.resources import LOCAL_QUEUES, WORKLOADS
from extender.kube.controller.context import Context

Obj = dict[str, Any]


def amount(resource: str, accounted: int) -> float:
    """An amount as Kueue's metrics show it (AsApproximateFloat64): cores, not milli-cores."""
    return accounted / 1000 if resource in MILLI_RESOURCES else float(accounted)


def labels_of(obj: Any) -> dict[str, str]:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return dict(labels) if isinstance(labels, Mapping) else {}


def local_queue_labels(ctx: Context, key: str) -> dict[str, str] | None:
    """A LocalQueue's labels (None: it does not exist), for metrics.localQueueMetrics."""
    obj = ctx.store.get(LOCAL_QUEUES, key)
    return None if obj is None else labels_of(obj)


def priority_class(obj: Mapping[str, Any]) -> str:
    """The Workload's priority class as Kueue labels it: spec.priorityClassRef's name (v1beta1:
    spec.priorityClassName), "" without one."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return ""
    ref = spec.get("priorityClassRef")
    name = ref.get("name") if isinstance(ref, Mapping) else spec.get("priorityClassName")
    return name if isinstance(name, str) else ""


def subject(ctx: Context, obj: Mapping[str, Any], cq: str | None) -> Subject:
    """A Workload object as its metrics label it (`cq`: where it holds or is given quota)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    namespace = str(meta.get("namespace") or "")
    queue = str(spec.get("queueName") or "") if isinstance(spec, Mapping) else ""
    node = ctx.state.quota_node(cq) if cq else None
    return Subject(
        namespace,
        queue,
        priority_class(obj),
        ctx.metrics.exposes_local_queue(local_queue_labels(ctx, f"{namespace}/{queue}")),
        tuple(a.name for a in node.ancestors()) if node is not None else (),
    )


def finished(ctx: Context, obj: Mapping[str, Any]) -> None:
    """The controller wrote Finished on this Workload (as it was before): counted in the
    ClusterQueue it held quota in ("" when none, as Kueue labels it)."""
    admission = o.admission_of(obj) if o.is_true(obj, o.QUOTA_RESERVED) else None
    cq = admission.cluster_queue if admission is not None else ""
    ctx.metrics.finished(subject(ctx, obj, cq), cq)


def gate_removed(ctx: Context, workload: Any, gate: str, *, is_group: bool) -> None:
    """A pod's scheduling gate removed (Kueue's pod_scheduling_gate_removal_seconds): timed
    from its Workload's admission."""
    if not isinstance(workload, Mapping):
        return
    admitted = since(workload, o.ADMITTED)
    admission = o.admission_of(workload)
    if admitted is not None and admission is not None:
        cq = admission.cluster_queue
        ctx.metrics.gate_removed(gate, cq, is_group, ctx.clock() - admitted)


def queued_since(obj: Mapping[str, Any]) -> float:
    """When the Workload was queued: its last requeue, else its creation (Kueue's
    QueuedWaitTime)."""
    requeued = o.condition(obj, o.REQUEUED)
    if requeued is not None and requeued.get("lastTransitionTime"):
        return o.seconds_at(requeued["lastTransitionTime"])
    return o.seconds_at((obj.get("metadata") or {}).get("creationTimestamp"))


def since(obj: Mapping[str, Any], kind: str) -> float | None:
    """When a condition of the Workload last turned True (None: it is not True)."""
    found = o.condition(obj, kind)
    if found is None or found.get("status") != "True" or not found.get("lastTransitionTime"):
        return None
    return o.seconds_at(found["lastTransitionTime"])


class FinishedLedger:
    """The finished Workloads that still exist, per LocalQueue (Kueue's finished_workloads
    gauges): one entry per such Workload, its LocalQueue's key shared."""

    def __init__(self) -> None:
        self._queue_of: dict[str, str] = {}
        self._count: Counter[str] = Counter()
        self._keys: dict[str, str] = {}  # one string per LocalQueue key

    def seen(self, key: str, lq_key: str) -> bool:
        """Count a finished Workload; False when it was counted already."""
        if key in self._queue_of:
            return False
        lq_key = self._keys.setdefault(lq_key, lq_key)
        self._queue_of[key] = lq_key
        self._count[lq_key] += 1
        return True

    def gone(self, key: str) -> str | None:
        """Forget a Workload; its LocalQueue's key when it was counted."""
        lq_key = self._queue_of.pop(key, None)
        if lq_key is not None:
            self._count[lq_key] -= 1
        return lq_key

    def count(self, lq_key: str) -> int:
        return self._count.get(lq_key, 0)

    def by_cluster_queue(self, local_queue: Callable[[str], LocalQueue | None]) -> Counter[str]:
        """Per ClusterQueue, through each LocalQueue's (one that does not exist counts in
        none, as in Kueue)."""
        out: Counter[str] = Counter()
        for lq_key, count in self._count.items():
            lq = local_queue(lq_key) if count else None
            if lq is not None:
                out[lq.cluster_queue] += count
        return out


class Counts:
    """One ClusterQueue and its LocalQueues counted in one pass over its own workloads."""

    def __init__(self) -> None:
        self.pending = 0
        self.used: Counter[FlavorResource] = Counter()  # reserved by every holder
        self.held = 0
        self.admitted = 0
        self.used_admitted: Counter[FlavorResource] = Counter()
        self.pending_lq: Counter[str] = Counter()
        self.inadmissible_lq: Counter[str] = Counter()
        self.admitted_lq: Counter[str] = Counter()  # holders (reserving)
        self.admitted_only_lq: Counter[str] = Counter()
        self.usage_lq: dict[str, Counter[FlavorResource]] = {}
        self.admitted_usage_lq: dict[str, Counter[FlavorResource]] = {}
        self.pending_requests: Counter[str] = Counter()
        # Admitted ones by their metrics.customLabels Workload values (None: no such entries).
        self.admitted_by_workload: Counter[tuple[str, ...]] | None = None

    @classmethod
    def of(cls, ctx: Context, cq_name: str) -> Counts:
        state = ctx.state
        metrics = ctx.metrics
        counts = cls()
        by_lq = metrics.local_queue is not None
        resources = metrics.config.cluster_queue_resources
        for workload in state.pending_workloads_in(cq_name):
            counts.pending += 1
            lq_key = f"{workload.namespace}/{workload.queue_name}"
            counts.pending_lq[lq_key] += 1
            if by_lq and state.queue_is_inadmissible(cq_name, workload.key):
                counts.inadmissible_lq[lq_key] += 1
            if resources:
                for pod_set in workload.pod_sets:
                    counts.pending_requests.update(pod_set.totals)
        cq = state.cluster_queue(cq_name)
        # Without AdmissionChecks a reservation is written as an admission, in one write.
        checked = cq is not None and bool(cq.admission_checks)
        values_of = metrics.workload_values
        by_values = counts.admitted_by_workload = Counter() if values_of is not None else None
        for holder in state.admitted_in(cq_name):
            workload = holder.workload
            lq_key = f"{workload.namespace}/{workload.queue_name}"
            counts.held += 1
            counts.used.update(holder.usage)
            counts.admitted_lq[lq_key] += 1
            counts.usage_lq.setdefault(lq_key, Counter()).update(holder.usage)
            if checked:
                obj = ctx.store.get(WORKLOADS, workload.key)
                if obj is None or not o.is_true(obj, o.ADMITTED):
                    continue
            counts.admitted += 1
            counts.used_admitted.update(holder.usage)
            if values_of is not None and by_values is not None:
                by_values[values_of(ctx.store.get(WORKLOADS, workload.key))] += 1
            counts.admitted_only_lq[lq_key] += 1
            counts.admitted_usage_lq.setdefault(lq_key, Counter()).update(holder.usage)
        return counts


def cluster_queue_report(
    ctx: Context, name: str, counts: Counts, obj: Mapping[str, Any] | None, finished: int
) -> ClusterQueueReport:
    """One ClusterQueue's gauges: its status, queue, holders and quota."""
    state = ctx.state
    cq = state.cluster_queue(name)
    active, _, _ = state.cluster_queue_active(name)
    deleting = bool(((obj or {}).get("metadata") or {}).get("deletionTimestamp"))
    pending_active, inadmissible = state.pending_in(name)
    if not active:  # Kueue: an inactive ClusterQueue's pending workloads are all inadmissible
        pending_active, inadmissible = 0, pending_active + inadmissible
    node = state.quota_node(name)
    parent = node.parent if node is not None else None
    quotas: list[QuotaReport] = []
    pending: dict[str, float] | None = None
    share: float | None = None
    if ctx.metrics.config.cluster_queue_resources and cq is not None:
        for (flavor, resource), quota in cq.quotas.items():
            fr = (flavor, resource)
            quotas.append(
                QuotaReport(
                    flavor,
                    resource,
                    amount(resource, quota.nominal),
                    _limit(resource, quota.borrowing_limit),
                    _limit(resource, quota.lending_limit),
                    amount(resource, counts.used.get(fr, 0)),
                    amount(resource, counts.used_admitted.get(fr, 0)),
                )
            )
        pending = {r: 0.0 for _, r in cq.quotas}  # Kueue seeds every covered resource
        for resource, total in counts.pending_requests.items():
            pending[resource] = amount(resource, total)
        if ctx.settings.fair_sharing and node is not None:
            share = dominant_resource_share(node)
    return ClusterQueueReport(
        name=name,
        status=TERMINATING if deleting else (ACTIVE if active else PENDING),
        parent_cohort=parent.name if parent is not None else "",
        root_cohort=parent.root().name if parent is not None else "",
        pending_active=pending_active,
        pending_inadmissible=inadmissible,
        reserving=counts.held,
        admitted=counts.admitted,
        finished=finished,
        quotas=tuple(quotas),
        pending_resources=pending,
        weighted_share=share,
        admitted_by_workload=counts.admitted_by_workload,
    )


def _limit(resource: str, limit: int | None) -> float:
    return math.inf if limit is None else amount(resource, limit)


def local_queue_report(
    ctx: Context, lq: LocalQueue, counts: Counts, status: Mapping[str, Any], finished: int
) -> LocalQueueReport:
    """One LocalQueue's gauges, from its ClusterQueue's counts and its status."""
    state = ctx.state
    key = lq.key
    active = next(
        (c.get("status") for c in status.get("conditions") or () if c.get("type") == "Active"),
        "Unknown",
    )
    pending = counts.pending_lq.get(key, 0)
    inadmissible = counts.inadmissible_lq.get(key, 0)
    cq_active = (
        state.cluster_queue_known(lq.cluster_queue)
        and (state.cluster_queue_active(lq.cluster_queue)[0])
    )
    if not cq_active:
        inadmissible = pending
    cq = state.cluster_queue(lq.cluster_queue)
    reserved = counts.usage_lq.get(key) or Counter()
    used = counts.admitted_usage_lq.get(key) or Counter()
    usage = tuple(
        LocalQueueUsage(f, r, amount(r, reserved.get((f, r), 0)), amount(r, used.get((f, r), 0)))
        for f, r in (cq.quotas if cq is not None else ())
    )
    return LocalQueueReport(
        namespace=lq.namespace,
        name=lq.name,
        active=str(active),
        pending_active=pending - inadmissible,
        pending_inadmissible=inadmissible,
        reserving=counts.admitted_lq.get(key, 0),
        admitted=counts.admitted_only_lq.get(key, 0),
        finished=finished,
        usage=usage,
        cluster_queue=lq.cluster_queue,
        in_cluster_queue=state.cluster_queue_known(lq.cluster_queue),
    )


def cohort_reports(
    ctx: Context, cluster_queues: Iterable[str], admitted: Mapping[str, int]
) -> list[CohortReport]:
    """The cohorts above these ClusterQueues (each once), summed over their subtrees.
    `admitted`: the admitted workloads of each ClusterQueue, as last counted."""
    state = ctx.state
    seen: set[str] = set()
    reports = []
    for name in cluster_queues:
        node = state.quota_node(name)
        for cohort in node.ancestors() if node is not None else ():
            if cohort.name in seen:
                continue
            seen.add(cohort.name)
            reserved: Counter[FlavorResource] = Counter()
            count = 0
            for leaf in cohort.leaves:
                reserved.update(leaf.usage)
                count += admitted.get(leaf.name, 0)
            fair = ctx.settings.fair_sharing and state.cohort_is_explicit(cohort.name)
            reports.append(
                CohortReport(
                    name=cohort.name,
                    parent=cohort.parent.name if cohort.parent is not None else "",
                    root=cohort.root().name,
                    quota={fr: amount(fr[1], v) for fr, v in cohort.subtree.items()},
                    reserved={fr: amount(fr[1], v) for fr, v in reserved.items()},
                    admitted=count,
                    weighted_share=dominant_resource_share(cohort) if fair else None,
                )
            )
    return reports

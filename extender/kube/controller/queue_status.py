"""ClusterQueue and LocalQueue status: what `kubectl get cq,lq -o wide` shows, kept current.

Only queues something happened to are looked at (their keys, from `Context.touch`), at most
once per status interval each; one pass over a ClusterQueue's own workloads counts it and all its
LocalQueues. The status in the store is compared with the wanted one, so nothing is written
twice; each write is conditional on the version it read, so a late one never overwrites a
newer status. Writes use spare budget only: admissions never wait behind a status; when the budget
is contended, only a status over a minute stale is written, within a 1% share.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from extender.core.scheduling.fairsharing import weighted_share
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError, KubeError, RequestBudget
from extender.kube.api.resources import CLUSTER_QUEUES, LOCAL_QUEUES, Resource
from extender.kube.controller.context import Context
from extender.kube.controller.recording import (
    Counts,
    FinishedLedger,
    cluster_queue_report,
    cohort_reports,
    labels_of,
    local_queue_labels,
    local_queue_report,
)
from extender.kube.controller.status import cluster_queue_status, local_queue_status

log = logging.getLogger("tower.queue_status")

Obj = dict[str, Any]


class QueueStatusReconciler:
    """Writes the status of touched queues; reports their gauges (and their cohorts')."""

    def __init__(self, ctx: Context, finished: FinishedLedger | None = None) -> None:
        self.ctx = ctx
        self.finished = finished or FinishedLedger()
        self._admitted: dict[str, int] = {}  # ClusterQueue -> admitted, as last counted
        self._finished_by_cq: Counter[str] | None = None  # this round's
        self._cohorts_changed = False
        self._fair_sharing_due = 0.0  # wall time of the next admission fair sharing sample
        qps = ctx.client.budget.qps
        self._share = RequestBudget(max(0.2, qps * 0.01), 5, clock=ctx.monotonic)
        self._written_at: dict[str, float] = {}
        self._last_round = float("-inf")

    def sample_fair_sharing(self) -> None:
        """Admission fair sharing: each LocalQueue's usage one sample further when its
        interval passed; its status tells it, and the order of heads may change."""
        ctx = self.ctx
        usage = ctx.state.fair_usage
        now = ctx.clock()
        if ctx.state.fair_sharing_ledger is None or now < self._fair_sharing_due:
            return
        sampled = usage.sample(now)
        if sampled:
            ctx.touch_queues(local_queues=sampled)
            ctx.reschedule()
            for key in sampled:
                lq = ctx.state.local_queue(key)
                labels = local_queue_labels(ctx, key)
                if lq is not None and labels is not None:
                    value = ctx.state.queues.lq_usage(key)
                    ctx.metrics.fair_sharing_usage(
                        lq.namespace, lq.name, lq.cluster_queue, value, labels
                    )
        self._fair_sharing_due = now + usage.due_in(now)

    def forget(self, key: str) -> None:
        """A queue was deleted: nothing more to write, no series to keep."""
        self._written_at.pop(key, None)
        if key.startswith("cq:"):
            self._admitted.pop(key[3:], None)
            self._cohorts_changed = True  # its cohort may be gone with it
            self.ctx.metrics.forget_cluster_queue(key[3:])
        else:
            namespace, name = key[3:].split("/", 1)
            self.ctx.metrics.forget_local_queue(namespace, name)

    def run(self, now: float) -> None:
        """Once per status interval: the queues whose keys are due, written where they changed."""
        ctx = self.ctx
        if now - self._last_round < ctx.settings.status_interval:
            return
        self._last_round = now
        self._finished_by_cq = None
        counted: dict[str, Counts] = {}
        while (due := ctx.queues.status.pop()) is not None:
            if not self._write(due, now, counted):
                break
        self._report_cohorts(counted)

    def _counts(self, cq_name: str, counted: dict[str, Counts]) -> Counts:
        if cq_name not in counted:
            counted[cq_name] = Counts.of(self.ctx, cq_name)
        return counted[cq_name]

    def _finished_in(self, cq_name: str) -> int:
        """Finished Workloads of a ClusterQueue's LocalQueues (summed once per round)."""
        if self._finished_by_cq is None:
            self._finished_by_cq = self.finished.by_cluster_queue(self.ctx.state.local_queue)
        return self._finished_by_cq.get(cq_name, 0)

    def _report_cohorts(self, counted: dict[str, Counts]) -> None:
        """The cohorts above the ClusterQueues counted this round; those gone, forgotten."""
        metrics = self.ctx.metrics
        if not counted and not self._cohorts_changed:
            return
        self._cohorts_changed = False
        for report in cohort_reports(self.ctx, counted, self._admitted):
            metrics.report_cohort(report)
        names = set(self.ctx.state.cohort_names())
        for name in metrics.reported_cohorts():
            if name not in names:
                metrics.forget_cohort(name)

    def _write(self, key: str, now: float, counted: dict[str, Counts]) -> bool:
        """Write one queue's status if it changed; False when the budget says stop."""
        ctx = self.ctx
        state = ctx.state
        if key.startswith("cq:"):
            name = key[3:]
            if not state.cluster_queue_known(name):
                return True
            counts = self._counts(name, counted)
            status = cluster_queue_status(state, name, counts.pending, counts.used, counts.held)
            if ctx.settings.fair_sharing:  # Kueue writes it only with fair sharing on
                node = state.quota_node(name)
                share = weighted_share(node) if node is not None else 0
                status["fairSharing"] = {"weightedShare": share}
            resource: Resource = CLUSTER_QUEUES
            obj_key = name
            self._admitted[name] = counts.admitted
            ctx.metrics.report_cluster_queue(
                cluster_queue_report(
                    ctx,
                    name,
                    counts,
                    ctx.store.get(resource, obj_key),
                    self._finished_in(name),
                )
            )
        else:
            obj_key = key[3:]
            lq = state.local_queue(obj_key)
            if lq is None:
                return True
            counts = self._counts(lq.cluster_queue, counted)
            status = local_queue_status(
                state,
                obj_key,
                counts.pending_lq[obj_key],
                counts.admitted_lq[obj_key],
                counts.usage_lq.get(obj_key) or Counter(),
            )
            resource = LOCAL_QUEUES
            ctx.metrics.report_local_queue(
                local_queue_report(ctx, lq, counts, status, self.finished.count(obj_key)),
                labels_of(ctx.store.get(resource, obj_key)),
            )
        obj = ctx.store.get(resource, obj_key)
        if obj is None:
            return True
        if same_status((obj.get("status") or {}), status):
            return True
        budget = ctx.client.budget
        written = self._written_at.get(key)
        stale = written is None or now - written > ctx.settings.status_max_age
        # Uncontended: a second of budget (at most half the burst) stays in reserve.
        # Contended: only a stale status is written, within a 1% share of the budget.
        uncontended = ctx.spare(min(budget.qps, budget.burst / 2))
        if not uncontended and not (stale and self._share.spare(0)):
            ctx.queues.status.add_after(key, ctx.settings.status_interval)
            return False
        namespace, name = obj_key.split("/", 1) if resource.namespaced else (None, obj_key)
        body = o.conditional({"status": with_transition_times(status, obj, ctx.clock())}, obj)
        try:
            answer = ctx.write(
                resource,
                "patch-status",
                lambda: ctx.client.patch(
                    resource,
                    name,
                    body,
                    namespace,
                    subresource="status",
                    paced=not uncontended,
                ),
            )
        except ApiError as err:
            if err.not_found:
                return True
            if err.conflict:  # edited meanwhile: written again on what it is now
                ctx.refresh(resource, obj_key)
                ctx.queues.status.add_after(key, ctx.settings.status_interval)
                return True
            log.debug("%s %s status not written: %s", resource.kind, obj_key, err)
            ctx.queues.status.retry(key, err.retry_after or 0.0)
            return not err.retriable
        except KubeError as err:
            ctx.queues.status.retry(key, err.retry_after or 0.0)
            log.debug("%s %s status not written: %s", resource.kind, obj_key, err)
            return False
        answer.setdefault("kind", resource.kind)
        answer.setdefault("apiVersion", resource.api_version)
        ctx.store.record(resource, answer)
        ctx.queues.status.forget(key)
        self._written_at[key] = now
        return True


def same_status(current: Obj, wanted: Obj) -> bool:
    """Whether the status already says what is wanted (conditions compared without times)."""
    for key, value in wanted.items():
        if key == "conditions":
            have = {
                (c.get("type"), c.get("status"), c.get("reason"), c.get("message"))
                for c in current.get("conditions") or []
            }
            if any((c["type"], c["status"], c["reason"], c["message"]) not in have for c in value):
                return False
        elif current.get(key) != value:
            return False
    return True


def with_transition_times(status: Obj, obj: Obj | None, now: float) -> Obj:
    """Conditions keep their lastTransitionTime while their status does not change; those
    another controller writes (MultiKueue's quota automation) are carried over, since a
    merge patch replaces the whole list."""
    out = dict(status)
    old = {c.get("type"): c for c in ((obj or {}).get("status") or {}).get("conditions") or []}
    conditions = []
    for entry in status.get("conditions") or []:
        previous = old.get(entry["type"])
        stamp = (
            previous.get("lastTransitionTime")
            if previous and previous.get("status") == entry["status"]
            else None
        )
        conditions.append({**entry, "lastTransitionTime": stamp or o.rfc3339(now)})
    ours = {c["type"] for c in conditions}
    conditions += [c for t, c in old.items() if t not in ours]
    out["conditions"] = conditions
    return out

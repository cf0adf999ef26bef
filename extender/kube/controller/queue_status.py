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

from extender.core.api.models import FlavorResource
from extender.core.api.quantity import MILLI_RESOURCES
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError, KubeError, RequestBudget
from extender.kube.api.resources import CLUSTER_QUEUES, LOCAL_QUEUES, Resource
from extender.kube.controller.context import Context
from extender.kube.controller.status import (
    cluster_queue_status,
    cluster_queue_usage,
    local_queue_status,
)

log = logging.getLogger("tower.queue_status")

Obj = dict[str, Any]


class QueueStatusReconciler:
    """Writes the status of touched queues; feeds the per-ClusterQueue metrics."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
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
                if lq is not None:
                    namespace, name = key.split("/", 1)
                    gauge = ctx.metrics.lq_fair_sharing_usage
                    gauge.labels(name, namespace, lq.cluster_queue).set(
                        ctx.state.queues.lq_usage(key)
                    )
        self._fair_sharing_due = now + usage.due_in(now)

    def forget(self, key: str) -> None:
        """A queue was deleted: nothing more to write, no series to keep."""
        self._written_at.pop(key, None)
        if key.startswith("cq:"):
            self.ctx.metrics.forget_cluster_queue(key[3:])

    def run(self, now: float) -> None:
        """Once per status interval: the queues whose keys are due, written where they changed."""
        ctx = self.ctx
        if now - self._last_round < ctx.settings.status_interval:
            return
        self._last_round = now
        counted: dict[str, _Counts] = {}
        while (due := ctx.queues.status.pop()) is not None:
            if not self._write(due, now, counted):
                return

    def _counts(self, cq_name: str, counted: dict[str, _Counts]) -> _Counts:
        if cq_name not in counted:
            counted[cq_name] = _Counts.of(self.ctx, cq_name)
        return counted[cq_name]

    def _write(self, key: str, now: float, counted: dict[str, _Counts]) -> bool:
        """Write one queue's status if it changed; False when the budget says stop."""
        ctx = self.ctx
        state = ctx.state
        if key.startswith("cq:"):
            name = key[3:]
            if not state.cluster_queue_known(name):
                return True
            counts = self._counts(name, counted)
            status = cluster_queue_status(state, name, counts.pending, counts.used, counts.held)
            self._feed_metrics(name, counts, status)
            resource: Resource = CLUSTER_QUEUES
            obj_key = name
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

    def _feed_metrics(self, name: str, counts: _Counts, status: Obj) -> None:
        ctx = self.ctx
        metrics = ctx.metrics
        active, inadmissible = ctx.state.pending_in(name)
        metrics.pending.labels(name, "active").set(active)
        metrics.pending.labels(name, "inadmissible").set(inadmissible)
        metrics.reserving.labels(name).set(status["reservingWorkloads"])
        metrics.admitted_active.labels(name).set(status["admittedWorkloads"])
        cq = ctx.state.cluster_queue(name)
        for (flavor, resource_name), quota in cq.quotas.items() if cq is not None else ():
            scale = 1000 if resource_name in MILLI_RESOURCES else 1
            labels = (name, flavor, resource_name)
            metrics.resource_usage.labels(*labels).set(
                counts.used.get((flavor, resource_name), 0) / scale
            )
            metrics.nominal_quota.labels(*labels).set(quota.nominal / scale)


class _Counts:
    """One ClusterQueue and its LocalQueues counted in one pass over its own workloads."""

    def __init__(self) -> None:
        self.pending = 0
        self.used: Counter[FlavorResource] = Counter()
        self.held = 0
        self.pending_lq: Counter[str] = Counter()
        self.admitted_lq: Counter[str] = Counter()
        self.usage_lq: dict[str, Counter[FlavorResource]] = {}

    @classmethod
    def of(cls, ctx: Context, cq_name: str) -> _Counts:
        state = ctx.state
        counts = cls()
        for workload in state.pending_workloads_in(cq_name):
            counts.pending += 1
            counts.pending_lq[f"{workload.namespace}/{workload.queue_name}"] += 1
        counts.used, counts.held = cluster_queue_usage(state, cq_name)
        for admitted in state.admitted_in(cq_name):
            workload = admitted.workload
            lq_key = f"{workload.namespace}/{workload.queue_name}"
            counts.admitted_lq[lq_key] += 1
            counts.usage_lq.setdefault(lq_key, Counter()).update(admitted.usage)
        return counts


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
    """Conditions keep their lastTransitionTime while their status does not change."""
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
    out["conditions"] = conditions
    return out

"""The evictions the cycle and the reconcilers decided, written on their Workloads.

An eviction is one conditional status write run on the caller's thread (after the writes to
that Workload already in the pool): Evicted (and Preempted), the durable intent, with the
requeue of a Workload no job owns and the reset of its AdmissionChecks in the same write. Its
answer is known when `evict` returns, so unlike an admission none is held unsettled: after a
failure the victim keeps its quota, and the watch event says whether the write landed after all.
"""

from __future__ import annotations

import logging
from typing import Any

from extender.core.admission import checks
from extender.core.admission import pods_ready as ready_policy
from extender.core.admission.checks import check_states
from extender.core.admission.concurrent import parent_of
from extender.core.scheduling.cycle import Evict
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError, KubeError
from extender.kube.api.resources import WORKLOADS
from extender.kube.controller.context import Context
from extender.kube.controller.recording import since, subject
from extender.kube.controller.workload_status import patch_status

# The logger of admission.py, where evictions were written before: log filters keep working.
log = logging.getLogger("tower.admission")

Obj = dict[str, Any]


def metric_reason(reason: str, obj: Obj | None = None) -> tuple[str, str]:
    """(reason, underlying_cause) of an eviction as Kueue's metrics label it: a deactivation
    is Deactivated, with its cause (DeactivatedDueToAdmissionCheck: AdmissionCheck); a
    PodsReady timeout's cause is what its pods were waiting for (WaitForStart or
    WaitForRecovery, from the Workload's PodsReady condition)."""
    prefix = f"{ready_policy.DEACTIVATED}DueTo"
    if reason.startswith(prefix):
        return ready_policy.DEACTIVATED, reason[len(prefix) :]
    if reason == ready_policy.PODS_READY_TIMEOUT:
        ready = o.condition(obj or {}, o.PODS_READY) or {}
        recovering = ready.get("reason") == ready_policy.WAIT_FOR_RECOVERY
        return reason, ready_policy.WAIT_FOR_RECOVERY if recovering else ready_policy.WAIT_FOR_START
    return reason, ""


def counted_evictions(obj: Obj, reason: str, cause: str) -> tuple[list[Obj], bool]:
    """status.schedulingStats.evictions with this eviction counted (as Kueue counts them,
    per reason and underlying cause), and whether it is the first of its kind."""
    stats = (obj.get("status") or {}).get("schedulingStats") or {}
    evictions = [dict(e) for e in stats.get("evictions") or () if isinstance(e, dict)]
    for entry in evictions:
        if entry.get("reason") == reason and (entry.get("underlyingCause") or "") == cause:
            entry["count"] = int(entry.get("count") or 0) + 1
            return evictions, entry["count"] == 1
    evictions.append({"reason": reason, "underlyingCause": cause, "count": 1})
    return evictions, True


class EvictionWriter:
    """Writes evictions: the Workload's status, then its metrics, event and reconcile."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def evict(
        self,
        decision: Evict,
        *,
        paced: bool = True,
        status: Obj | None = None,
        drop: tuple[str, ...] = (),
    ) -> bool:
        """Write an eviction the cycle decided: Evicted (and Preempted), the durable intent.
        A Workload no job owns is requeued in the same write. `status` goes in the same
        write, and conditions of the types in `drop` go. False if not written (the victim
        keeps its quota, and a later cycle may choose it again)."""
        ctx = self.ctx
        state = ctx.state
        key = decision.workload.key
        obj = ctx.store.get(WORKLOADS, key)
        holder = state.admitted_workload(key)
        if obj is None or holder is None:
            return False
        now = ctx.clock()
        patch = o.evict_patch(
            obj, decision.reason, decision.preemption_reason, decision.message, now
        )
        # A group's pods stop first; a concurrent-admission variant's parent gives back first.
        if ctx.owner_of(obj) is None and not o.is_group_workload(obj) and parent_of(obj) is None:
            # The seconds it ran before are the Workload's, not the patch's: carried for the sum.
            ran = (obj.get("status") or {}).get(o.EXECUTED)
            before = {o.EXECUTED: ran} if ran is not None else {}
            requeue = o.requeue_patch(
                {"status": {**before, **patch["status"]}},
                decision.reason,
                decision.message,
                now,
                requeued=ready_policy.requeued_at_once(decision.reason),
            )
            patch["status"] = requeue["status"]
        states = check_states(obj)
        if any(c.state != checks.PENDING for c in states):
            # Every eviction puts the checks back to Pending, as Kueue's does.
            patch["status"]["admissionChecks"] = o.checks_status(
                checks.reset_after_eviction(states, now)
            )
        if drop:
            conditions = patch["status"]["conditions"]
            patch["status"]["conditions"] = [c for c in conditions if c.get("type") not in drop]
        reason, cause = metric_reason(decision.reason, obj)
        evictions, first = counted_evictions(obj, reason, cause)
        patch["status"]["schedulingStats"] = {"evictions": evictions}
        patch["status"].update(status or {})
        patch = o.conditional(patch, obj)
        try:
            patch_status(ctx, key, patch, "evict", paced=paced)
        except KubeError as err:
            state.keep(key)  # if the write landed after all, its watch event says so
            if isinstance(err, ApiError) and err.conflict:
                ctx.refresh(WORKLOADS, key)
                ctx.queues.workloads.add(key)
                return False
            if err.retriable:
                raise
            log.warning("eviction of %s not written: %s", key, err)
            return False
        cq = holder.admission.cluster_queue
        log.info("evicted %s from ClusterQueue %s: %s", key, cq, decision.message)
        ready_at = since(obj, o.PODS_READY)
        ctx.metrics.evicted(
            subject(ctx, obj, cq),
            cq,
            reason,
            cause,
            ready_for=now - ready_at if ready_at is not None else None,
            first=first,
        )
        if decision.preemption_reason:
            ctx.metrics.preempted(self._preempting(decision, cq), decision.preemption_reason)
        ctx.story(key, "Normal", decision.reason, decision.message)
        # The Workload's reconcile gives back the quota of one requeued in this write; for
        # the others, the job reconciler stops the job and then requeues it.
        ctx.queues.workloads.add(key)
        return True

    def _preempting(self, decision: Evict, victim_cq: str) -> str:
        """The ClusterQueue of the workload the victim was preempted for (its own when that
        one is gone meanwhile)."""
        state = self.ctx.state
        preemptor = state.workload(decision.preemptor) if decision.preemptor else None
        lq = state.local_queue_of(preemptor) if preemptor is not None else None
        return lq.cluster_queue if lq is not None else victim_cq

"""WaitForPodsReady in the controller: PodsReady written from the adapters, timeouts acted on.

The job reconciler hands each running admitted job here: its Workload's PodsReady condition is
set as Kueue sets it (`follow`). The Workload reconciler asks, for each admitted Workload, when
its wait runs out (`check`): then it is evicted with PodsReadyTimeout and a new requeueState
in the same write (the job reconciler stops the job and requeues it, as for any eviction), or
past backoffLimitCount marked DeactivationTarget, then `spec.active: false` (`deactivate`).
A requeued Workload waits in its queue, counted but never tried, until its requeueAt (`backoff`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from extender.core.admission import pods_ready as policy
from extender.core.admission.checks import EVICTED_BY_CHECK
from extender.core.admission.pods_ready import ReadyCondition, RequeueState
from extender.core.api.models import Workload
from extender.core.scheduling.cycle import Evict
from extender.kube.api import objects as o
from extender.kube.controller.admission import AdmissionWriter
from extender.kube.controller.context import Context
from extender.kube.controller.recording import queued_since, subject
from extender.kube.controller.workload_status import write_status, write_workload

log = logging.getLogger("tower.podsready")

Obj = dict[str, Any]
DEACTIVATION_TARGET = "DeactivationTarget"


def ready_condition(obj: Obj) -> ReadyCondition | None:
    cond = o.condition(obj, o.PODS_READY)
    if cond is None:
        return None
    return ReadyCondition(
        cond.get("status") == "True",
        str(cond.get("reason") or ""),
        o.seconds_at(cond.get("lastTransitionTime")),
    )


def requeue_state(obj: Obj) -> RequeueState | None:
    state = (obj.get("status") or {}).get("requeueState")
    if not isinstance(state, dict):
        return None
    at = state.get("requeueAt")
    count = state.get("count")
    return RequeueState(count if isinstance(count, int) else 0, o.seconds_at(at) if at else None)


def _since(obj: Obj, kind: str) -> float | None:
    cond = o.condition(obj, kind)
    if cond is None or cond.get("status") != "True":
        return None
    return o.seconds_at(cond.get("lastTransitionTime"))


class PodsReadyWatch:
    """Kueue's WaitForPodsReady for the Workloads of one term (off: every method is a no-op
    but `backoff`, which a requeueState left by an earlier run still calls for)."""

    def __init__(self, ctx: Context, admission: AdmissionWriter) -> None:
        self.ctx = ctx
        self.admission = admission
        self.config = ctx.settings.wait_for_pods_ready

    # ----- the condition -------------------------------------------------------------------

    def follow(self, wl_key: str, workload: Obj, pods_ready: bool) -> None:
        """A running job of an admitted Workload (or a group's pods): its PodsReady condition
        as Kueue writes it, once per change of status or reason."""
        if self.config is None:
            return
        ctx = self.ctx
        current = ready_condition(workload)
        want = policy.wanted_condition(o.is_true(workload, o.ADMITTED), pods_ready, current)
        if current is not None and (current.status, current.reason) == (want.status, want.reason):
            return
        now = ctx.clock()
        status = "True" if want.status else "False"
        patch = {
            "status": {
                "conditions": o.with_conditions(
                    workload, now, (o.PODS_READY, status, want.reason, want.message)
                )
            }
        }
        written = write_status(ctx, wl_key, o.conditional(patch, workload), "pods-ready")
        if written is None or want.reason != policy.STARTED:
            return
        # The first readiness since admission: Kueue's ready-wait metrics.
        admission = o.admission_of(workload)
        admitted = _since(workload, o.ADMITTED)
        if admission is None or admitted is None:
            return
        cq = admission.cluster_queue
        ctx.metrics.ready(
            subject(ctx, workload, cq), cq, now - queued_since(workload), now - admitted
        )

    # ----- timeouts ------------------------------------------------------------------------

    def check(self, key: str, obj: Obj) -> float | None:
        """An admitted Workload, neither evicted nor deactivated: the seconds until its wait
        runs out (to be looked at again then), or None once acted on or nothing to wait for."""
        config = self.config
        admitted = _since(obj, o.ADMITTED)
        if config is None or admitted is None:
            return None
        ctx = self.ctx
        now = ctx.clock()
        verdict = policy.check(config, admitted, ready_condition(obj), now)
        if verdict is None:
            return None
        if isinstance(verdict, policy.Wait):
            return verdict.after
        holder = ctx.state.admitted_workload(key)
        if holder is None or holder.evicting:
            return None
        outcome = policy.on_timeout(config.requeuing, requeue_state(obj), now, ctx.jitter())
        if isinstance(outcome, policy.Deactivate):
            log.info("Workload %s: %s", key, outcome.message)
            patch = {
                "status": {
                    "conditions": o.with_conditions(
                        obj, now, (DEACTIVATION_TARGET, "True", outcome.reason, outcome.message)
                    )
                }
            }
            write_status(ctx, key, o.conditional(patch, obj), "deactivation-target")
            return None
        state = outcome.state
        requeue = {
            "count": state.count,
            "requeueAt": o.rfc3339(state.requeue_at) if state.requeue_at is not None else None,
        }
        ctx.state.mark_evicting(key)
        decision = Evict(
            holder.workload, policy.PODS_READY_TIMEOUT, None, policy.timeout_message(key)
        )
        if not self.admission.evict(decision, status={"requeueState": requeue}):
            ctx.state.keep(key)
        return None

    def deactivate(self, key: str, obj: Obj) -> bool:
        """DeactivationTarget=True on an active Workload: `spec.active: false` (Kueue's
        step; the Workload reconciler then evicts it as any deactivated one). Whether
        written."""
        cond = o.condition(obj, DEACTIVATION_TARGET)
        if cond is None or cond.get("status") != "True":
            return False
        if (obj.get("spec") or {}).get("active") is False:
            return False
        ctx = self.ctx
        patch = o.conditional({"spec": {"active": False}}, obj)
        if write_workload(ctx, key, patch, "deactivate") is None:
            return True  # moved on (read again and reconciled) or gone
        ctx.story(key, "Warning", "WorkloadDeactivated", str(cond.get("message") or ""))
        ctx.queues.workloads.add(key)
        return True

    def queued(self, model: Workload, obj: Obj) -> Workload:
        """The model to queue: with requeuingStrategy.timestamp Eviction (Kueue's default),
        one evicted by a PodsReady timeout waits as if created when it was evicted (Kueue's
        GetQueueOrderTimestamp); with Creation, in its original place."""
        config = self.config
        if config is None or config.requeuing.timestamp != "Eviction":
            return model
        evicted = o.condition(obj, o.EVICTED)
        if evicted is None or evicted.get("status") != "True":
            return model
        if evicted.get("reason") != policy.PODS_READY_TIMEOUT:
            return model
        return replace(model, creation_time=o.seconds_at(evicted.get("lastTransitionTime")))

    # ----- the backoff ---------------------------------------------------------------------

    def reactivated(self, key: str, obj: Obj) -> bool:
        """Active again after a deactivation (someone set `spec.active: true`): Kueue's
        Requeued=True Reactivated, for every DeactivatedDueTo<cause> as well (Kueue's own code
        matches only plain Deactivated, and such a Workload stays Requeued=False). Whether
        written; the Workload then queues as any other."""
        requeued = o.condition(obj, o.REQUEUED) or {}
        if requeued.get("status") != "False":
            return False
        if not str(requeued.get("reason") or "").startswith(policy.DEACTIVATED):
            return False
        ctx = self.ctx
        change = (o.REQUEUED, "True", policy.REACTIVATED, policy.REACTIVATED_MESSAGE)
        patch = {"status": {"conditions": o.with_conditions(obj, ctx.clock(), change)}}
        if write_status(ctx, key, o.conditional(patch, obj), "reactivated") is not None:
            ctx.story(key, "Normal", policy.REACTIVATED, policy.REACTIVATED_MESSAGE)
        return True

    def backoff(self, key: str, obj: Obj) -> float:
        """A Workload with no admission: the seconds it must still wait before it may be
        queued (0: now). Once the wait is over, Kueue's Requeued=True BackoffFinished is
        written and requeueAt cleared (the count stays, for the limit)."""
        ctx = self.ctx
        state = requeue_state(obj)
        left = policy.backoff_left(state, ctx.clock())
        requeued = o.condition(obj, o.REQUEUED) or {}
        # Given back for an AdmissionCheck in Retry with no delay: nothing to wait for.
        check_retry = (
            requeued.get("status") == "False" and requeued.get("reason") == EVICTED_BY_CHECK
        )
        unset = state is None or state.requeue_at is None
        if left > 0 or (unset and not check_retry):
            return left
        changes: list[tuple[str, str, str, str]] = []
        if requeued.get("status") == "False":
            changes.append(
                (o.REQUEUED, "True", policy.BACKOFF_FINISHED, policy.BACKOFF_FINISHED_MESSAGE)
            )
        patch: Obj = {"status": {} if unset else {"requeueState": {"requeueAt": None}}}
        if changes:
            patch["status"]["conditions"] = o.with_conditions(obj, ctx.clock(), *changes)
        write_status(ctx, key, o.conditional(patch, obj), "backoff-finished")
        return 0.0

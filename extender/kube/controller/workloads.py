"""The Workload reconciler: each Workload, as the store has it now, mirrored into the core.

Everything is read from the Workload's conditions: QuotaReserved=True holds quota (an
admission seen in the API holds it in the core too, after a restart as much as after the
scheduler's own write); Evicted=True on top of it puts its job's key on the jobs' queue (the
job reconciler stops the job, then requeues the Workload); Finished=True, deletion or
deactivation frees it. A Workload whose job is gone is deleted, so its quota is free at
once. Writing the scheduler's decisions is admission.py's; starting jobs, job_start.py's;
WaitForPodsReady's timeouts and requeue backoff, pods_ready.py's; the maximum execution
time, ExecutionTimeWatch's (below).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from extender.core.admission import exec_time, multikueue_preemption
from extender.core.admission.pods_ready import deactivated as deactivation
from extender.core.api.admission_gates import (
    ADMISSION_GATED,
    GATE_CLEARED_EVENT,
    GATE_CLEARED_EVENT_MESSAGE,
    gated_by,
    gated_event_message,
    gated_message,
)
from extender.core.api.models import Admission, FlavorResource, Workload
from extender.core.api.parse import ManifestError
from extender.core.config.resource_policy import apply as apply_policy
from extender.core.jobframework import groups, reclaimable, slices
from extender.core.jobframework.workloads import workload as parse_workload
from extender.core.scheduling.cycle import INADMISSIBLE, Evict
from extender.kube.api import objects as o
from extender.kube.api.resources import WORKLOADS, Resource
from extender.kube.controller import recording
from extender.kube.controller.admission import AdmissionWriter
from extender.kube.controller.checks import CheckGate
from extender.kube.controller.concurrent.families import Families
from extender.kube.controller.context import Context
from extender.kube.controller.dra import with_claimed_devices
from extender.kube.controller.job_start import delete_object, requeue_patch
from extender.kube.controller.pending import PendingReasons
from extender.kube.controller.pods_ready import DEACTIVATION_TARGET, PodsReadyWatch
from extender.kube.controller.recording import FinishedLedger, since
from extender.kube.controller.retention import Retention
from extender.kube.controller.workload_status import write_status, write_workload

log = logging.getLogger("tower.workloads")

Obj = dict[str, Any]


class WorkloadReconciler:
    """One Workload, as it is now."""

    def __init__(
        self,
        ctx: Context,
        admission: AdmissionWriter,
        pending: PendingReasons,
        on_dropped: Callable[[str], None] = lambda key: None,
        ready: PodsReadyWatch | None = None,
        finished: FinishedLedger | None = None,
    ) -> None:
        self.ctx = ctx
        self.finished = finished or FinishedLedger()  # read by the queues' status rounds
        self.admission = admission
        self.pending = pending
        self.ready = ready or PodsReadyWatch(ctx, admission)
        self.checks = CheckGate(ctx, admission)
        self.exec_time = ExecutionTimeWatch(ctx)
        self.retention = Retention(ctx)  # objectRetentionPolicies
        self.on_dropped = on_dropped  # others' bookkeeping of a Workload that is gone
        self.concurrent = Families.of(ctx)  # Kueue's ConcurrentAdmission (None: gate off)
        self.gated_copies = ctx.settings.feature_gates.get(multikueue_preemption.GATE, False)
        self._models: dict[str, tuple[tuple[Any, ...], Workload]] = {}

    def model(self, key: str, obj: Obj) -> Workload | None:
        """The core's model of a Workload, parsed once per generation of its spec (the devices
        its pods claim are counted each time: their templates may change)."""
        meta = obj.get("metadata") or {}
        # The gates are an annotation: taking one off changes no generation.
        gates = gated_by(meta.get("annotations"))
        # So is status.reclaimablePods: a waiting Workload asks for the pods that remain.
        reclaim = self.reclaimable(obj)
        version = (
            meta.get("uid"),
            meta.get("generation") or meta.get("resourceVersion"),
            gates,
            tuple(sorted(reclaim.items())),
        )
        memo = self._models.get(key)
        if memo is not None and memo[0] == version:
            return with_claimed_devices(self.ctx, obj, memo[1])
        try:
            model = apply_policy(parse_workload(obj), self.ctx.settings.resource_policy)
        except ManifestError as err:
            if self.ctx.told.first(f"invalid:{key}", err.message):
                log.warning("Workload %s ignored: %s: %s", key, err.path, err.message)
            return None
        if reclaim:
            model = replace(model, pod_sets=reclaimable.pod_sets_after(model.pod_sets, reclaim))
        self._models[key] = (version, model)
        return with_claimed_devices(self.ctx, obj, model)

    def reclaimable(self, obj: Obj) -> dict[str, int]:
        """Its status.reclaimablePods by podSet, with Kueue's ReclaimablePods gate on."""
        if not self.ctx.settings.feature_gates.get("ReclaimablePods", True):
            return {}
        return reclaimable.from_status(obj)

    def _held(self, obj: Obj, admission: Admission) -> dict[FlavorResource, int]:
        """The quota an admission holds, less its Workload's reclaimable pods, and at the
        counts of its podSets where they are lower (an elastic job's scale-down)."""
        if self.concurrent is not None and self.concurrent.holds_nothing(obj):
            return {}  # a parent: its variant holds the quota
        reclaim = self.reclaimable(obj)
        if not reclaim and not slices.annotated(obj):
            return admission.usage()
        return reclaimable.usage_after(admission, reclaimable.pod_set_counts(obj), reclaim)

    def reconcile(self, key: str) -> float | None:
        ctx = self.ctx
        state = ctx.state
        if self.admission.is_unsettled(key):
            self.admission.settle(key)
        obj = ctx.store.get(WORKLOADS, key)
        if self.concurrent is not None:
            self.concurrent.follow(key, obj)  # its family's reconcile, if it has one
        if obj is None or o.is_true(obj, o.FINISHED):
            self._count_finished(key, obj)
            self._drop(key)
            # Kueue drops its finalizer once a Workload is finished (jobframework's
            # reconciler): a prebuilt or migrated one that carries it could not be deleted.
            if obj is not None and o.KUEUE_FINALIZER in (obj["metadata"].get("finalizers") or []):
                self._release_kueues_finalizer(key, obj)
            return None if obj is None else self.retention.finished(key, obj)
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            self._drop(key)  # being deleted: it holds no quota
            if o.KUEUE_FINALIZER in (meta.get("finalizers") or []):
                self._release_kueues_finalizer(key, obj)
            return None
        model = self.model(key, obj)
        if model is None:
            if not state.is_admitted(key):
                self._drop(key)
            return None
        if self.gated_copies:  # a worker's MultiKueue copy may preempt once its gate opens
            model = multikueue_preemption.acting_on_gate(obj, model)
        if self.concurrent is not None:
            model = self.concurrent.model(key, obj, model)  # a parent's or a variant's
            if model is None:
                return None
        owner = ctx.owner_of(obj)
        job = ctx.job_of(obj)
        group = o.is_group_workload(obj)  # followed by its pods (the group room), not one job
        if owner is None and not group and (meta.get("labels") or {}).get(o.JOB_UID_LABEL):
            self._finish_orphan(key, obj)
            return None
        if owner is not None and job is None and self._jobs_known(owner[0]):
            self._delete(key)  # its job is gone: the quota is free now, not when GC runs
            return None
        if self.ready.deactivate(key, obj):
            return None  # past its requeuing limit: deactivated first, then evicted
        deactivated = (obj.get("spec") or {}).get("active") is False
        admission = o.admission_of(obj) if o.holds_quota(obj) else None
        if admission is not None:
            if not state.is_admitted(key):
                if state.scheduler.slices.replaced_slice(key) is not None:
                    return None  # its quota is its replacement's: it is finished next
                if not state.cluster_queue_known(admission.cluster_queue):
                    if ctx.told.first(f"unknown-cq:{key}", admission.cluster_queue):
                        log.warning(
                            "Workload %s holds quota in unknown ClusterQueue %s",
                            key,
                            admission.cluster_queue,
                        )
                    return None
                # The API is the record: an admission seen there holds its quota here.
                state.assume(model, admission, ctx.clock(), self._held(obj, admission))
                ctx.touch(model.namespace, model.queue_name, admission.cluster_queue)
            elif state.reprioritize(key, model.priority):
                # A lower priority may be preempted by what its cohort set aside (Kueue's).
                ctx.touch(model.namespace, model.queue_name, admission.cluster_queue)
            elif (self.reclaimable(obj) or slices.annotated(obj)) and state.reclaim(
                key, self._held(obj, admission)
            ):
                # Its finished pods (or an elastic job's scale-down) gave quota back: the
                # next head may fit in it.
                ctx.touch(model.namespace, model.queue_name, admission.cluster_queue)
            holder = state.admitted_workload(key)
            assert holder is not None
            self.pending.forget(key)
            if state.pods_ready(key, o.is_true(obj, o.PODS_READY)):
                ctx.reschedule()  # blockAdmission lifted: the next head may be admitted
            if o.is_true(obj, o.EVICTED):
                state.mark_evicting(key)
                if group:  # its running pods are stopped first
                    ctx.queues.groups.add(key)
                elif job is None:  # nothing to stop: the quota goes back now
                    self._requeue(key, obj)
                elif owner is not None:
                    ctx.queues.jobs.add((owner[0].plural, owner[1]))
                return None
            if deactivated:
                if not holder.evicting:
                    self._evict_deactivated(key, obj, model)
                return None
            if self.checks.reconcile(key, obj, model):
                return None  # its AdmissionChecks decided: admitted, given back or rejected
            running = self.exec_time.check(key, obj, model)  # maximumExecutionTimeSeconds
            ready = self.ready.check(key, obj)  # WaitForPodsReady's timeouts
            waits = [w for w in (running, ready) if w is not None]
            return min(waits) if waits else None
        held = state.admitted_workload(key)
        if held is not None and not self.admission.is_unsettled(key):
            # It holds no quota in the API (requeued, or deactivated): nor here.
            evicted_at = since(obj, o.EVICTED)
            if evicted_at is not None:  # Kueue's eviction latency: evicted -> quota released
                reason = str((o.condition(obj, o.EVICTED) or {}).get("reason") or "")
                cq = held.admission.cluster_queue
                ctx.metrics.released_after_eviction(cq, reason, ctx.clock() - evicted_at)
            ctx.touch(model.namespace, model.queue_name, held.admission.cluster_queue)
            state.release(key)
        if deactivated:
            self._drop(key)
            return self.retention.deactivated(key, obj)
        if groups.on_hold(obj):  # its owner gave the quota back (Kueue's IsOnHold): not queued
            self._drop(key)
            return None
        if self.ready.reactivated(key, obj):
            return None  # its write brings it back, Requeued=True
        model = self.ready.queued(model, obj)
        backoff = self.ready.backoff(key, obj)
        if backoff > 0:  # requeued with a backoff: pending, but not nominated before requeueAt
            if state.workload(key) != model or not state.is_backing_off(key):
                requeue_at = ((obj.get("status") or {}).get("requeueState") or {}).get("requeueAt")
                state.back_off(model, f"waits out its requeue backoff until {requeue_at}")
                ctx.touch(model.namespace, model.queue_name)
            self.pending.forget(key)
            return backoff
        backed_off = state.is_backing_off(key)
        if (state.workload(key) != model or backed_off) and not state.is_admitted(key):
            state.add_workload(model)
            ctx.touch(model.namespace, model.queue_name)
            status = state.pending_status(key)
            if status.reason == INADMISSIBLE:
                self.pending.mark(key, status)
        self._follow_gates(key, obj, model)
        return None

    def _follow_gates(self, key: str, obj: Obj, model: Workload) -> None:
        """Kueue's admission gates: while the Workload is gated, QuotaReserved=False says
        by whom (an AdmissionGated Event once); once the last gate is off, that it waits for
        quota now (an AdmissionGateCleared Event), until a cycle says more or admits it."""
        ctx = self.ctx
        value = model.admission_gated_by
        current = o.condition(obj, o.QUOTA_RESERVED) or {}
        if value:
            ctx.told.first(f"gate-cleared:{key}", "gated")
            if (current.get("reason"), current.get("message")) == (
                ADMISSION_GATED,
                gated_message(value),
            ):
                return
            if ctx.told.first(f"pending:{key}", f"{ADMISSION_GATED} {value}"):
                ctx.event(obj, "Normal", ADMISSION_GATED, gated_event_message(value))
            ctx.queues.pending.add(key)  # the condition, written with spare budget
        elif current.get("status") == "False" and current.get("reason") == ADMISSION_GATED:
            ctx.state.queues.gate_cleared(key)
            if ctx.told.first(f"gate-cleared:{key}", "cleared"):
                ctx.event(obj, "Normal", GATE_CLEARED_EVENT, GATE_CLEARED_EVENT_MESSAGE)
            ctx.queues.pending.add(key)

    def _count_finished(self, key: str, obj: Any) -> None:
        """Kueue's finished_workloads gauges count the finished Workloads that exist, per
        LocalQueue: one is counted once seen finished, and no more once deleted."""
        if obj is None:
            lq_key = self.finished.gone(key)
        else:
            queue = getattr(obj, "queue_name", None) or (obj.get("spec") or {}).get("queueName")
            lq_key = f"{key.split('/', 1)[0]}/{queue}" if queue else None
            if lq_key is None or not self.finished.seen(key, lq_key):
                return
        if lq_key is not None:
            lq = self.ctx.state.local_queue(lq_key)
            self.ctx.touch_queues(
                local_queues=(lq_key,), cluster_queues=(lq.cluster_queue if lq else None,)
            )

    def _evict_deactivated(self, key: str, obj: Obj, model: Workload) -> None:
        """spec.active: false on an admitted Workload: evicted, with the cause its
        DeactivationTarget gave (Kueue's DeactivatedDueTo<cause>), which goes in the same
        write with its requeueState."""
        target = o.condition(obj, DEACTIVATION_TARGET) or {}
        cause = target.get("reason") if target.get("status") == "True" else None
        reason, message = deactivation(cause, target.get("message"))
        status = {"requeueState": None} if "requeueState" in (obj.get("status") or {}) else {}
        self.ctx.state.mark_evicting(key)
        self.admission.evict(
            Evict(model, reason, None, message), status=status, drop=(DEACTIVATION_TARGET,)
        )

    def _jobs_known(self, resource: Resource) -> bool:
        ctx = self.ctx
        return resource in ctx.job_resources and ctx.store.synced(resource).is_set()

    def _drop(self, key: str) -> None:
        """The Workload is gone, finished or deactivated: it neither waits nor holds quota."""
        state = self.ctx.state
        state.scheduler.slices.settled(key)  # a replaced slice, finished: for good
        self.admission.forget(key)
        self.on_dropped(key)
        self._models.pop(key, None)
        self.pending.forget(key)
        model = state.workload(key)
        if model is not None:
            held = state.admitted_workload(key)
            self.ctx.touch(
                model.namespace,
                model.queue_name,
                held.admission.cluster_queue if held is not None else None,
            )
        if model is not None or state.is_admitted(key):
            state.delete_workload(key)

    def _delete(self, key: str) -> None:
        delete_object(self.ctx, WORKLOADS, key)
        self.ctx.store.forget(WORKLOADS, key)
        self._drop(key)

    def _requeue(self, key: str, obj: Obj) -> None:
        """An evicted Workload with no job to stop: its admission is cleared at once."""
        evicted = o.condition(obj, o.EVICTED) or {}
        reason = str(evicted.get("reason") or "Preempted")
        message = str(evicted.get("message") or f"Evicted: {reason}")
        patch = o.conditional(requeue_patch(self.ctx, obj, reason, message), obj)
        if write_status(self.ctx, key, patch, "requeue") is not None:
            self.ctx.queues.workloads.add(key)

    def _release_kueues_finalizer(self, key: str, obj: Obj) -> None:
        """Kueue kept its admitted Workloads with a finalizer until it released their quota;
        after a migration from Kueue, Tower does that part, or they would never go."""
        ctx = self.ctx
        finalizers = [f for f in obj["metadata"].get("finalizers") or [] if f != o.KUEUE_FINALIZER]
        patch = o.conditional({"metadata": {"finalizers": finalizers}}, obj)
        write_workload(ctx, key, patch, "patch-finalizers")

    def _finish_orphan(self, key: str, obj: Obj) -> None:
        """Made for a job deleted with propagation Orphan: nothing will run it."""
        ctx = self.ctx
        patch = o.conditional(
            o.finish_patch(
                obj, "OwnerNotFound", "The Job of this Workload was deleted", ctx.clock()
            ),
            obj,
        )
        if write_status(ctx, key, patch, "finish") is not None:
            recording.finished(ctx, obj)
            self._drop(key)


class ExecutionTimeWatch:
    """Kueue's reconcileMaxExecutionTime: asked for each admitted Workload how long it may
    still run, the reconciler looks at it again then (its timed requeue, the controller's
    clock, as for PodsReady timeouts). Once out of time it is marked DeactivationTarget
    MaximumExecutionTimeExceeded and its past seconds cleared, as Kueue does; then, as for any
    DeactivationTarget, `spec.active: false` and the eviction follow."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def check(self, key: str, obj: Obj, model: Workload) -> float | None:
        """An admitted Workload, neither evicted nor deactivated: the seconds it may still
        run (to be looked at again then), or None with no limit, or once out of time."""
        admitted = o.condition(obj, o.ADMITTED) or {}
        if admitted.get("status") != "True":
            return None
        past = (obj.get("status") or {}).get(o.EXECUTED)
        ctx = self.ctx
        now = ctx.clock()
        left = exec_time.time_left(
            model.max_execution_seconds,
            past if isinstance(past, int) else None,
            o.seconds_at(admitted.get("lastTransitionTime")),
            now,
        )
        if left is None:
            return None
        if left > 0:
            return left
        if o.is_true(obj, DEACTIVATION_TARGET):
            return None  # marked already: its deactivation follows
        change = (DEACTIVATION_TARGET, "True", exec_time.EXCEEDED, exec_time.EXCEEDED_MESSAGE)
        status: Obj = {"conditions": o.with_conditions(obj, now, change)}
        if past is not None:
            status[o.EXECUTED] = None  # Kueue clears it with the mark
        patch = o.conditional({"status": status}, obj)
        if write_status(ctx, key, patch, "deactivation-target") is not None:
            limit = model.max_execution_seconds
            log.info("Workload %s: the maximum execution time (%ss) exceeded", key, limit)
            message = f"The maximum execution time ({limit}s) exceeded"
            ctx.story(key, "Warning", exec_time.EXCEEDED, message)
        return None

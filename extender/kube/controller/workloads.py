"""The Workload lifecycle: mirror each Workload into the core, write the scheduler's
admissions and evictions, start an admitted Job, and stop, then requeue, an evicted one.

Everything is read from the Workload's conditions as the store has them now:
QuotaReserved=True holds quota; Evicted=True on top of it means stop the Job, and once it has
no active pods, requeue (clear the admission); Finished=True frees the quota. The one side
table is `unsettled`: admission writes whose outcome is unknown (the connection dropped, or
the server answered 500/504), which keep their quota until a repeat of the same conditional
write, or a read, says what happened.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from extender.core.cycle import INADMISSIBLE, Admit, Evict, PendingStatus
from extender.core.models import PLACEMENT_ANNOTATION, Workload
from extender.core.parse import ManifestError
from extender.core.placement import Plan
from extender.core.workloads import creation_seconds
from extender.core.workloads import workload as parse_workload
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError, KubeError, RequestBudget
from extender.kube.api.placement import annotation
from extender.kube.api.resources import JOBSETS, WORKLOADS
from extender.kube.api.trim import JobView
from extender.kube.controller.context import Context
from extender.kube.controller.jobs import stop_job

log = logging.getLogger("tower.workloads")

Obj = dict[str, Any]
NODE_FAILURES = "NodeFailures"  # Kueue's Evicted reason when the nodes of a placement fail


class WorkloadReconciler:
    """One Workload, as it is now; and the writes of the scheduler's decisions."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.unsettled: dict[str, Obj] = {}  # key -> the admission patch, outcome unknown
        # key -> (when the webhook kept its Job suspended, how long until the next try)
        self.start_refused: dict[str, tuple[float, float]] = {}
        self._models: dict[str, tuple[tuple[Any, ...], Workload]] = {}
        self._pending_budget = RequestBudget(
            ctx.settings.pending_status_qps, 10, clock=ctx.monotonic
        )

    # ----- reading --------------------------------------------------------------------

    def model(self, key: str, obj: Obj) -> Workload | None:
        """The core's model of a Workload, parsed once per generation of its spec."""
        meta = obj.get("metadata") or {}
        version = (meta.get("uid"), meta.get("generation") or meta.get("resourceVersion"))
        memo = self._models.get(key)
        if memo is not None and memo[0] == version:
            return memo[1]
        try:
            model = parse_workload(obj)
        except ManifestError as err:
            if self.ctx.told.first(f"invalid:{key}", err.message):
                log.warning("Workload %s ignored: %s: %s", key, err.path, err.message)
            return None
        self._models[key] = (version, model)
        return model

    # ----- reconcile -------------------------------------------------------------------

    def reconcile(self, key: str) -> float | None:
        ctx = self.ctx
        state = ctx.state
        if key in self.unsettled:
            self._settle(key)
        obj = ctx.store.get(WORKLOADS, key)
        if obj is None or o.is_true(obj, o.FINISHED):
            self._drop(key)
            return None
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            self._drop(key)  # being deleted: it holds no quota
            if o.KUEUE_FINALIZER in (meta.get("finalizers") or []):
                self._release_kueues_finalizer(key, obj)
            return None
        model = self.model(key, obj)
        if model is None:
            if key not in state.admitted:
                self._drop(key)
            return None
        owner = ctx.owner_of(obj)
        job = ctx.job_of(obj)
        if owner is None and (obj["metadata"].get("labels") or {}).get(o.JOB_UID_LABEL):
            self._finish_orphan(key, obj)
            return None
        if owner is not None and job is None and self._jobs_known(owner[0]):
            self._delete(key)  # its Job is gone: the quota is free now, not when GC runs
            return None
        deactivated = (obj.get("spec") or {}).get("active") is False
        admission = o.admission_of(obj) if o.is_true(obj, o.QUOTA_RESERVED) else None
        if admission is not None:
            if key not in state.admitted:
                if admission.cluster_queue not in state.tree.cluster_queues:
                    if ctx.told.first(f"unknown-cq:{key}", admission.cluster_queue):
                        log.warning(
                            "Workload %s holds quota in unknown ClusterQueue %s",
                            key,
                            admission.cluster_queue,
                        )
                    return None
                # The API is the record: an admission seen there holds its quota here.
                state.assume(model, admission, ctx.clock())
                ctx.touch(model.namespace, model.queue_name, admission.cluster_queue)
            holder = state.admitted[key]
            self._forget_pending(key)
            if o.is_true(obj, o.EVICTED):
                holder.evicting = True
                self._evicting(key, obj, job, deactivated)
                return None
            if deactivated:
                if not holder.evicting:
                    holder.evicting = True
                    self.evict(Evict(model, "Deactivated", None, "The workload is deactivated"))
                return None
            if job is not None and job.suspended and o.is_true(obj, o.ADMITTED):
                return self._start(key, obj, admission, model, job)
            return None
        if key in state.admitted and key not in self.unsettled:
            # It holds no quota in the API (requeued, or deactivated): nor here.
            held = state.admitted[key]
            ctx.touch(model.namespace, model.queue_name, held.admission.cluster_queue)
            state.release(key)
        if deactivated:
            self._drop(key)
            return None
        if state.workloads.get(key) != model and key not in state.admitted:
            state.add_workload(model)
            ctx.touch(model.namespace, model.queue_name)
            status = state.pending_status(key)
            if status.reason == INADMISSIBLE:
                self.mark_pending(key, status)
        return None

    def _jobs_known(self, resource: Any) -> bool:
        ctx = self.ctx
        return resource in ctx.job_resources and ctx.store.synced(resource).is_set()

    def _drop(self, key: str) -> None:
        """The Workload is gone, finished or deactivated: it neither waits nor holds quota."""
        state = self.ctx.state
        self.unsettled.pop(key, None)
        self.start_refused.pop(key, None)
        self._models.pop(key, None)
        self._forget_pending(key)
        model = state.workloads.get(key)
        if model is not None:
            held = state.admitted.get(key)
            self.ctx.touch(
                model.namespace,
                model.queue_name,
                held.admission.cluster_queue if held is not None else None,
            )
        if model is not None or key in state.admitted:
            state.delete_workload(key)

    def _delete(self, key: str) -> None:
        ctx = self.ctx
        namespace, name = key.split("/", 1)
        try:
            ctx.write(WORKLOADS, "delete", lambda: ctx.client.delete(WORKLOADS, name, namespace))
        except ApiError as err:
            if not err.not_found:
                raise
        ctx.store.forget(WORKLOADS, key)
        self._drop(key)

    def _release_kueues_finalizer(self, key: str, obj: Obj) -> None:
        """Kueue kept its admitted Workloads with a finalizer until it released their quota;
        after a migration from Kueue, Tower does that part, or they would never go."""
        ctx = self.ctx
        finalizers = [f for f in obj["metadata"].get("finalizers") or [] if f != o.KUEUE_FINALIZER]
        patch = o.conditional({"metadata": {"finalizers": finalizers}}, obj)
        namespace, name = key.split("/", 1)
        try:
            answer = ctx.write(
                WORKLOADS,
                "patch-finalizers",
                lambda: ctx.client.patch(WORKLOADS, name, patch, namespace),
            )
        except ApiError as err:
            if err.conflict:
                ctx.refresh(WORKLOADS, key)
                ctx.queues.workloads.add(key)
                return
            if err.not_found:
                ctx.store.forget(WORKLOADS, key)
                return
            raise
        ctx.store.record(WORKLOADS, answer)

    def _finish_orphan(self, key: str, obj: Obj) -> None:
        """Made for a Job deleted with propagation Orphan: nothing will run it."""
        ctx = self.ctx
        patch = o.conditional(
            o.finish_patch(
                obj, "OwnerNotFound", "The Job of this Workload was deleted", ctx.clock()
            ),
            obj,
        )
        if self._write_status(key, patch, "finish") is not None:
            self._drop(key)

    # ----- starting and stopping the Job -----------------------------------------------

    def _start(
        self, key: str, obj: Obj, admission: Any, model: Workload, job: JobView
    ) -> float | None:
        """Start the admitted Job: the one place a Job is unsuspended."""
        ctx = self.ctx
        refused = self.start_refused.get(key)
        if refused is not None:
            wait = refused[0] + refused[1] - ctx.monotonic()
            if wait > 0:
                return wait
        if job.started:
            # Suspended with its startTime still set (stopped by someone else): the API
            # refuses the template change until the startTime is cleared through /status.
            job = stop_job(ctx, job, None)
        planned = ctx.placement is not None and ctx.placement.plan_of(key) is not None
        patch = o.conditional(  # started as decided, or 409
            o.start_patch(
                job.as_object(),
                admission,
                ctx.state.flavors,
                model.queue_name,
                workload=model.name if planned else None,
                scheduler_name=ctx.settings.scheduler_name if planned else None,
            ),
            job.as_object(),
        )
        resource = job.resource
        try:
            answer = ctx.write(
                resource,
                "patch",
                lambda: ctx.client.patch(resource, job.name, patch, job.namespace),
            )
        except ApiError as err:
            if err.conflict:
                ctx.refresh(resource, job.key)
                return 0.0  # decide again on the version just read
            raise
        started = ctx.store.record(resource, answer)
        if isinstance(started, JobView) and started.suspended:
            return self._start_kept_suspended(key, started)
        self.start_refused.pop(key, None)
        self._say_why_not_running(key, None)  # it runs now: an earlier explanation goes
        ctx.event(
            started.as_object() if isinstance(started, JobView) else job.as_object(),
            "Normal",
            "Started",
            f"Admitted by clusterQueue {admission.cluster_queue}",
        )
        return None

    def _start_kept_suspended(self, key: str, job: JobView) -> float:
        """The API server answered the start with the Job still suspended: an admission
        webhook kept it so (Tower's guard lets only the controller's own identity unsuspend).
        Said once, loudly; tried again only after a long wait, never in a loop."""
        ctx = self.ctx
        settings = ctx.settings
        previous = self.start_refused.get(key)
        first = previous is None
        wait = (
            settings.start_refused_retry
            if previous is None
            else min(settings.start_refused_retry_cap, previous[1] * 2)
        )
        self.start_refused[key] = (ctx.monotonic(), wait)
        ctx.metrics.start_refused.inc()
        if first:
            who = ctx.username or "this controller's username"
            message = (
                f"the admission webhook kept {job.kind} {job.key} suspended although its "
                f"Workload is admitted: start the webhook with --controller-username {who} "
                f"(the identity this controller runs as); Tower tries again in {wait:.0f}s"
            )
            if ctx.told.first("start-refused", "logged"):
                log.error("%s", message)
            else:
                log.warning("%s", message)
            ctx.story(key, "Warning", "JobStartRefused", message)
            self._say_why_not_running(key, message)
        return wait

    def _say_why_not_running(self, key: str, message: str | None) -> None:
        """Admitted, but its Job does not run: said on the Workload as Kueue's PodsReady=False
        (reason WaitForStart) says it, so `kubectl describe workload` does not mislead;
        removed (message None) once the Job starts."""
        ctx = self.ctx
        obj = ctx.store.get(WORKLOADS, key)
        if obj is None:
            return
        if message is None:
            if o.condition(obj, o.PODS_READY) is None:
                return
            conditions = [
                c
                for c in (obj.get("status") or {}).get("conditions") or []
                if c.get("type") != o.PODS_READY
            ]
            patch: Obj = {"status": {"conditions": conditions}}
        else:
            patch = {
                "status": {
                    "conditions": o.with_conditions(
                        obj, ctx.clock(), (o.PODS_READY, "False", "WaitForStart", message)
                    )
                }
            }
        try:
            self._write_status(key, o.conditional(patch, obj), "pods-ready")
        except KubeError as err:  # said in the log and Events already; best effort
            log.debug("Workload %s: PodsReady not written: %s", key, err)

    def _evicting(self, key: str, obj: Obj, job: JobView | None, deactivated: bool) -> None:
        """Evicted=True: stop the Job; once it has no active pods, give the quota back."""
        ctx = self.ctx
        if job is not None:
            if (
                not job.suspended
                or job.started
                or job.cluster_queue
                or (job.kind == JOBSETS.kind and job.active)
            ):
                job = stop_job(ctx, job, obj)
            if job.active:
                return None  # its pods are stopping; the Job's next change brings us back
        evicted = o.condition(obj, o.EVICTED) or {}
        reason = str(evicted.get("reason") or "Preempted")
        message = str(evicted.get("message") or f"Evicted: {reason}")
        patch = o.conditional(o.requeue_patch(obj, reason, message, ctx.clock()), obj)
        if self._write_status(key, patch, "requeue") is None:
            return None
        self._requeued(key, deactivated)
        return None

    def _requeued(self, key: str, deactivated: bool) -> None:
        ctx = self.ctx
        state = ctx.state
        held = state.admitted.get(key)
        model = state.workloads.get(key)
        if model is not None:
            ctx.touch(
                model.namespace,
                model.queue_name,
                held.admission.cluster_queue if held is not None else None,
            )
        if deactivated:
            self._drop(key)  # not queued again
        elif held is not None:
            state.release(key)
        ctx.dirty = True

    # ----- the scheduler's decisions ----------------------------------------------------

    def admit(self, decision: Admit) -> bool:
        """Write an admission the cycle assumed. True when written. On a failure that
        certainly left the Workload unchanged the assumption is undone; on an ambiguous one
        the quota stays held until settled. Retriable failures are re-raised (the caller
        backs off), after that bookkeeping."""
        ctx = self.ctx
        state = ctx.state
        key = decision.workload.key
        obj = ctx.store.get(WORKLOADS, key)
        if obj is None:
            state.forget(key)
            return False
        now = ctx.clock()
        namespace, name = key.split("/", 1)
        plan = ctx.placement.plan_of(key) if ctx.placement is not None else None
        if plan is not None and plan.pod_sets:
            try:
                obj = self._write_plan(key, obj, plan)
            except KubeError as err:
                # Nothing holds quota yet: whatever happened to the annotation is harmless.
                return self._not_admitted(decision, err, "placement")
        patch = o.conditional(o.admit_patch(obj, decision.admission, now), obj)
        try:
            answer = ctx.write(
                WORKLOADS,
                "status-admit",
                lambda: ctx.client.patch(WORKLOADS, name, patch, namespace, subresource="status"),
            )
        except KubeError as err:
            if err.ambiguous:
                log.warning("admission of %s: %s; the quota stays held until settled", key, err)
                self.unsettled[key] = patch
                ctx.queues.workloads.retry(key, err.retry_after or 0.0)
                raise
            return self._not_admitted(decision, err, "admission")
        self._admitted(key, obj, answer, decision, now)
        return True

    def _not_admitted(self, decision: Admit, err: KubeError, what: str) -> bool:
        """A write of an admission certainly failed: the quota it held is free again, and the
        Workload is read again on a conflict. Retriable failures are re-raised."""
        ctx = self.ctx
        key = decision.workload.key
        ctx.state.forget(key)
        ctx.touch(decision.workload.namespace, decision.workload.queue_name)
        if isinstance(err, ApiError) and err.conflict:
            ctx.refresh(WORKLOADS, key)
            ctx.queues.workloads.add(key)
            return False
        if isinstance(err, ApiError) and err.not_found:
            ctx.store.forget(WORKLOADS, key)
            return False
        if err.retriable:
            raise err
        log.warning("%s of %s not written: %s", what, key, err)
        return False

    def _write_plan(self, key: str, obj: Obj, plan: Plan) -> Obj:
        """Record the plan on the Workload (so every replica's extender enforces it), on the
        version decided on; the answer is the version the admission is then written on."""
        ctx = self.ctx
        namespace, name = key.split("/", 1)
        annotations = {PLACEMENT_ANNOTATION: annotation(plan)}
        patch = o.conditional({"metadata": {"annotations": annotations}}, obj)
        answer = ctx.write(
            WORKLOADS, "placement", lambda: ctx.client.patch(WORKLOADS, name, patch, namespace)
        )
        answer.setdefault("kind", WORKLOADS.kind)
        answer.setdefault("apiVersion", WORKLOADS.api_version)
        ctx.store.record(WORKLOADS, answer)
        return answer

    def replan(self, key: str) -> None:
        """A node of an admitted workload's plan died or was cordoned: place its pods again,
        keeping those where they are; when no node has room, evict it (it is requeued and
        admitted again once a plan exists)."""
        ctx = self.ctx
        holder = ctx.state.admitted.get(key)
        placement = ctx.placement
        obj = ctx.store.get(WORKLOADS, key)
        if holder is None or holder.evicting or placement is None or not isinstance(obj, dict):
            return
        old = placement.plan_of(key)
        if old is None:
            return
        plan = placement.replan(holder.workload, holder.admission, old)
        if isinstance(plan, Plan):
            if plan == old:
                return
            try:
                self._write_plan(key, obj, plan)
            except KubeError as err:
                log.warning("new placement of %s not written (%s); trying again", key, err)
                placement.disturb(key)
                return
            log.info("placement of %s redone: %s", key, annotation(plan))
            ctx.story(key, "Normal", "Replanned", f"Pods placed again: {annotation(plan)}")
            return
        holder.evicting = True
        message = f"A node of its placement failed, and no other node has room: {plan}"
        if not self.evict(Evict(holder.workload, NODE_FAILURES, None, message)):
            holder.evicting = False
            placement.disturb(key)

    def _admitted(self, key: str, obj: Obj, answer: Obj, decision: Admit, now: float) -> None:
        ctx = self.ctx
        answer.setdefault("kind", WORKLOADS.kind)
        answer.setdefault("apiVersion", WORKLOADS.api_version)
        recorded = ctx.store.record(WORKLOADS, answer)
        cq = decision.admission.cluster_queue
        log.info("admitted %s in ClusterQueue %s", key, cq)
        ctx.metrics.admitted_total.labels(cq).inc()
        created = creation_seconds((obj.get("metadata") or {}).get("creationTimestamp"))
        ctx.metrics.wait_time.labels(cq).observe(max(0.0, now - created))
        ctx.touch(decision.workload.namespace, decision.workload.queue_name, cq)
        self._forget_pending(key)
        ctx.story(key, "Normal", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}")
        ctx.story(key, "Normal", "Admitted", f"Admitted by ClusterQueue {cq}")
        job = ctx.job_of(recorded)
        if job is not None and job.suspended:
            try:
                after = self._start(key, recorded, decision.admission, decision.workload, job)
                if after is not None:
                    ctx.queues.workloads.add_after(key, after)
            except KubeError as err:
                if isinstance(err, ApiError) and not err.retriable:
                    log.warning("%s %s not started yet: %s", job.kind, job.key, err)
                ctx.queues.workloads.retry(key, err.retry_after or 0.0)

    def _settle(self, key: str) -> None:
        """An admission write whose outcome is unknown: repeat it, conditional on the same
        version. Either it lands now (and the first never can), or the version moved on (409)
        and a read shows whether that was the first write landing."""
        ctx = self.ctx
        patch = self.unsettled[key]
        namespace, name = key.split("/", 1)
        try:
            answer = ctx.write(
                WORKLOADS,
                "status-admit",
                lambda: ctx.client.patch(WORKLOADS, name, patch, namespace, subresource="status"),
            )
        except ApiError as err:
            if err.conflict:
                ctx.refresh(WORKLOADS, key)  # reconcile then follows what the read shows
            elif err.not_found:
                ctx.store.forget(WORKLOADS, key)
            else:
                raise
        else:
            answer.setdefault("kind", WORKLOADS.kind)
            answer.setdefault("apiVersion", WORKLOADS.api_version)
            ctx.store.record(WORKLOADS, answer)
        del self.unsettled[key]
        log.info("admission of %s settled", key)

    def evict(self, decision: Evict, *, paced: bool = True) -> bool:
        """Write an eviction the cycle decided: Evicted (and Preempted), the durable intent.
        A Workload no Job owns is requeued in the same write. False if not written (the
        victim keeps its quota, and a later cycle may choose it again)."""
        ctx = self.ctx
        state = ctx.state
        key = decision.workload.key
        obj = ctx.store.get(WORKLOADS, key)
        holder = state.admitted.get(key)
        if obj is None or holder is None:
            return False
        now = ctx.clock()
        patch = o.evict_patch(
            obj, decision.reason, decision.preemption_reason, decision.message, now
        )
        bare = ctx.owner_of(obj) is None
        if bare:
            requeue = o.requeue_patch(
                {"status": patch["status"]}, decision.reason, decision.message, now
            )
            patch["status"] = requeue["status"]
        patch = o.conditional(patch, obj)
        namespace, name = key.split("/", 1)
        try:
            answer = ctx.write(
                WORKLOADS,
                "status-evict",
                lambda: ctx.client.patch(
                    WORKLOADS, name, patch, namespace, subresource="status", paced=paced
                ),
            )
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
        answer.setdefault("kind", WORKLOADS.kind)
        answer.setdefault("apiVersion", WORKLOADS.api_version)
        ctx.store.record(WORKLOADS, answer)
        cq = holder.admission.cluster_queue
        log.info("evicted %s from ClusterQueue %s: %s", key, cq, decision.message)
        ctx.metrics.evicted_total.labels(cq, decision.reason).inc()
        if decision.preemption_reason:
            ctx.metrics.preempted_total.labels(cq, decision.preemption_reason).inc()
        ctx.story(key, "Normal", decision.reason, decision.message)
        if bare:
            self._requeued(key, (obj.get("spec") or {}).get("active") is False)
        else:
            ctx.queues.workloads.add(key)  # the reconcile stops its Job, then requeues it
        return True

    # ----- status writes ---------------------------------------------------------------

    def _write_status(self, key: str, patch: Obj, purpose: str) -> Obj | None:
        """A conditional status patch; None when the Workload moved on (it is read again and
        reconciled) or is gone. Other failures are raised for a retry."""
        ctx = self.ctx
        namespace, name = key.split("/", 1)
        try:
            answer = ctx.write(
                WORKLOADS,
                f"status-{purpose}",
                lambda: ctx.client.patch(WORKLOADS, name, patch, namespace, subresource="status"),
            )
        except ApiError as err:
            if err.conflict:
                ctx.refresh(WORKLOADS, key)
                ctx.queues.workloads.add(key)
                return None
            if err.not_found:
                ctx.store.forget(WORKLOADS, key)
                return None
            raise
        answer.setdefault("kind", WORKLOADS.kind)
        answer.setdefault("apiVersion", WORKLOADS.api_version)
        recorded: Obj = ctx.store.record(WORKLOADS, answer)
        return recorded

    def mark_pending(self, key: str, status: PendingStatus) -> None:
        """A pending workload's reason: told in an Event when it changes (Events have their own
        budget), written to QuotaReserved=False with spare budget only."""
        ctx = self.ctx
        if ctx.told.first(f"pending:{key}", status.reason):
            ctx.story(key, "Normal", "Pending", status.message)
        obj = ctx.store.get(WORKLOADS, key)
        if obj is not None and not self._shows(obj, status):
            ctx.queues.pending.add(key)

    @staticmethod
    def _shows(obj: Obj, status: PendingStatus) -> bool:
        current = o.condition(obj, o.QUOTA_RESERVED)
        return current is not None and (current.get("reason"), current.get("message")) == (
            status.reason,
            status.message,
        )

    def _forget_pending(self, key: str) -> None:
        self.ctx.told.forget(f"pending:{key}")

    def flush_pending(self) -> None:
        """QuotaReserved=False messages: only with spare budget, so admissions never wait."""
        ctx = self.ctx
        budget = ctx.client.budget
        queue = ctx.queues.pending
        while (key := queue.pop()) is not None:
            obj = ctx.store.get(WORKLOADS, key)
            if obj is None or key in ctx.state.admitted or key not in ctx.state.workloads:
                continue
            status = ctx.state.pending_status(key)
            if self._shows(obj, status):
                continue
            if not self._pending_budget.spare(0):
                queue.add_after(key, 1.0 / ctx.settings.pending_status_qps)
                return
            if not budget.spare(min(budget.qps, budget.burst / 2)):
                self._pending_budget.give_back()
                queue.add_after(key, 1.0 / budget.qps)
                return
            patch = o.conditional(
                o.pending_patch(obj, status.reason, status.message, ctx.clock()), obj
            )
            try:
                answer = ctx.write(
                    WORKLOADS,
                    "status-pending",
                    partial(
                        ctx.client.patch,
                        WORKLOADS,
                        key.split("/", 1)[1],
                        patch,
                        key.split("/", 1)[0],
                        subresource="status",
                        paced=False,
                    ),
                )
            except ApiError as err:
                if err.conflict:
                    ctx.refresh(WORKLOADS, key)
                    queue.add(key)
                elif err.retriable:
                    queue.retry(key, err.retry_after or 0.0)
                    return
                continue
            except KubeError as err:
                if err.retriable:
                    queue.retry(key, err.retry_after or 0.0)
                    return
                raise
            answer.setdefault("kind", WORKLOADS.kind)
            answer.setdefault("apiVersion", WORKLOADS.api_version)
            ctx.store.record(WORKLOADS, answer)
            queue.forget(key)

"""Starting and stopping a job of any kind: the one place a job is unsuspended, and the
stop that puts back what the start changed. Each kind's adapter says how.

A start is one conditional patch on the version the store has: unsuspended, its pods placed
on the admitted flavors; it is sent in the write pool ahead of other writes, and its answer
is taken in on the loop's thread. A stop suspends, clears what the job's own controller counts as
started, and restores the pod templates the Workload recorded; each step is skipped when
already done, and a conflict reads the job again and is raised, for a retry on what it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from extender.core.admission import pods_ready as ready_policy
from extender.core.admission.checks import FAILED_TO_START, UpdateConflictError, check_states
from extender.core.admission.multikueue import CONTROLLER as MULTIKUEUE
from extender.core.api.models import Admission
from extender.core.jobframework.pod import ADMISSION_GATE
from extender.core.jobframework.workloads import creation_seconds
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError, KubeError
from extender.kube.api.resources import WORKLOADS, Resource
from extender.kube.api.trim import JobView
from extender.kube.api.writes import START
from extender.kube.controller import recording
from extender.kube.controller.context import Context
from extender.kube.controller.workload_status import write_status

log = logging.getLogger("tower.jobs")

Obj = dict[str, Any]


def stop_job(ctx: Context, job: JobView, workload: Obj | None) -> JobView:
    """Suspend a job, clear what its controller counts as started (so its template may
    change) and put back the pod templates its Workload recorded."""
    adapter = job.adapter
    current = job
    if not adapter.can_suspend:
        return delete_job(ctx, job)
    if not current.suspended:
        current = patch_job(ctx, current, adapter.suspend_patch(True))
    if current.started:
        current = patch_job(ctx, current, adapter.unstart_patch(), subresource="status")
    if workload is not None and current.cluster_queue:  # started by Tower, not yet restored
        current = patch_job(ctx, current, o.restore_patch(current.as_object(), workload))
    return current


def delete_object(ctx: Context, resource: Resource, key: str) -> None:
    """Delete one object, after the writes to it on their way; one already gone is fine."""
    namespace, name = key.split("/", 1)
    try:
        ctx.write(resource, "delete", lambda: ctx.client.delete(resource, name, namespace), key)
    except ApiError as err:
        if not err.not_found:
            raise


def delete_job(ctx: Context, job: JobView) -> JobView:
    """Stop a job that cannot be suspended (a pod) by deleting it, unless it is still gated
    or has ended; it stays active, holding its quota, until its containers have stopped."""
    if job.suspended or job.finished is not None:
        return job
    delete_object(ctx, job.resource, job.key)
    ctx.event(job.as_object(), "Normal", "Stopped", "Deleted by Tower: its Workload was evicted")
    return job


def patch_job(ctx: Context, job: JobView, patch: Obj, subresource: str = "") -> JobView:
    """One conditional patch of a job; a conflict reads it again and is raised."""
    resource = job.resource
    body = o.conditional(patch, job.as_object())
    verb = "patch-status" if subresource else "patch"
    try:
        answer = ctx.write(
            resource,
            verb,
            lambda: ctx.client.patch(
                resource, job.name, body, job.namespace, subresource=subresource
            ),
            job.key,
        )
    except ApiError as err:
        if err.conflict:
            ctx.refresh(resource, job.key)
        raise
    current = ctx.store.record(resource, answer)
    # None: the job was deleted once the patch was answered (its reconcile sees it gone).
    return current if isinstance(current, JobView) else job


class JobStarter:
    """Starts admitted jobs, stops evicted ones and then gives their quota back."""

    def __init__(
        self, ctx: Context, admitted_at: Callable[[str], float | None] = lambda key: None
    ) -> None:
        self.ctx = ctx
        self.admitted_at = admitted_at  # when a Workload's admission was answered (wall time)
        # Workload key -> (when the webhook kept its job suspended, how long until the next try)
        self.start_refused: dict[str, tuple[float, float]] = {}

    def forget(self, wl_key: str) -> None:
        self.start_refused.pop(wl_key, None)

    def start(self, wl_key: str, workload: Obj, admission: Admission, job: JobView) -> float | None:
        """Start the admitted job; the seconds until it should be looked at again, if any."""
        ctx = self.ctx
        refused = self.start_refused.get(wl_key)
        if refused is not None:
            wait = refused[0] + refused[1] - ctx.monotonic()
            if wait > 0:
                return wait
        if job.started:
            # Suspended with its start still counted (stopped by someone else): the API
            # refuses the template change until that is cleared through /status.
            job = stop_job(ctx, job, None)
        planned = ctx.placement is not None and ctx.placement.plan_of(wl_key) is not None
        meta = workload.get("metadata") or {}
        queue_name = str((workload.get("spec") or {}).get("queueName") or "")
        try:
            start = o.start_patch(
                job.as_object(),
                admission,
                ctx.state.resource_flavors(),
                queue_name,
                workload=str(meta.get("name")) if planned or o.topology_placed(admission) else None,
                scheduler_name=ctx.settings.scheduler_name if planned else None,
                checks=check_states(workload),
            )
        except UpdateConflictError as err:
            self._failed_to_start(wl_key, workload, str(err))
            return None
        patch = o.conditional(start, job.as_object())  # started as decided, or 409
        resource = job.resource
        ref = (resource.plural, job.key)

        def answered(answer: Obj | None, err: BaseException | None) -> None:
            if err is None:
                assert answer is not None
                self._started(wl_key, job, admission, answer)
                return
            if isinstance(err, ApiError) and err.conflict:
                ctx.refresh(resource, job.key)
                ctx.queues.jobs.add(ref)  # decide again on the version just read
                return
            ctx.retry_after_failure(ctx.queues.jobs, ref, err, f"start of {job.kind} {job.key}")

        ctx.submit(
            resource,
            "patch",
            job.key,
            lambda: ctx.client.patch(resource, job.name, patch, job.namespace),
            answered,
            priority=START,
        )
        return None

    def _failed_to_start(self, wl_key: str, workload: Obj, message: str) -> None:
        """Its AdmissionChecks' podSetUpdates cannot all hold: the Workload finishes with
        Kueue's FailedToStart (trying again could not help), and its quota is free."""
        ctx = self.ctx
        log.warning("Workload %s cannot start: %s", wl_key, message)
        patch = o.finish_patch(workload, FAILED_TO_START, message, ctx.clock())
        if write_status(ctx, wl_key, o.conditional(patch, workload), "finish") is not None:
            recording.finished(ctx, workload)
            ctx.story(wl_key, "Warning", FAILED_TO_START, message)
            ctx.queues.workloads.add(wl_key)

    def _started(self, wl_key: str, job: JobView, admission: Admission, answer: Obj) -> None:
        """The start was answered: the job runs, or a webhook kept it suspended."""
        ctx = self.ctx
        created = creation_seconds((answer.get("metadata") or {}).get("creationTimestamp"))
        started = ctx.store.record(job.resource, answer)
        if isinstance(started, JobView) and started.suspended:
            wait = self._kept_suspended(wl_key, started)
            ctx.queues.jobs.add_after((job.resource.plural, job.key), wait)
            return
        cq = admission.cluster_queue
        now = ctx.clock()
        ctx.metrics.start_wait_time.labels(cq).observe(max(0.0, now - created))
        admitted = self.admitted_at(wl_key)
        if admitted is not None:
            ctx.metrics.admitted_until_start.labels(cq).observe(max(0.0, now - admitted))
        if job.kind == "Pod":  # its start took its scheduling gate off
            workload = ctx.store.get(WORKLOADS, wl_key)
            recording.gate_removed(ctx, workload, ADMISSION_GATE, is_group=False)
        self.start_refused.pop(wl_key, None)
        self._say_why_not_running(wl_key, None)  # it runs now: an earlier explanation goes
        ctx.event(
            started.as_object() if isinstance(started, JobView) else job.as_object(),
            "Normal",
            "Started",
            f"Admitted by clusterQueue {cq}",
        )

    def _kept_suspended(self, wl_key: str, job: JobView) -> float:
        """The API server answered the start with the job still suspended: an admission
        webhook kept it so (Tower's guard lets only the controller's own identity unsuspend).
        Said once, loudly; tried again only after a long wait, never in a loop."""
        ctx = self.ctx
        settings = ctx.settings
        previous = self.start_refused.get(wl_key)
        first = previous is None
        wait = (
            settings.start_refused_retry
            if previous is None
            else min(settings.start_refused_retry_cap, previous[1] * 2)
        )
        self.start_refused[wl_key] = (ctx.monotonic(), wait)
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
            ctx.story(wl_key, "Warning", "JobStartRefused", message)
            self._say_why_not_running(wl_key, message)
        return wait

    def _say_why_not_running(self, wl_key: str, message: str | None) -> None:
        """Admitted, but its job does not run: said on the Workload as Kueue's PodsReady=False
        (reason WaitForStart) says it, so `kubectl describe workload` does not mislead;
        removed (message None) once the job starts."""
        ctx = self.ctx
        obj = ctx.store.get(WORKLOADS, wl_key)
        if obj is None:
            return
        if message is None:
            current = o.condition(obj, o.PODS_READY)
            if current is None:
                return
            if ctx.settings.wait_for_pods_ready is not None:
                # WaitForPodsReady keeps the condition: Kueue's own words again, if not yet.
                if current.get("message") == ready_policy.NOT_READY_MESSAGE or (
                    current.get("reason") != ready_policy.WAIT_FOR_START
                ):
                    return
                message = ready_policy.NOT_READY_MESSAGE
        if message is None:
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
            write_status(ctx, wl_key, o.conditional(patch, obj), "pods-ready")
        except KubeError as err:  # said in the log and Events already; best effort
            log.debug("Workload %s: PodsReady not written: %s", wl_key, err)

    def stop_evicted(self, wl_key: str, workload: Obj, job: JobView | None) -> None:
        """Evicted=True: stop the job; once it has no active pods, requeue the Workload (its
        admission cleared). The Workload's reconcile then gives the quota back."""
        ctx = self.ctx
        if job is not None:
            if not job.suspended or job.started or job.cluster_queue:
                job = stop_job(ctx, job, workload)
            # A job MultiKueue runs has no pods here: its active count is its worker's,
            # copied, and may never be copied again (a worker lost); its copies there are
            # removed once the quota here is given back.
            if job.active and job.managed_by != MULTIKUEUE:
                return  # its pods are stopping; the job's next change brings us back
        evicted = o.condition(workload, o.EVICTED) or {}
        reason = str(evicted.get("reason") or "Preempted")
        message = str(evicted.get("message") or f"Evicted: {reason}")
        patch = o.conditional(requeue_patch(ctx, workload, reason, message), workload)
        if write_status(ctx, wl_key, patch, "requeue") is not None:
            ctx.queues.workloads.add(wl_key)


def requeue_patch(ctx: Context, workload: Obj, reason: str, message: str) -> Obj:
    """The requeue of an evicted Workload. After a PodsReady timeout it is Requeued=False
    until its backoff is over, and (with WaitForPodsReady) PodsReady is back to WaitForStart,
    as Kueue has them."""
    extra: list[tuple[str, str, str, str]] = []
    current = o.condition(workload, o.PODS_READY)
    if ctx.settings.wait_for_pods_ready is not None and current is not None:
        extra.append(
            (o.PODS_READY, "False", ready_policy.WAIT_FOR_START, ready_policy.NOT_READY_MESSAGE)
        )
    return o.requeue_patch(
        workload,
        reason,
        message,
        ctx.clock(),
        *extra,
        requeued=ready_policy.requeued_at_once(reason),
    )

"""The generic job reconciler: one job of any managed kind ⇄ its Workload.

`reconcile(ref)` reads the job as the store has it now, never remembered events, and does
what its adapter and its Workload call for: create the Workload, record that the job
finished, suspend a queued job that runs without an admission (the backstop for a webhook
that was down), start it once admitted and stop it once evicted (job_start.py).
"""

from __future__ import annotations

import logging
from typing import Any

from extender.core.api.models import PREBUILT_WORKLOAD_LABEL
from extender.core.api.parse import ManifestError
from extender.core.jobframework import reclaimable
from extender.core.jobframework.adapter import MissingReferenceError, Reference
from extender.core.jobframework.jobs import resolve_priority, workload_for
from extender.core.jobframework.workloads import creation_seconds
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError
from extender.kube.api.resources import WORKLOADS, Resource, resource_of_reference
from extender.kube.api.trim import JobView, job_view, workload_key
from extender.kube.api.writes import CREATE
from extender.kube.controller import recording, resized
from extender.kube.controller.context import Context, Ref
from extender.kube.controller.job_start import JobStarter, patch_job, stop_job
from extender.kube.controller.pods_ready import PodsReadyWatch
from extender.kube.controller.priority import (
    follow_admission_gates,
    follow_exec_limit,
    follow_priority_class,
    gates_differ,
)
from extender.kube.controller.priority_defaulting import with_default_class
from extender.kube.controller.queue_follow import follow_queue_name
from extender.kube.controller.slices import ElasticJobs
from extender.kube.controller.workload_status import patch_status, record, write_status

log = logging.getLogger("tower.jobs")

Obj = dict[str, Any]
CREATE_WAIT = 5.0  # a created Workload the watch has not shown yet is looked for again
PREBUILT_WAIT = 2.0  # a job's prebuilt Workload that is not there is looked for again


def _m(value: Any) -> Any:
    return value if isinstance(value, dict) else {}


REFERENCE_WAIT = 5.0  # a job whose runtime does not exist yet is looked at again


def read_reference(ctx: Context, ref: Reference) -> Obj | None:
    """An object a job refers to, read from the API server (None when it does not exist)."""
    try:
        found: Obj = ctx.client.get(resource_of_reference(ref), ref.name, ref.namespace)
    except ApiError as err:
        if err.not_found:
            return None
        raise
    return found


def holds_quota(workload: Obj | None) -> bool:
    return o.holds_quota(workload)


def finish_workload(ctx: Context, wl_key: str, workload: Obj, reason: str, message: str) -> None:
    """The job finished: Finished on its Workload; the quota is free once that is written
    (until then the API still shows it held, and so does the core)."""
    patch = o.conditional(o.finish_patch(workload, reason, message, ctx.clock()), workload)
    try:
        patch_status(ctx, wl_key, patch, "finish")
    except ApiError as err:
        if err.conflict:
            ctx.refresh(WORKLOADS, wl_key)  # the retry patches the version it reads
        raise
    recording.finished(ctx, workload)
    if ctx.state.workload(wl_key) is not None or ctx.state.is_admitted(wl_key):
        model = ctx.state.workload(wl_key)
        if model is not None:
            held = ctx.state.admitted_workload(wl_key)
            ctx.touch(
                model.namespace,
                model.queue_name,
                held.admission.cluster_queue if held is not None else None,
            )
        ctx.state.finish(wl_key)
    ctx.story(wl_key, "Normal", "Finished", f"Workload finished: {message}")


def reclaimable_change(
    ctx: Context, found: reclaimable.Reclaimable | None, workload: Obj
) -> reclaimable.Reclaimable | None:
    """Kueue's ReclaimablePods: a job's (or group's) finished pods, capped at its Workload's
    podSets, when they are not what its status.reclaimablePods says (else None)."""
    if (
        found is None
        or not ctx.settings.feature_gates.get("ReclaimablePods", True)
        or o.is_true(workload, o.FINISHED)
    ):
        return None
    wanted = reclaimable.limited(found, reclaimable.pod_set_counts(workload))
    return None if reclaimable.same(wanted, reclaimable.from_status(workload)) else wanted


def write_reclaimable(
    ctx: Context, wl_key: str, workload: Obj, wanted: reclaimable.Reclaimable
) -> Obj | None:
    """status.reclaimablePods written (the Workload as written; None if it moved on), and
    the Workload reconciled, so the core counts what the pods gave back."""
    patch = {"status": {"reclaimablePods": reclaimable.status_value(wanted)}}
    written = write_status(ctx, wl_key, o.conditional(patch, workload), "reclaimable")
    if written is not None:
        ctx.queues.workloads.add(wl_key)
    return written


class JobReconciler:
    """One job, as it is now, following its Workload."""

    def __init__(
        self, ctx: Context, starter: JobStarter, ready: PodsReadyWatch | None = None
    ) -> None:
        self.ctx = ctx
        self.starter = starter
        self.ready = ready
        self.resources = {r.plural: r for r in ctx.job_resources}
        self.created = 0  # Workloads sent for creation since the loop last looked
        self.elastic = ElasticJobs(ctx)  # Kueue's elastic jobs: Workload slices
        self._creating: dict[str, float] = {}  # Workload key -> when its create was sent

    def priority(self, job: JobView) -> int:
        """The priority a job's Workload will have (new Workloads are created highest first)."""
        pod_class = None
        if job.source is not None:
            value = job.adapter.pod_priority_class(job.source)
            pod_class = value if isinstance(value, str) else None
        try:
            return resolve_priority(
                job.labels,
                pod_class,
                self.ctx.state.workload_priority_classes(),
                self.ctx.state.priority_classes(),
            )[0]
        except ManifestError:
            return 0

    def needs_attention(self, job: JobView) -> bool:
        """Whether reconciling this job could do anything (the rebuild skips the others): it
        is queued and its Workload is missing; it finished while its Workload did not; it
        runs without quota; or its Workload is admitted while it waits, or evicted."""
        if job.queue_name is None or job.is_child:
            return False
        if job.holds and job.finished is not None:
            return True  # Kueue's finalizer is still to come off
        workload = self.ctx.store.get(WORKLOADS, workload_key(job))
        if workload is None:
            return self.ctx.manages_namespace(job.namespace)
        if job.finished is not None:
            return not o.is_true(workload, o.FINISHED)
        if job.prebuilt is None and gates_differ(job, workload):
            return True  # a gate came off while no controller looked
        if holds_quota(workload):
            return (
                o.is_true(workload, o.EVICTED)
                or (job.suspended and o.is_true(workload, o.ADMITTED))
                or self._readiness_changed(job, workload)
                or self._reclaimable(job, workload) is not None
            )
        return not job.suspended or job.started

    def _reclaimable(self, job: JobView, workload: Obj) -> reclaimable.Reclaimable | None:
        return reclaimable_change(self.ctx, job.reclaimable, workload)

    def _readiness_changed(self, job: JobView, workload: Obj) -> bool:
        """WaitForPodsReady is on and a running job's readiness is not what its Workload
        says (it changed while no controller looked)."""
        if self.ready is None or self.ready.config is None or job.suspended:
            return False
        return o.is_true(workload, o.PODS_READY) != job.pods_ready

    def reconcile(self, ref: Ref) -> float | None:
        ctx = self.ctx
        resource = self.resources[ref[0]]
        job = ctx.store.get(resource, ref[1])
        if job is None:
            self._gone(resource, ref[1])
            return None
        assert isinstance(job, JobView)
        if job.queue_name is None or job.is_child:
            return None  # not queued (a JobSet's child Jobs are queued as the JobSet)
        elastic = self.elastic.applies(job)
        if elastic:  # its slices made, updated or finished first; it follows one of them
            found = self.elastic.follow(job)
            if not isinstance(found, tuple):
                return found
            wl_key, workload, elastic = found
        else:
            wl_key = workload_key(job)
            workload = ctx.store.get(WORKLOADS, wl_key)
        if workload is None and not ctx.manages_namespace(job.namespace):
            # Outside managedJobsNamespaceSelector the job is not Tower's, label or not (as
            # in Kueue); one whose Workload exists is followed to its end all the same.
            return None
        log.debug(
            "reconcile %s %s rv=%s suspended=%s finished=%s workload=%s",
            job.kind,
            job.key,
            job.resource_version,
            job.suspended,
            job.finished,
            None if workload is None else workload["metadata"].get("resourceVersion"),
        )
        if job.finished is not None:
            if workload is not None and not o.is_true(workload, o.FINISHED):
                self._finish(wl_key, workload, *job.finished)
            if job.holds:  # its end is counted: Kueue's finalizer comes off (a pod's)
                patch_job(ctx, job, job.adapter.release_patch(job.as_object()))
            return None
        if not job.suspended and not job.adapter.can_suspend:
            return self._ungated(job, wl_key, workload)
        if job.deleting:
            return None  # as Kueue's reconciler: a job being deleted is only finalized
        if not job.suspended and not holds_quota(workload):
            # The backstop: the webhook was down or bypassed when this Job was created.
            log.info("%s %s runs without an admission: suspending it", job.kind, job.key)
            job = patch_job(ctx, job, job.adapter.suspend_patch(True))
            ctx.event(
                job.as_object(),
                "Warning",
                "Suspended",
                "Suspended by Tower: the Job was not admitted by its queue yet",
            )
        if job.started and not holds_quota(workload):
            job = stop_job(ctx, job, workload)  # finish stopping it (its start is cleared)
        if workload is None:
            if job.prebuilt is not None:
                return self._await_prebuilt(job, wl_key)
            return self._create(resource, job, wl_key)
        if job.prebuilt is not None and self.ctx.owner_of(workload) is None:
            return self._adopt(job, wl_key, workload)
        self._creating.pop(wl_key, None)
        if job.prebuilt is None:
            workload = follow_queue_name(ctx, job, wl_key, workload)
            follow_priority_class(ctx, job, wl_key, workload)
            follow_admission_gates(ctx, job, wl_key, workload)
            follow_exec_limit(ctx, job, wl_key, workload)
        wanted = self._reclaimable(job, workload)
        if wanted is not None:
            written = write_reclaimable(ctx, wl_key, workload, wanted)
            if written is None:
                return 0.0  # it moved meanwhile: looked at again
            workload = written
        if job.source is not None:
            ctx.store.put(resource, job.key, job.without_source())  # the template is recorded
        if resized.drifted(job, workload) and job.prebuilt is None and not elastic:
            if holds_quota(workload):
                return resized.stop_and_requeue(ctx, job, wl_key, workload)
            if job.suspended:
                return resized.update_pending(ctx, job, wl_key, workload)
        wait = self._follow(wl_key, workload, job)
        if elastic and not job.suspended:  # its pods let through as far as its slice grants
            more = self.elastic.ungate(job, workload)
            wait = more if wait is None else wait if more is None else min(wait, more)
        return wait

    def _ungated(self, job: JobView, wl_key: str, workload: Obj | None) -> float | None:
        """A job that cannot be suspended (a pod) runs: followed while its Workload holds
        quota; stopped (deleted) once it does not; never queued when it started without one
        (created while the webhook was down, it can never be gated again)."""
        ctx = self.ctx
        if workload is None:
            message = (
                f"{job.kind} {job.key} runs without an admission: it was created while Tower's "
                "webhook was down or bypassed, and a pod cannot be gated once created, so "
                "Tower leaves it alone (delete it to queue it again)"
            )
            if ctx.told.first(f"ungated:{job.uid}", message):
                log.warning("%s", message)
                ctx.event(job.as_object(), "Warning", "NotQueued", message)
            return None
        if job.source is not None:
            ctx.store.put(job.resource, job.key, job.without_source())
        if not holds_quota(workload):
            stop_job(ctx, job, workload)  # evicted while it ran: it is deleted
            return None
        return self._follow(wl_key, workload, job)

    def _follow(self, wl_key: str, workload: Obj, job: JobView) -> float | None:
        """The job follows its Workload: started once admitted, stopped once evicted. Only
        once the core holds the admission too (the Workload's reconcile comes first)."""
        if not holds_quota(workload) or not self.ctx.state.is_admitted(wl_key):
            return None
        if self.ctx.busy(WORKLOADS.plural, wl_key):
            # Its admission's answer is on its way (the watch was quicker): the job follows
            # once it is taken in, so the admission is counted and told before the start.
            ref = (job.resource.plural, job.key)
            self.ctx.after_writes(WORKLOADS.plural, wl_key, lambda: self.ctx.queues.jobs.add(ref))
            return None
        if o.is_true(workload, o.EVICTED):
            self.starter.stop_evicted(wl_key, workload, job)
            return None
        if (workload.get("spec") or {}).get("active") is False:
            return None  # being deactivated: its eviction is written first
        if job.suspended and o.is_true(workload, o.ADMITTED):
            if job.adapter.gated_on_manager and self.ctx.runs_on_worker(workload):
                return None  # MultiKueue runs it on a worker: this one stays gated
            admission = o.admission_of(workload)
            if admission is not None:
                return self.starter.start(wl_key, workload, admission, job)
        elif not job.suspended and self.ready is not None:
            self.ready.follow(wl_key, workload, job.pods_ready)  # as its adapter reads it
        return None

    def _await_prebuilt(self, job: JobView, wl_key: str) -> float:
        """A job that names a prebuilt Workload not there (yet): no other is made for it
        (Kueue's prebuilt workloads); it is looked at again shortly."""
        message = (
            f"{job.kind} {job.key} names the prebuilt Workload {wl_key} "
            f"({PREBUILT_WORKLOAD_LABEL}), which does not exist yet: it waits for it"
        )
        if self.ctx.told.first(f"prebuilt:{job.uid}", message):
            log.info("%s", message)
            self.ctx.event(job.as_object(), "Normal", "WaitingForPrebuiltWorkload", message)
        return PREBUILT_WAIT

    def _adopt(self, job: JobView, wl_key: str, workload: Obj) -> float | None:
        """The job takes its prebuilt Workload as its own, as Kueue's reconciler does: the
        Workload gets the job as its controller and the job-uid label, so its changes reach
        the job from now on."""
        ctx = self.ctx
        meta = workload.get("metadata") or {}
        owners = [dict(owner) for owner in meta.get("ownerReferences") or ()]
        owners.append(
            {
                "apiVersion": job.adapter.api_version,
                "kind": job.kind,
                "name": job.name,
                "uid": job.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        )
        patch = {"metadata": {"ownerReferences": owners, "labels": {o.JOB_UID_LABEL: job.uid}}}
        namespace, name = wl_key.split("/", 1)
        body = o.conditional(patch, workload)
        try:
            answer = ctx.write(
                WORKLOADS,
                "patch",
                lambda: ctx.client.patch(WORKLOADS, name, body, namespace),
                wl_key,
            )
        except ApiError as err:
            if err.conflict:
                ctx.refresh(WORKLOADS, wl_key)
                return 0.0
            raise
        record(ctx, answer)
        ctx.event(job.as_object(), "Normal", "AdoptedWorkload", f"Adopted Workload: {wl_key}")
        ctx.queues.workloads.add(wl_key)
        return 0.0

    def _gone(self, resource: Resource, key: str) -> None:
        """A deleted Job's Workloads are deleted now, so its quota is free at once (and a Job
        deleted with propagation Orphan leaves none behind)."""
        ctx = self.ctx
        for wl_key in ctx.store.by_index(WORKLOADS, "owner", f"{resource.kind}/{key}"):
            ctx.queues.workloads.add(wl_key)

    def _finish(self, wl_key: str, workload: Obj, reason: str, message: str) -> None:
        finish_workload(self.ctx, wl_key, workload, reason, message)

    def _create(self, resource: Resource, job: JobView, wl_key: str) -> float | None:
        ctx = self.ctx
        sent = self._creating.get(wl_key)
        if sent is not None and ctx.monotonic() - sent < CREATE_WAIT:
            return CREATE_WAIT  # its watch event is on the way
        if job.source is None:
            # The template was dropped when a Workload existed; that Workload was deleted.
            namespace, name = job.key.split("/", 1)
            fresh = ctx.client.get(resource, name, namespace)
            fresh.setdefault("kind", resource.kind)
            ctx.store.record(resource, fresh)
            # Read here with its template: the cache keeps the version it has (the same one,
            # when only the Workload changed) as it was, without it.
            view = job_view(fresh, keep_source=True, adapter=job.adapter)
            if view is None or view.source is None:
                return None
            job = view
        assert job.source is not None
        source = {**job.source, "kind": job.kind, "apiVersion": job.adapter.api_version}
        try:
            # The objects its podSets are read from (a TrainJob's runtime), read now: a job
            # that refers to one not there yet waits, and is looked at again.
            references = job.adapter.references(source)
            source = job.adapter.resolved(
                source, {ref: read_reference(ctx, ref) for ref in references}
            )
            source = with_default_class(ctx, resource, source)
            model = workload_for(
                source,
                adapter=job.adapter,
                uid=job.uid,
                creation_time=creation_seconds(
                    (source.get("metadata") or {}).get("creationTimestamp")
                ),
                workload_priority_classes=ctx.state.workload_priority_classes(),
                priority_classes=ctx.state.priority_classes(),
            )
        except ManifestError as err:
            missing = isinstance(err, MissingReferenceError)
            if ctx.told.first(f"invalid:{job.uid}", err.message):
                log.warning(
                    "%s %s cannot be queued: %s: %s", job.kind, job.key, err.path, err.message
                )
                reason = "ReferenceMissing" if missing else "InvalidSpec"
                ctx.event(job.as_object(), "Warning", reason, f"{err.path}: {err.message}")
            return REFERENCE_WAIT if missing else None
        settings = ctx.settings
        body = o.workload_manifest(
            source, model, settings.label_keys_to_copy, settings.annotations_to_copy
        )
        self._creating[wl_key] = ctx.monotonic()
        self.created += 1
        job_meta = source.get("metadata") or {}
        # Kueue times only a job's first generation (one created as it is).
        timed = (job_meta.get("generation") or 0) <= 1

        def answered(created: Obj | None, err: BaseException | None) -> None:
            if err is None:
                assert created is not None
                if timed:
                    made = o.seconds_at((created.get("metadata") or {}).get("creationTimestamp"))
                    ctx.metrics.workload_created(job.kind, made - model.creation_time, created)
                self._created(resource, job, wl_key, created)
                return
            if isinstance(err, ApiError) and err.already_exists:
                ctx.refresh(WORKLOADS, wl_key)
                ctx.queues.workloads.add(wl_key)
                return
            self._creating.pop(wl_key, None)
            if isinstance(err, ApiError) and err.namespace_terminating:
                # Retrying cannot succeed, and every update of the dying job would start the
                # backoff over: said once, then left to the namespace's deletion.
                if ctx.told.first(f"terminating:{job.uid}", "terminating"):
                    log.info("%s %s gets no Workload: %s", job.kind, job.key, err.message)
                return
            ctx.retry_after_failure(
                ctx.queues.creations,
                (resource.plural, job.key),
                err,
                f"Workload for {job.kind} {job.key}",
            )

        ctx.submit(
            WORKLOADS,
            "create",
            wl_key,
            lambda: ctx.client.create(WORKLOADS, body, model.namespace),
            answered,
            priority=CREATE,
        )
        return None

    def _created(self, resource: Resource, job: JobView, wl_key: str, created: Obj) -> None:
        """The Workload was created: the store keeps it, and the job no longer needs its
        template (the version the store has now: it may have moved on meanwhile)."""
        ctx = self.ctx
        record(ctx, created)
        current = ctx.store.get(resource, job.key)
        if isinstance(current, JobView) and current.source is not None:
            ctx.store.put(resource, job.key, current.without_source())
        ctx.queues.workloads.add(wl_key)
        ctx.event(job.as_object(), "Normal", "CreatedWorkload", f"Created Workload: {wl_key}")

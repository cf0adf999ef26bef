"""A job that no longer matches its Workload: stopped and queued again as it now is.

Kueue's generic reconciler compares a job with its Workload (EquivalentToWorkload). A job
patched while it runs (its parallelism, a JobSet's replicas, a worker group's template) would
otherwise run more pods than its admission holds. As Kueue does:
- while it holds quota, the job is stopped (NoMatchingWorkload), its Workload deleted once
  its pods are gone (the quota stays held until then, so nothing else is admitted into room
  its pods still use), and a new Workload made from the job as it now is, queued afresh;
- while it waits, its Workload's podSets are updated in place (it keeps its place in line).
Each step says which podSet changed and how, on the job's Events.
"""

from __future__ import annotations

import logging
from typing import Any

from extender.core.api.parse import ManifestError
from extender.core.jobframework import match
from extender.core.jobframework.jobs import workload_for
from extender.core.jobframework.workloads import creation_seconds
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError
from extender.kube.api.resources import WORKLOADS
from extender.kube.api.trim import JobView
from extender.kube.controller.context import Context
from extender.kube.controller.job_start import delete_object, patch_job, stop_job
from extender.kube.controller.workload_status import write_workload

log = logging.getLogger("tower.jobs")

Obj = dict[str, Any]

# Kueue's words (jobframework/reconciler.go): the Stopped event, and the Workload's deletion.
STOPPED = "No matching Workload; restoring pod templates according to existent Workload"
ADVICE = "suspend a job before you change its size, or mark it elastic"
STOP_WAIT = 1.0  # seconds between looks at a stopped job whose pods are still going


def drifted(job: JobView, workload: Obj) -> bool:
    """The job's podSets (names, counts, resources) are none its Workload accounts for."""
    return job.shape_key is not None and job.shape_key not in match.workload_keys(workload)


def _difference(ctx: Context, job: JobView, workload: Obj) -> str:
    """Where they differ, from the job as the API server has it now (this is rare: the
    cache keeps only the shapes' key)."""
    namespace, name = job.key.split("/", 1)
    try:
        fresh = ctx.client.get(job.resource, name, namespace)
        shapes = match.job_shapes(job.adapter.pod_sets(fresh))
    except (ApiError, ManifestError):
        return "its podSets changed"
    declared = match.workload_shapes(workload)
    return match.difference(shapes, declared, match.admitted_counts(workload)) or (
        "its podSets changed"
    )


def stop_and_requeue(ctx: Context, job: JobView, wl_key: str, workload: Obj) -> float | None:
    """A job whose Workload holds quota: stopped; once its pods are gone, its Workload is
    deleted and a new one made (the job reconciler creates it, seeing none)."""
    if not job.suspended or job.cluster_queue:
        # Running, or suspended in the very write that changed it (Tower's webhook does so,
        # and no pod beyond the admission started): said once per Workload, then stopped.
        uid = str((workload.get("metadata") or {}).get("uid") or wl_key)
        if ctx.told.first(f"resized:{uid}", "stopped"):
            what = _difference(ctx, job, workload)
            message = (
                f"{job.kind} {job.key}: {what}: stopped and queued again as it now is ({ADVICE})"
            )
            log.info("%s", message)
            ctx.event(job.as_object(), "Warning", "PodSetsChanged", message)
            ctx.event(job.as_object(), "Normal", "Stopped", STOPPED)
        if not job.suspended:
            job = patch_job(ctx, job, job.adapter.suspend_patch(True))
        job = stop_job(ctx, job, workload)  # its start cleared, its templates put back
    elif job.started:
        job = stop_job(ctx, job, workload)  # finish stopping it (its start is cleared)
    if job.active:
        return STOP_WAIT  # its quota stays held until its pods have stopped
    delete_object(ctx, WORKLOADS, wl_key)
    ctx.store.forget(WORKLOADS, wl_key)
    ctx.queues.workloads.add(wl_key)  # the core forgets it: its quota is free now
    ctx.event(
        job.as_object(), "Normal", "DeletedWorkload", f"Deleted not matching Workload: {wl_key}"
    )
    return 0.0


def update_pending(ctx: Context, job: JobView, wl_key: str, workload: Obj) -> float | None:
    """A job whose Workload waits (no quota): the Workload's podSets are made the job's, in
    place, so it keeps its place in line (Kueue's update of a suspended job's Workload)."""
    namespace, name = job.key.split("/", 1)
    try:
        fresh = ctx.client.get(job.resource, name, namespace)
        fresh.setdefault("kind", job.kind)
        fresh.setdefault("apiVersion", job.adapter.api_version)
        model = workload_for(
            fresh,
            adapter=job.adapter,
            uid=job.uid,
            creation_time=creation_seconds((fresh.get("metadata") or {}).get("creationTimestamp")),
            workload_priority_classes=ctx.state.workload_priority_classes(),
            priority_classes=ctx.state.priority_classes(),
        )
    except ManifestError:
        return None  # the webhook and the job's creation path say what is wrong with it
    pod_sets = o.workload_manifest(fresh, model)["spec"]["podSets"]
    patch = o.conditional({"spec": {"podSets": pod_sets}}, workload)
    if write_workload(ctx, wl_key, patch, "patch-podsets") is None:
        return 0.0  # it moved meanwhile: looked at again
    ctx.queues.workloads.add(wl_key)
    ctx.event(
        job.as_object(),
        "Normal",
        "UpdatedWorkload",
        f"Updated not matching Workload for suspended job: {wl_key}",
    )
    return None

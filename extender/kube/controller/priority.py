"""What a queued job's metadata says, followed into its Workload as Kueue follows it."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from extender.core.api.admission_gates import (
    ADMISSION_GATED_BY,
    gated_by,
    propagated_event_message,
)
from extender.core.api.models import PRIORITY_CLASS_LABEL
from extender.core.api.parse import ManifestError
from extender.core.jobframework.jobs import resolve_priority
from extender.kube.api import objects as o
from extender.kube.api.trim import JobView
from extender.kube.controller.context import Context
from extender.kube.controller.workload_status import write_workload

log = logging.getLogger("tower.jobs")

Obj = dict[str, Any]
_WPC = "WorkloadPriorityClass"


def follow_priority_class(ctx: Context, job: JobView, wl_key: str, workload: Obj) -> None:
    """Kueue's UpdateWorkloadPriority: a job whose kueue.x-k8s.io/priority-class label names
    another class than its Workload's gets the class and its value written into the Workload
    (queued, it moves in line; admitted, preemption sees the new value). A Workload whose
    priority came from a pod PriorityClass does not follow the label, and one that holds
    quota with no class cannot be given one (the API refuses it)."""
    pod_class = None
    if job.source is not None:
        value = job.adapter.pod_priority_class(job.source)
        pod_class = value if isinstance(value, str) else None
    follow_priority_label(
        ctx, job.labels, pod_class, job.as_object(), f"{job.kind} {job.key}", wl_key, workload
    )


def follow_priority_label(
    ctx: Context,
    labels: Mapping[str, str],
    pod_class: str | None,
    owner: Obj,
    who: str,
    wl_key: str,
    workload: Obj,
) -> Obj | None:
    """follow_priority_class for any object that declares the Workload (a LeaderWorkerSet's
    group too): its labels, its pods' PriorityClass, the object the Event is about. The
    Workload as it is now (written or not); None if it moved meanwhile."""
    spec = workload.get("spec") or {}
    ref = spec.get("priorityClassRef") or None
    wanted = str(labels.get(PRIORITY_CLASS_LABEL) or "")
    if ref is not None and ref.get("kind") != _WPC:
        return workload
    if ref is None and o.is_true(workload, o.QUOTA_RESERVED):
        return workload
    if str((ref or {}).get("name") or "") == wanted:
        return workload
    try:
        value, name, source = resolve_priority(
            labels,
            pod_class,
            ctx.state.workload_priority_classes(),
            ctx.state.priority_classes(),
        )
    except ManifestError:
        return workload  # the class is not there (yet): the create path says so in an Event
    new_ref = o.priority_class_ref(name, source)
    if new_ref == ref and spec.get("priority") == value:
        return workload
    patch = o.conditional({"spec": {"priorityClassRef": new_ref, "priority": value}}, workload)
    written = write_workload(ctx, wl_key, patch, "priority")
    if written is None:
        return None
    log.info("%s: Workload %s now has priority class %r (%d)", who, wl_key, name, value)
    ctx.event(owner, "Normal", "UpdatedWorkload", f"Updated workload priority class: {wl_key}")
    return written


def gates_differ(job: JobView, workload: Obj) -> bool:
    """Whether the job's kueue.x-k8s.io/admission-gated-by is not its Workload's."""
    if not isinstance(workload, dict):
        return False  # a finished Workload, as the cache keeps it: nothing to follow
    meta = workload.get("metadata") or {}
    return gated_by(meta.get("annotations")) != job.admission_gated_by


def follow_admission_gates(ctx: Context, job: JobView, wl_key: str, workload: Obj) -> None:
    """Kueue's UpdateAdmissionGatedBy: the job's annotation, as it is now, is its Workload's
    (a gate taken off the job comes off the Workload, which may then be admitted); an
    UpdatedWorkload Event on the job says so."""
    if not gates_differ(job, workload):
        return
    value = job.admission_gated_by
    patch = o.conditional(
        {"metadata": {"annotations": {ADMISSION_GATED_BY: value or None}}}, workload
    )
    if write_workload(ctx, wl_key, patch, "admission-gates") is None:
        return
    log.info("%s %s: Workload %s now gated by %r", job.kind, job.key, wl_key, value)
    ctx.event(job.as_object(), "Normal", "UpdatedWorkload", propagated_event_message(value))


def follow_exec_limit(ctx: Context, job: JobView, wl_key: str, workload: Obj) -> None:
    """A suspended job whose kueue.x-k8s.io/max-exec-time-seconds is not its Workload's
    spec.maximumExecutionTimeSeconds: the Workload gets the job's, while it holds no quota
    (the webhook refuses the change on a running job, and the API on an admitted Workload).
    Kueue makes a new Workload for it; Tower's keeps its place in line."""
    if not isinstance(workload, dict) or not job.suspended:
        return
    if o.is_true(workload, o.QUOTA_RESERVED):
        return
    current = (workload.get("spec") or {}).get("maximumExecutionTimeSeconds")
    if current == job.max_exec_seconds:
        return
    spec = {"maximumExecutionTimeSeconds": job.max_exec_seconds}
    if write_workload(ctx, wl_key, o.conditional({"spec": spec}, workload), "exec-limit") is None:
        return
    log.info("%s %s: Workload %s now has maximumExecutionTimeSeconds %s", job.kind, job.key,
             wl_key, job.max_exec_seconds)  # fmt: skip
    ctx.event(
        job.as_object(),
        "Normal",
        "UpdatedWorkload",
        f"Updated workload maximum execution time: {wl_key}",
    )

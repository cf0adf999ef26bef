"""A waiting job's queue-name label followed into its Workload (Kueue's QueueNameChange).

A job moved to another LocalQueue before admission is queued there."""

from __future__ import annotations

import logging
from typing import Any

from extender.kube.api import objects as o
from extender.kube.api.trim import JobView
from extender.kube.controller.context import Context
from extender.kube.controller.workload_status import write_workload

log = logging.getLogger("tower.jobs")

Obj = dict[str, Any]


def follow_queue_name(ctx: Context, job: JobView, wl_key: str, workload: Obj) -> Obj:
    """The Workload with the job's queue-name as its spec.queueName, written when they differ
    and it holds no quota (a reserved Workload's queue is fixed, as the API says). Returns the
    Workload as it is now."""
    if not isinstance(workload, dict) or not job.queue_name or job.finished is not None:
        return workload
    if o.is_true(workload, o.QUOTA_RESERVED):
        return workload
    old = str((workload.get("spec") or {}).get("queueName") or "")
    if old == job.queue_name:
        return workload
    patch = o.conditional({"spec": {"queueName": job.queue_name}}, workload)
    written = write_workload(ctx, wl_key, patch, "queue-name")
    if written is None:
        return workload  # it moved meanwhile: its reconcile looks again
    log.info("%s %s moved from LocalQueue %r to %r: so did Workload %s", job.kind, job.key,
             old, job.queue_name, wl_key)  # fmt: skip
    ctx.queues.workloads.add(wl_key)
    return written

"""Kueue's objectRetentionPolicies acted on: finished Workloads, and the jobs of Workloads
Tower deactivated, deleted once their time is up (core/admission/retention.py says when).

The Workload reconciler asks, for a finished Workload and for a deactivated one that holds no
quota, how long it may stay; it looks again then (its timed requeue, on the controller's
clock). A finished Workload is deleted itself (its job stays, as in Kueue); for a deactivated
one it is the job that is deleted, in the background, and its Workload goes with it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from extender.core.admission import retention
from extender.kube.api import objects as o
from extender.kube.api.resources import WORKLOADS
from extender.kube.controller.context import Context
from extender.kube.controller.job_start import delete_object

log = logging.getLogger("tower.workloads")


class Retention:
    """The Workload reconciler's timer for objectRetentionPolicies.workloads."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def finished(self, key: str, obj: Mapping[str, Any]) -> float | None:
        """A finished Workload: deleted once afterFinished has passed since it finished;
        else the seconds left (None: it is kept)."""
        ctx = self.ctx
        since = (o.condition(obj, o.FINISHED) or {}).get("lastTransitionTime")
        now = ctx.clock()
        left = retention.finished_left(
            ctx.settings.workload_retention, o.seconds_at(since) if since else now, now
        )
        if left is None or left > 0:
            return left
        delete_object(ctx, WORKLOADS, key)
        ctx.store.forget(WORKLOADS, key)
        log.info("Workload %s deleted: finished, its retention elapsed", key)
        ctx.event(dict(obj), "Normal", retention.DELETED, retention.FINISHED_DELETED)
        return None

    def deactivated(self, key: str, obj: Mapping[str, Any]) -> float | None:
        """A Workload Tower deactivated (evicted DeactivatedDueTo...), holding no quota: its
        job is deleted once afterDeactivatedByKueue has passed since the eviction; else the
        seconds left (None: kept, as one deactivated by hand or without a job is)."""
        ctx = self.ctx
        evicted = o.condition(obj, o.EVICTED) or {}
        active = (obj.get("spec") or {}).get("active") is not False
        if not retention.deactivated_by_kueue(
            active, evicted.get("status") == "True", str(evicted.get("reason") or "")
        ):
            return None
        now = ctx.clock()
        left = retention.deactivated_left(
            ctx.settings.workload_retention, o.seconds_at(evicted.get("lastTransitionTime")), now
        )
        job = ctx.job_of(dict(obj))
        if left is None or job is None:
            return None
        if left > 0:
            return left
        delete_object(ctx, job.resource, job.key)
        log.info("%s %s deleted: its Workload %s was deactivated, its retention elapsed",
                 job.kind, job.key, key)  # fmt: skip
        ctx.event(job.as_object(), "Normal", retention.DELETED, retention.JOB_DELETED)
        return None

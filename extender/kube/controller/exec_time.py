"""The maximum execution time in the controller: an admitted Workload out of time is deactivated.

The Workload reconciler asks, for each admitted Workload, how long it may still run
(`check`). It is looked at again then, by the reconciler's timed requeue (the controller's
clock, as PodsReady timeouts are), not by a sleeping thread. Once its time is up it is marked
DeactivationTarget MaximumExecutionTimeExceeded, as Kueue marks it, and its past seconds are
cleared; then, as for any DeactivationTarget, `spec.active: false` and the eviction follow
(pods_ready.PodsReadyWatch.deactivate, workloads.WorkloadReconciler._evict_deactivated).
"""

from __future__ import annotations

import logging
from typing import Any

from extender.core.admission import exec_time as policy
from extender.core.api.models import Workload
from extender.kube.api import objects as o
from extender.kube.controller.context import Context
from extender.kube.controller.pods_ready import DEACTIVATION_TARGET
from extender.kube.controller.workload_status import write_status

log = logging.getLogger("tower.exectime")

Obj = dict[str, Any]


class ExecutionTimeWatch:
    """Kueue's reconcileMaxExecutionTime for the Workloads of one term."""

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
        left = policy.time_left(
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
        change = (DEACTIVATION_TARGET, "True", policy.EXCEEDED, policy.EXCEEDED_MESSAGE)
        status: Obj = {"conditions": o.with_conditions(obj, now, change)}
        if past is not None:
            status[o.EXECUTED] = None  # Kueue clears it with the mark
        patch = o.conditional({"status": status}, obj)
        if write_status(ctx, key, patch, "deactivation-target") is not None:
            limit = model.max_execution_seconds
            log.info("Workload %s: the maximum execution time (%ss) exceeded", key, limit)
            ctx.story(
                key,
                "Warning",
                policy.EXCEEDED,
                f"The maximum execution time ({limit}s) exceeded",
            )
        return None

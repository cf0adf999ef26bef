"""Why a pending workload waits: told in an Event when the reason changes, and written to its
QuotaReserved=False condition with spare budget only, so admissions never wait behind it."""

from __future__ import annotations

import logging
from typing import Any

from extender.core.scheduling.cycle import PendingStatus
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError, KubeError, RequestBudget
from extender.kube.api.resources import WORKLOADS
from extender.kube.controller.context import Context
from extender.kube.controller.workload_status import patch_status

log = logging.getLogger("tower.pending")

Obj = dict[str, Any]


class PendingReasons:
    """The pending reasons to tell and to write, on their own small budget."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._budget = RequestBudget(ctx.settings.pending_status_qps, 10, clock=ctx.monotonic)

    def mark(self, key: str, status: PendingStatus) -> None:
        """A pending workload's reason: an Event when it changes (Events have their own
        budget); the condition is queued for writing when it says something else."""
        ctx = self.ctx
        if ctx.told.first(f"pending:{key}", status.reason):
            ctx.story(key, "Normal", "Pending", status.message)
        obj = ctx.store.get(WORKLOADS, key)
        if obj is not None and not shows(obj, status):
            ctx.queues.pending.add(key)

    def forget(self, key: str) -> None:
        """It holds quota now, or is gone: its next pending reason is told afresh."""
        self.ctx.told.forget(f"pending:{key}")

    def flush(self) -> None:
        """QuotaReserved=False messages: only with spare budget, so admissions never wait."""
        ctx = self.ctx
        budget = ctx.client.budget
        queue = ctx.queues.pending
        while (key := queue.pop()) is not None:
            obj = ctx.store.get(WORKLOADS, key)
            if obj is None or ctx.state.is_admitted(key) or ctx.state.workload(key) is None:
                continue
            status = ctx.state.pending_status(key)
            if shows(obj, status):
                continue
            if not self._budget.spare(0):
                queue.add_after(key, 1.0 / ctx.settings.pending_status_qps)
                return
            if not ctx.spare(min(budget.qps, budget.burst / 2)):
                self._budget.give_back()
                queue.add_after(key, 1.0 / budget.qps)
                return
            patch = o.conditional(
                o.pending_patch(obj, status.reason, status.message, ctx.clock()), obj
            )
            try:
                patch_status(ctx, key, patch, "pending", paced=False)
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
            queue.forget(key)


def shows(obj: Obj, status: PendingStatus) -> bool:
    """Whether the Workload's QuotaReserved condition already says this."""
    current = o.condition(obj, o.QUOTA_RESERVED)
    return current is not None and (current.get("reason"), current.get("message")) == (
        status.reason,
        status.message,
    )

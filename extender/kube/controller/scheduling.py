"""The scheduling loop: run the core's cycle while anything moves, and hand each decision to
the Workload reconciler to write.

A cycle assumes its admissions in the core before returning them. If the API server fails
in the middle of writing them (refused, unreachable, throttled), the rest of the cycle is
abandoned: what was not written is rolled back, the evictions not written are kept, and the
next cycle waits a backoff that doubles with each failed round (or the server's
Retry-After). A failed write never ends the loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from extender.core.cycle import Admit, CycleResult, Evict
from extender.kube.api.client import KubeError
from extender.kube.api.workqueue import Backoff
from extender.kube.controller.context import Context
from extender.kube.controller.workloads import WorkloadReconciler

log = logging.getLogger("tower.scheduling")

# Cycles at one instant stop once nothing moves (the simulator uses the same bound).
MAX_CYCLES = 1000


class Scheduler:
    """Runs cycles on the core's state when it changed, and writes their decisions."""

    def __init__(
        self,
        ctx: Context,
        workloads: WorkloadReconciler,
        *,
        take_in: Callable[[], None],
        monotonic: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
    ) -> None:
        self.ctx = ctx
        self.workloads = workloads
        self.take_in = take_in  # apply what the watches brought meanwhile
        self.monotonic = monotonic
        self.backoff = backoff or Backoff(base=0.2, cap=30.0)
        self.failures = 0
        self.resume_at = 0.0

    def due_in(self) -> float | None:
        """Seconds until a cycle should run (None when nothing changed)."""
        if not self.ctx.dirty:
            return None
        return max(0.0, self.resume_at - self.monotonic())

    def run(self) -> None:
        ctx = self.ctx
        if not ctx.dirty or self.monotonic() < self.resume_at:
            return
        ctx.dirty = False
        for _ in range(MAX_CYCLES):
            started = time.perf_counter()
            result = ctx.state.schedule(ctx.clock())
            elapsed = time.perf_counter() - started
            outcome = "success" if result.admitted else "inadmissible"
            if result.heads:
                ctx.metrics.attempt_duration.labels(outcome).observe(elapsed)
                ctx.metrics.attempts_total.labels(outcome).inc()
            written = self._write(result)
            # Writes wait on the budget; take in what happened meanwhile (finished workloads
            # free quota) so the next cycle does not preempt for quota that is already free.
            self.take_in()
            if not written:
                ctx.dirty = True  # decide again after the refused write, on fresh state
                return
            if not result.progressed:
                return

    def _write(self, result: CycleResult) -> bool:
        """Write a cycle's decisions; False when a write was refused (the rest undone)."""
        ctx = self.ctx
        all_written = True
        for i, decision in enumerate(result.admitted):
            try:
                all_written &= self.workloads.admit(decision)
            except KubeError as err:
                self._abandon(result.admitted[i + 1 :], result.evicted, err)
                return False
        budget = ctx.client.budget
        for i, eviction in enumerate(result.evicted):
            # An eviction waits for its turn in the budget behind the cycle's other writes.
            # Take in what happened meanwhile: a victim that finished, a preemptor that went
            # away or a queue that was resumed costs no write (and no 409 Conflict).
            budget.acquire()
            self.take_in()
            if not ctx.state.still_needed(eviction):
                budget.give_back()
                ctx.state.keep(eviction.workload.key)
                ctx.metrics.evictions_dropped.inc()
                continue
            try:
                all_written &= self.workloads.evict(eviction, paced=False)
            except KubeError as err:
                self._abandon((), result.evicted[i + 1 :], err)
                return False
        for workload, status in result.pending:
            self.workloads.mark_pending(workload.key, status)
        if all_written:
            self.failures = 0
        return all_written

    def _abandon(
        self, admissions: tuple[Admit, ...], evictions: tuple[Evict, ...], err: KubeError
    ) -> None:
        """The API server failed: undo what was decided but not written, and back off."""
        ctx = self.ctx
        for decision in admissions:
            ctx.state.forget(decision.workload.key)
        for eviction in evictions:
            ctx.state.keep(eviction.workload.key)
        delay = max(err.retry_after or 0.0, self.backoff.delay(self.failures))
        self.failures += 1
        self.resume_at = self.monotonic() + delay
        level = logging.WARNING if self.failures <= 3 or self.failures % 10 == 0 else logging.DEBUG
        log.log(
            level,
            "writing decisions failed (%s): %d admissions and %d evictions undone; the next "
            "cycle in %.1fs",
            err,
            len(admissions),
            len(evictions),
            delay,
        )

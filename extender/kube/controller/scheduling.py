"""The scheduler's side of the loop: when a cycle is due, run the core's cycle, and undo
what the API server refused.

A cycle assumes its admissions in the core before returning them; the controller's loop
sends them in the write pool (admission.py) and decides again on the assumed state while
they are in flight, as Kueue does. An admission the API server refused is rolled back alone;
one it failed (unreachable, throttled, 5xx) also holds the next cycle back for a backoff that
doubles with each failed round (or the server's Retry-After). Evictions are written in the
loop; if one fails, the rest of the cycle's evictions are kept. A failed write never ends
the loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from extender.core.scheduling.cycle import Admit, CycleResult, Evict
from extender.kube.api.client import KubeError
from extender.kube.api.workqueue import Backoff
from extender.kube.api.writes import ADMIT
from extender.kube.controller.context import Context

log = logging.getLogger("tower.scheduling")

# Cycles at one instant stop once nothing moves (the simulator uses the same bound).
MAX_CYCLES = 1000


class Scheduler:
    """Runs a cycle on the core's state when one is due (the CYCLE key of Queues.schedule)."""

    def __init__(
        self,
        ctx: Context,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        backoff: Backoff | None = None,
    ) -> None:
        self.ctx = ctx
        self.monotonic = monotonic
        self.backoff = backoff or Backoff(base=0.2, cap=30.0)
        self.failures = 0
        self.resume_at = 0.0  # after a failed write, no cycle before this (the backoff)

    def due_in(self) -> float | None:
        """Seconds until a cycle should run (None when nothing changed, or while the last
        cycle's admissions wait to be sent: an answer wakes the loop)."""
        due = self.ctx.queues.schedule.next_due()
        if due is None or self.held():
            return None
        return max(due, self.resume_at - self.monotonic())

    def take_due(self) -> bool:
        """Whether a cycle is due now (and, if so, it is taken)."""
        if self.monotonic() < self.resume_at or self.held():
            return False
        return self.ctx.queues.schedule.pop() is not None

    def held(self) -> bool:
        """Admissions decided wait for a sender (the budget is what limits): the next cycle
        waits until they are sent, deciding then on fresher state and in one batch, rather
        than once per event. In flight is not waiting: cycles run while writes are."""
        pool = self.ctx.writes
        return pool is not None and pool.queued_at(ADMIT) > 0

    def decide(self) -> CycleResult:
        """One cycle of the core, its duration and outcome counted."""
        ctx = self.ctx
        started = time.perf_counter()
        result = ctx.state.schedule(ctx.clock())
        elapsed = time.perf_counter() - started
        outcome = "success" if result.admitted else "inadmissible"
        if result.heads:
            ctx.metrics.cycle(outcome, elapsed, result.preemption_skips)
        return result

    def written(self) -> None:
        """Every decision of a cycle was written: the backoff starts over."""
        self.failures = 0

    def refused(self) -> None:
        """A write was refused (409, gone): decide again at once on fresh state."""
        self.ctx.reschedule()

    def failed(self, err: KubeError) -> None:
        """An admission sent in the pool failed in a way a retry may mend (it was undone, or
        its quota stays held until settled): no cycle until a backoff has passed. Counted
        once per round of failures, not once per admission of a cycle."""
        now = self.monotonic()
        if now >= self.resume_at:
            delay = max(err.retry_after or 0.0, self.backoff.delay(self.failures))
            self.failures += 1
            self.resume_at = now + delay
            loud = self.failures <= 3 or self.failures % 10 == 0
            log.log(
                logging.WARNING if loud else logging.DEBUG,
                "an admission was not written (%s); the next cycle in %.1fs",
                err,
                delay,
            )
        elif err.retry_after:
            self.resume_at = max(self.resume_at, now + err.retry_after)
        self.ctx.reschedule()

    def abandon(
        self, admissions: Sequence[Admit], evictions: Sequence[Evict], err: KubeError
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
        ctx.reschedule()
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

"""Writing a scheduling cycle's decisions: admissions sent, evictions only if still needed."""

from __future__ import annotations

from collections.abc import Callable

from extender.core.scheduling.cycle import CycleResult
from extender.kube.api.client import KubeError
from extender.kube.api.resources import WORKLOADS
from extender.kube.controller.admission import AdmissionWriter
from extender.kube.controller.context import Context
from extender.kube.controller.pending import PendingReasons
from extender.kube.controller.scheduling import Scheduler


class CycleWriter:
    """Writes what a cycle decided, and tells the scheduler how the writes went. Before
    each eviction it takes in what happened meanwhile (`take_in`, the loop's step 1)."""

    def __init__(
        self,
        ctx: Context,
        admission: AdmissionWriter,
        pending: PendingReasons,
        scheduler: Scheduler,
        *,
        take_in: Callable[[], None],
    ) -> None:
        self.ctx = ctx
        self.admission = admission
        self.pending = pending
        self.scheduler = scheduler
        self.take_in = take_in

    def write(self, result: CycleResult) -> bool:
        """Send a cycle's admissions (their answers are taken in later, while the next
        cycles run) and write its evictions; False when an eviction was refused or failed
        (the rest is kept, and the scheduler decides again on fresh state or after a
        backoff)."""
        ctx = self.ctx
        for decision in result.admitted:
            self.admission.admit(decision)
        all_written = True
        budget = ctx.client.budget
        for i, eviction in enumerate(result.evicted):
            # An eviction waits for its turn in the budget behind the cycle's other writes.
            # Take in what happened meanwhile: a victim that finished, a preemptor that went
            # away or a queue that was resumed costs no write (and no 409 Conflict).
            budget.acquire()
            if ctx.writes is not None:  # a victim whose admission is still on its way
                ctx.writes.run((WORKLOADS.plural, eviction.workload.key), lambda: None)
            self.take_in()
            if not ctx.state.still_needed(eviction):
                budget.give_back()
                ctx.state.keep(eviction.workload.key)
                ctx.metrics.evictions_dropped.inc()
                continue
            try:
                all_written &= self.admission.evict(eviction, paced=False)
            except KubeError as err:
                self.scheduler.abandon((), result.evicted[i + 1 :], err)
                return False
        for workload, status in result.pending:
            self.pending.mark(workload.key, status)
        if not all_written:
            self.scheduler.refused()
        elif result.evicted:
            self.scheduler.written()
        return all_written

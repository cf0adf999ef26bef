"""Kueue's scheduler: one scheduling cycle over the queue manager's heads and the cache.

`Scheduler.schedule(now)` is one cycle in numbered steps: drain, heads, snapshot, nominate,
order, admit or preempt, requeue. It assumes each admission into the cache before returning
it (as Kueue assumes into its cache before writing); the caller writes the decisions. Nothing
here does I/O or reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import NamedTuple

from extender.core.api.models import (
    RECLAIM_ANY,
    Admission,
    ClusterQueue,
    FlavorResource,
    StopPolicy,
    Workload,
    new_tuple,
)
from extender.core.scheduling import slices
from extender.core.scheduling.cache import Cache
from extender.core.scheduling.cycle_quota import CycleQuota, Entry, to_reserve
from extender.core.scheduling.fairsharing import dominant_resource_share
from extender.core.scheduling.flavors import (
    FIT,
    NO_CANDIDATES,
    NO_FIT,
    PREEMPTING,
    WAITING_FOR_QUOTA,
    Assignment,
    Mode,
    PreemptionOracle,
    QuickPlan,
    fit_by_plan,
    judge_by_plan,
    quick_plan,
    search_flavors,
)
from extender.core.scheduling.oracle import preemption_verdict
from extender.core.scheduling.partial import largest_fit, may_shrink, scaled
from extender.core.scheduling.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    KUEUE_FAIR_PREEMPTION,
    AdmittedIn,
    AdmittedWorkload,
    FairPreemption,
    Target,
    TargetSearch,
    classical_targets,
    fair_sharing_targets,
    may_have_candidates,
    may_preempt_at_all,
)
from extender.core.scheduling.queue_manager import QueueManager
from extender.core.scheduling.queues import ClassMemo, ClusterQueueQueue
from extender.core.scheduling.quota import QuotaNode
from extender.core.scheduling.reasons import (
    INADMISSIBLE,
    MISCONFIGURED,
    PODS_READY_BLOCK_MESSAGE,
    PREEMPTED,
    WAITING_FOR_PODS_READY,
    WAITING_FOR_PREEMPTED,
    PendingStatus,
)
from extender.core.scheduling.scan_progress import ScanProgress, ScanStart
from extender.core.scheduling.topology_preemption import (
    TopologyHooks,
    placeable_targets,
    shrink_to_topology,
    topology_targets,
)
from extender.core.scheduling.verdicts import State, Verdict, state_of
from extender.core.tas.scheduling import with_delayed_topology

_PREEMPTION_WHY = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    IN_COHORT_FAIR_SHARING: "fair sharing within the cohort",
}

InternalCheck = Callable[[Workload, Admission], "str | Admission | None"]
"""An admission check Tower decides inside the cycle, after quota fits (physical fit on
nodes, topology placement): a refusal message, the admission with what it placed added, or
None. AdmissionCheck objects are asked after quota is reserved."""
_TOPOLOGY_REFUSAL = "couldn't assign flavors to pod set "


class Admit(NamedTuple):
    """Decision: write this admission, then start the job."""

    workload: Workload
    admission: Admission


class Evict(NamedTuple):
    """Decision: stop this workload's job and give its quota back."""

    workload: Workload
    reason: str  # Evicted condition reason: Preempted, ClusterQueueStopped, ...
    preemption_reason: str | None  # Preempted condition reason: InClusterQueue, ...
    message: str
    preemptor: str | None = None


@dataclass(frozen=True, slots=True)
class CycleResult:
    """What one scheduling cycle decided."""

    admitted: tuple[Admit, ...] = ()
    evicted: tuple[Evict, ...] = ()
    pending: tuple[tuple[Workload, PendingStatus], ...] = ()
    heads: int = 0
    progressed: bool = False
    # Per ClusterQueue, heads that would have preempted but were skipped because another
    # preemptor of the cycle took their targets or the room (Kueue's preemption skips).
    preemption_skips: Mapping[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _Step5:
    """What step 5 decided so far in one cycle."""

    now: float
    quota: CycleQuota
    evicted: list[Evict]
    admitted: list[Admit] = field(default_factory=list)
    claimed: set[str] = field(default_factory=set)  # victims of this cycle's preemptors
    progressed: bool = False
    skips: dict[str, int] = field(default_factory=dict)  # preemptors skipped, per ClusterQueue


def _verdict_state(
    cache: Cache, cq: ClusterQueue, node: QuotaNode, workload: Workload, fair_sharing: bool
) -> State:
    """What a verdict about this workload's class depends on (verdicts.py)."""
    return state_of(
        cq,
        node,
        workload.priority,
        cache.lowest_priority(cq.name),
        cache.generation,
        fair_sharing,
    )


def target_search(fair_sharing: bool, policy: FairPreemption) -> TargetSearch:
    """Classical preemption, or fair sharing's as the Configuration and gates set it."""
    if not fair_sharing:
        return classical_targets
    if policy == KUEUE_FAIR_PREEMPTION:
        return fair_sharing_targets
    return partial(fair_sharing_targets, policy=policy)


class Scheduler:
    """Kueue's scheduler: decides, cycle by cycle, what is admitted and what is preempted."""

    def __init__(
        self,
        cache: Cache,
        queues: QueueManager,
        *,
        fair_sharing: bool = False,
        admission_checks: Sequence[InternalCheck] = (),
    ) -> None:
        self._cache = cache
        self._queues = queues
        self.fair_sharing = fair_sharing
        # fairSharing.preemptionStrategies and FairSharingPreemptWithinNominal (options.py).
        self.fair_preemption = KUEUE_FAIR_PREEMPTION
        self.admission_checks = tuple(admission_checks)
        # WaitForPodsReady's blockAdmission: while an admitted workload is not PodsReady, no
        # other is admitted (Kueue's scheduler waits for them before each admission).
        self.block_admission = False
        self.not_ready: set[str] = set()
        cache.release_hooks.append(self.not_ready.discard)
        # Reuse what was found for a head's equivalence class: a "does not fit" verdict while
        # its state is unchanged (verdicts.py), an admission to the same flavors. Off, every
        # head is judged and admitted from scratch (the tests compare the two).
        self.reuse_by_class = True
        # Kueue's PartialAdmission feature gate (on by default since v0.5): a pod set with
        # minCount may be admitted with fewer pods when all of them do not fit.
        self.partial_admission = True
        # Topology-aware scheduling, for preemption that makes room on domains and for the
        # domains a waiting entry keeps from later ones until the cycle ends.
        self.topology: TopologyHooks | None = None
        # Kueue's ElasticJobsViaWorkloadSlices (Beta, on by default): a scale-up slice counts
        # the quota of the admitted slice it replaces as its own (scheduling/slices.py).
        self.workload_slices = True
        self.slices = slices.SliceLedger(cache)
        self.scan = ScanProgress()  # FlavorFungibilityPreserveScanProgress: scan.preserve
        self.variant_waits: Callable[[Entry, list[Evict]], bool] | None = None  # concurrent.py

    def schedule(self, now: float) -> CycleResult:
        """Run one scheduling cycle at time `now` and return its decisions."""
        # 0. Drain: stopped queues with HoldAndDrain give back what they admitted.
        evicted = drain(self._cache)

        self.scan.cycle += 1
        # 1. Heads: one workload per active ClusterQueue.
        heads = self._queues.heads()

        # 2. Snapshot: the quota tree is the snapshot; admissions are assumed into it as
        #    they happen, so later entries of this cycle see what earlier ones took.

        # 3. Nominate: flavor assignment, and preemption targets where only preemption helps.
        nominate = self._nominate
        entries = [nominate(*head) for head in heads]

        # 4. Order: classical (the least borrowing first, then priority, FIFO) or fair-sharing
        #    tournament.
        ordered = _fair_order(entries) if self.fair_sharing else iter(_classical(entries))

        # 5. Admit or preempt, entry by entry. A preempting entry reserves its quota in the
        #    snapshot for the rest of the cycle, so what its victims free (and what is free
        #    now) is not taken by another entry that Kueue ordered after it. Borrowers come
        #    after every entry that fits its own quota; a lender with pending work that fits
        #    its unused quota keeps it from them (cycle_quota's lender holds).
        step = _Step5(now, CycleQuota(classical=not self.fair_sharing), evicted)
        admit, preempt, leave_pending = self._admit, self._preempt, self._leave_pending
        for entry in ordered:
            mode = entry.assignment.mode
            if self.variant_waits is not None and self.variant_waits(entry, step.evicted):
                continue
            if mode == FIT:
                admit(entry, step)
            elif mode in PREEMPTING and entry.targets:
                preempt(entry, step)
            else:
                leave_pending(entry, step)
        step.quota.release_holds()
        if self.topology is not None:
            self.topology.end_cycle()

        if entries or self.scan.kept:
            self.scan.after_cycle(entries, self._cache.generation, self._queues.pending_workload)
        # 6. Requeue: what was not admitted keeps its place or was parked above; record why.
        pending = [(e.workload, e.status) for e in entries if e.status is not None]
        self._queues.record(pending)
        return CycleResult(
            tuple(step.admitted),
            tuple(evicted),
            tuple(pending),
            len(heads),
            step.progressed,
            step.skips,
        )

    # ----- step 3 ---------------------------------------------------------------------

    def _nominate(
        self,
        cq: ClusterQueue,
        node: QuotaNode,
        queue: ClusterQueueQueue,
        workload: Workload,
        memo: ClassMemo | None,
    ) -> Entry:
        cache = self._cache
        if not self.reuse_by_class:
            memo = None
        # A class remembers that its namespace is selected until the answers may change.
        if memo is None or memo.selected_epoch != cache.selection_epoch:
            if not cache.selects(cq, workload.namespace):
                return _not_selected(cq, node, queue, workload)
            if memo is not None:
                memo.selected_epoch = cache.selection_epoch
        lq = cache.local_queue_of(workload) if cache.stopped_local_queues else None
        if lq is not None and lq.stop_policy is not StopPolicy.NONE:
            message = f"LocalQueue {lq.key} is stopped (stopPolicy {lq.stop_policy.value})"
            return Entry(
                cq, node, queue, workload, Assignment(NO_FIT, reason=INADMISSIBLE, message=message)
            )

        if workload.replacement_for and self.workload_slices:
            old = slices.replaced(cache, workload, cq.name)
            if old is not None:  # judged with its old slice's quota as its own, alone
                return self._nominate_slice(cq, node, queue, workload, old)
        start = self.scan.start(workload, cache.generation) if self.scan.kept else None
        if start:  # resumed where an earlier cycle's search stopped: no class shortcut
            may_preempt = may_preempt_at_all(cq, node)
            args = (None, None, None, may_preempt, start)
            return _nominate_by_search(self, cq, node, queue, workload, *args)

        plan = None
        if len(workload.pod_sets) == 1:
            if memo is not None and memo.plan_generation == cache.generation:
                plan = memo.plan  # made when the class was queued (`prepare`)
            else:
                plan = class_plan(memo, workload, cq, cache)
            if plan is not None:
                quick = fit_by_plan(plan, node)
                if quick is not None:
                    # Positional: an Entry is built per head, and keywords cost twice as much.
                    return Entry(cq, node, queue, workload, quick, (), None, memo)

        # A head that fits nowhere: judged again only if what decided that changed.
        state = None
        kept = memo.verdict if memo is not None else None
        if kept is not None:
            state = _verdict_state(self._cache, cq, node, workload, self.fair_sharing)
            if kept.state == state:
                return Entry(cq, node, queue, workload, kept.assignment, (), None, memo)

        may_preempt = may_preempt_at_all(cq, node)
        judged = judge_without_oracle(
            cache,
            cq,
            node,
            workload,
            plan,
            may_preempt=may_preempt,
            fair_sharing=self.fair_sharing,
            partial_admission=self.partial_admission,
        )
        if judged is None:
            return _nominate_by_search(
                self, cq, node, queue, workload, memo, plan, state, may_preempt
            )
        if memo is not None and judged.mode <= NO_CANDIDATES:
            if state is None:
                state = _verdict_state(self._cache, cq, node, workload, self.fair_sharing)
            memo.verdict = new_tuple(Verdict, (state, judged))
        return Entry(cq, node, queue, workload, judged, (), None, memo)

    def _nominate_slice(
        self, cq: ClusterQueue, node: QuotaNode, queue: ClusterQueueQueue, workload: Workload,
        old: AdmittedWorkload,
    ) -> Entry:  # fmt: skip
        """Step 3 for a scale-up slice: it may preempt as any workload may (Kueue's scheduler
        lets it), choosing among every admitted workload but the slice it replaces."""
        admitted_in = slices.without_old(self._cache.admitted_in, old)
        oracle, targets, _ = _preemption_questions(self, cq, node, workload, admitted_in)
        questions = (oracle, targets) if may_preempt_at_all(cq, node) else (None, None)
        found = slices.assign(
            self._cache, cq, node, workload, old, self.fair_sharing, *questions
        )  # fmt: skip
        return Entry(cq, node, queue, workload, *found)

    def prepare(self, cq: ClusterQueue, memo: ClassMemo, workload: Workload) -> None:
        """An equivalence class was made for a workload just queued: its plan, and the
        admission to the plan's flavors, are made now, not in the class's first cycle (they
        read the ClusterQueue, the flavors and the shape, never usage). Whether the
        ClusterQueue selects the workload's namespace is asked now too, so the answer is
        cached before the class's first cycle."""
        cache = self._cache
        if cache.selects(cq, workload.namespace):
            memo.selected_epoch = cache.selection_epoch
        if not self.reuse_by_class or len(workload.pod_sets) != 1:
            return
        plan = memo.plan
        if memo.plan_generation != cache.generation:
            plan = class_plan(memo, workload, cq, cache)
        if plan is not None and memo.admission_flavors is not plan.pod_set_flavors:
            fit = Assignment(FIT, 0, plan.pod_set_flavors, plan.usage)
            memo.admission = fit.admission(cq.name, workload)
            memo.admission_flavors = plan.pod_set_flavors

    def _targets(
        self,
        workload: Workload,
        cq: ClusterQueue,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        need: frozenset[FlavorResource],
        admitted_in: AdmittedIn | None = None,
    ) -> list[Target]:
        cache = self._cache
        lq_usage = _victim_usage(self._queues, cq)
        candidates = cache.admitted_in if admitted_in is None else admitted_in
        search = target_search(self.fair_sharing, self.fair_preemption)
        return search(
            workload, cq, node, request, need, candidates, cache.lowest_priority,
            lq_usage=lq_usage,
        )  # fmt: skip

    def targets_for(
        self, workload: Workload, cq_name: str, request: Mapping[FlavorResource, int],
        need: frozenset[FlavorResource],
    ) -> list[Target]:  # fmt: skip
        """Whom preemption would evict for a workload's request, to make room in `need`."""
        cache = self._cache
        cq, node = cache.cluster_queues[cq_name], cache.tree.cluster_queues[cq_name]
        return self._targets(workload, cq, node, request, need) if need else []

    # ----- step 5, by what nomination found -----------------------------------------

    def _admit(self, entry: Entry, step: _Step5) -> None:
        """It fits: admitted, unless an entry before it took the quota meanwhile or an
        admission check refuses it."""
        workload, assignment = entry.workload, entry.assignment
        quota = step.quota
        taken_meanwhile = quota.refusal(entry)
        if taken_meanwhile is not None:
            entry.status = PendingStatus(WAITING_FOR_QUOTA, taken_meanwhile)
            step.progressed = True  # retried at once: not parked as inadmissible
            return
        if self.block_admission and self.not_ready:
            entry.status = PendingStatus(WAITING_FOR_PODS_READY, PODS_READY_BLOCK_MESSAGE)
            return  # it stays the head; a workload getting ready calls for the next cycle
        cache = self._cache
        admission = admission_of(entry)
        if entry.cq.admission_checks:  # only a check can delay a topology request
            admission = with_delayed_topology(
                admission, entry.cq, cache.admission_checks, cache.flavors
            )
        refusal = None
        for check in self.admission_checks:
            verdict = check(workload, admission)
            if isinstance(verdict, str):
                refusal = verdict
                break
            if verdict is not None:
                admission = verdict
        if refusal is not None:
            topology = self.topology
            remedy: list[Target] | Assignment | None = None
            if topology is not None and refusal.startswith(_TOPOLOGY_REFUSAL):
                fit, usage = topology.fits_without, _victim_usage(self._queues, entry.cq)
                remedy = topology_targets(
                    entry,
                    admission,
                    fit,
                    self._cache,
                    usage,
                    target_search(self.fair_sharing, self.fair_preemption),
                    step.claimed,
                )
                if not remedy and self.partial_admission and not assignment.counts:
                    remedy = shrink_to_topology(entry, fit, self._cache)
            taken = [a.workload.key for a in step.admitted]
            if (
                not remedy
                and taken
                and topology
                and topology.fits_without(workload, admission, taken)
            ):
                # Kueue's sticky nomination: an entry admitted earlier in this cycle took the
                # domains; it stays queued, and is tried again as it was.
                entry.status = PendingStatus(WAITING_FOR_QUOTA, refusal)
                step.progressed = True
            elif isinstance(remedy, list) and remedy:
                entry.targets = remedy
                entry.assignment = entry.assignment._replace(message=refusal)
                self._preempt(entry, step)
            elif isinstance(remedy, Assignment):
                entry.assignment = remedy
                self._admit(entry, step)  # shrunk: asked again, and never shrunk twice
            else:
                entry.status = PendingStatus(INADMISSIBLE, refusal)
                if (
                    topology is not None
                    and entry.cq.preemption.reclaim_within_cohort is not RECLAIM_ANY
                ):
                    topology.reserve(workload, admission, None)  # as a quota hold, below
                # Progress only if the queue moved (under StrictFIFO the head stays). One with
                # flavors left to try is not set aside: its next search resumes after this one.
                if not self.scan.pending_flavors(entry) and self._queues.set_aside(
                    entry.node, entry.queue, workload
                ):
                    step.progressed = True
            return
        self._queues.admitted(workload)
        old = slices.replaced(cache, workload, entry.cq.name) if self.workload_slices else None
        if old is not None:
            # Its old slice's quota becomes its own in this one step: the tree gains only
            # the difference, and nothing else is admitted into the old slice's room.
            self.slices.replace(old, workload.key)
            cache.assume(workload, admission, step.now, None, entry.node)
        else:
            cache.assume(workload, admission, step.now, assignment.usage, entry.node)
        ledger = self._queues.ledger
        if ledger is not None and entry.cq.admission_fair_sharing:
            # Kueue's entry penalty: its LocalQueue's usage grows now, not at the next sample.
            totals: dict[str, int] = {}
            for (_, resource), amount in assignment.usage.items():
                totals[resource] = totals.get(resource, 0) + amount
            ledger.admitted(f"{workload.namespace}/{workload.queue_name}", workload.key, totals)
        if self.block_admission:
            self.not_ready.add(workload.key)
        quota.admitted(entry)
        step.admitted.append(new_tuple(Admit, (workload, admission)))
        step.progressed = True

    def _preempt(self, entry: Entry, step: _Step5) -> None:
        """It fits once its targets are gone: they are evicted and it waits for them, unless
        another preemptor of this cycle claimed them or what earlier entries took leaves no
        room even then."""
        workload, assignment = entry.workload, entry.assignment
        keys = {t.victim.workload.key for t in entry.targets}
        if keys & step.claimed:
            step.skips[entry.cq.name] = step.skips.get(entry.cq.name, 0) + 1
            entry.status = PendingStatus(
                WAITING_FOR_QUOTA,
                f"{assignment.message}; the workloads it would preempt are being "
                "preempted for another workload",
            )
            return
        no_longer_fits = step.quota.preempt(entry)
        if no_longer_fits is not None:
            step.skips[entry.cq.name] = step.skips.get(entry.cq.name, 0) + 1
            entry.status = PendingStatus(WAITING_FOR_QUOTA, no_longer_fits)
            return
        step.claimed |= keys
        if self.topology is not None:
            admission = assignment.admission(entry.cq.name, workload)
            self.topology.reserve(workload, admission, sorted(keys))
        for target in entry.targets:
            if target.victim.evicting:
                continue
            target.victim.evicting = True
            step.progressed = True
            step.evicted.append(
                Evict(
                    target.victim.workload,
                    PREEMPTED,
                    target.reason,
                    f"Preempted to accommodate a workload (UID: {workload.uid}) due to "
                    f"{_PREEMPTION_WHY[target.reason]}",
                    workload.key,
                )
            )
        names = ", ".join(sorted(keys))
        entry.status = PendingStatus(
            WAITING_FOR_PREEMPTED,
            f"{assignment.message}; waiting for preempted workloads to stop: {names}",
        )

    def _leave_pending(self, entry: Entry, step: _Step5) -> None:
        """It does not fit, and preemption does not help: it waits, set aside where its queue
        lets it step aside."""
        assignment = entry.assignment
        entry.status = new_tuple(PendingStatus, (assignment.reason, assignment.message))
        if (
            assignment.mode == NO_CANDIDATES
            and entry.cq.preemption.reclaim_within_cohort is not RECLAIM_ANY
        ):
            # It could not take its quota back later: what it needs is kept from entries
            # after it, as Kueue does (and the domains it would take).
            step.quota.hold(entry, to_reserve(entry))
            if self.topology is not None:
                admission = assignment.admission(entry.cq.name, entry.workload)
                self.topology.reserve(entry.workload, admission, None)
        if self._queues.set_aside(
            entry.node,
            entry.queue,
            entry.workload,
            even_strict=assignment.reason == MISCONFIGURED,
        ):
            step.progressed = True


def drain(cache: Cache) -> list[Evict]:
    """Stopped queues with HoldAndDrain (and the like) give back what they admitted."""
    evicted: list[Evict] = []
    for key in sorted(cache.to_drain):
        holder = cache.admitted[key]
        why = cache.drain_reason(holder)
        if why is not None and not holder.evicting:
            holder.evicting = True
            evicted.append(Evict(holder.workload, why[0], None, why[1]))
    cache.to_drain.clear()
    return evicted


def _nominate_by_search(
    scheduler: Scheduler,
    cq: ClusterQueue,
    node: QuotaNode,
    queue: ClusterQueueQueue,
    workload: Workload,
    memo: ClassMemo | None,
    plan: QuickPlan | None,
    state: State | None,
    may_preempt: bool,
    start: ScanStart | None = None,
) -> Entry:
    """Step 3 for a head the scheduler judges with preemption's oracle (and partial
    admission's shrinking): its entry, with the targets preemption would evict."""
    cache = scheduler._cache
    oracle, targets, found = _preemption_questions(scheduler, cq, node, workload, cache.admitted_in)

    def search(candidate: Workload, plan: QuickPlan | None = None) -> Assignment:
        # A plan with one flavor per group is judged without the search (first judgements).
        rule, flavors, fair = oracle if may_preempt else None, cache.flavors, scheduler.fair_sharing
        judged = (
            None
            if plan is None
            else judge_by_plan(plan, candidate, cq, flavors, node, rule, fair_sharing=fair)
        )
        if judged is not None:
            return judged
        return search_flavors(candidate, cq, flavors, node, rule, fair_sharing=fair, start=start)

    assignment = search(workload, plan)
    entry = Entry(cq, node, queue, workload, assignment, (), None, memo)
    if assignment.mode in PREEMPTING:
        entry.targets = targets(assignment.usage, assignment.needs_preemption)
        if entry.targets and scheduler.topology is not None:
            entry.targets = placeable_targets(
                entry,
                entry.targets,
                scheduler.topology.fits_without,
                cache,
                _victim_usage(scheduler._queues, cq),
                target_search(scheduler.fair_sharing, scheduler.fair_preemption),
            )
        if not entry.targets:
            entry.assignment = assignment._replace(mode=NO_CANDIDATES)
    if (
        entry.assignment.mode != FIT
        and not entry.targets
        and scheduler.partial_admission
        and may_shrink(workload)
    ):
        # Kueue shrinks a workload only once neither its whole count nor preemption admits it.
        _shrink(entry, search, targets)
    if memo is not None and not found and entry.assignment.mode <= NO_CANDIDATES:
        # Judged without looking at admitted workloads one by one: the same state gives
        # the same verdict (the search changed nothing: no targets, no trial removals).
        if state is None:
            state = _verdict_state(scheduler._cache, cq, node, workload, scheduler.fair_sharing)
        memo.verdict = new_tuple(Verdict, (state, assignment))
    return entry


_Asked = dict[tuple[object, ...], list[Target]]  # preemption's answers, by request


def _preemption_questions(
    scheduler: Scheduler, cq: ClusterQueue, node: QuotaNode, workload: Workload,
    admitted_in: AdmittedIn,
) -> tuple[PreemptionOracle, slices.TargetsFor, _Asked]:  # fmt: skip
    """Preemption's oracle for a head's flavor search, whom it would evict for a request
    (chosen from `admitted_in`), and what was asked so far (empty: nobody looked)."""
    cache = scheduler._cache
    found: _Asked = {}
    lowest, fair = cache.lowest_priority, scheduler.fair_sharing

    def targets(  # memoised: the oracle and the final nomination may ask the same question
        request: Mapping[FlavorResource, int], need: frozenset[FlavorResource]
    ) -> list[Target]:
        key = (tuple(sorted(request.items())), need)
        if key not in found:
            found[key] = scheduler._targets(workload, cq, node, request, need, admitted_in)
        return found[key]

    def oracle(fr: FlavorResource, amount: int) -> tuple[Mode, int] | None:
        need = frozenset((fr,))
        if not may_have_candidates(workload, cq, node, need, lowest, fair_sharing=fair):
            return None
        return preemption_verdict(node, fr, amount, targets({fr: amount}, need))

    return oracle, targets, found


def judge_without_oracle(
    cache: Cache,
    cq: ClusterQueue,
    node: QuotaNode,
    workload: Workload,
    plan: QuickPlan | None,
    *,
    may_preempt: bool,
    fair_sharing: bool,
    partial_admission: bool,
) -> Assignment | None:
    """The verdict on a head of a sole-flavor plan for which the pre-check finds nothing to
    preempt: the oracle would answer None for every flavor-resource, so the plan's flavors are
    judged without it, its closures and its memo of targets (most first judgements never need
    them). None where the search with the oracle must judge."""
    if plan is None or not plan.sole_flavors or (partial_admission and may_shrink(workload)):
        return None
    if may_preempt and may_have_candidates(
        workload, cq, node, plan.usage, cache.lowest_priority, fair_sharing=fair_sharing
    ):
        return None
    return judge_by_plan(plan, workload, cq, cache.flavors, node, fair_sharing=fair_sharing)


def class_plan(
    memo: ClassMemo | None, workload: Workload, cq: ClusterQueue, cache: Cache
) -> QuickPlan | None:
    """quick_fit's plan for a workload of one pod set, kept in its class's memo (if any) for
    the configuration generation it was made in."""
    plan = quick_plan(workload.pod_sets[0], cq, cache.flavors)
    if memo is not None:
        memo.plan, memo.plan_generation = plan, cache.generation
    return plan


def admission_of(entry: Entry) -> Admission:
    """The admission an entry's assignment amounts to. Members of an equivalence class
    have equal pod sets, so one admitted to the same flavors gets an equal admission:
    the last one built for the class is reused (frozen, it is shared safely)."""
    workload, assignment, memo = entry.workload, entry.assignment, entry.memo
    if assignment.counts or memo is None:
        # Shrunk: an admission of the class's full counts is not this one's, and this
        # one is not the class's.
        return assignment.admission(entry.cq.name, workload)
    kept = memo.admission
    if kept is not None and kept.cluster_queue == entry.cq.name:
        # The same plan's flavors are the same tuple: equal without comparing.
        flavors, kept_flavors = assignment.pod_set_flavors, memo.admission_flavors
        if kept_flavors is flavors or kept_flavors == flavors:
            return kept
    admission = assignment.admission(entry.cq.name, workload)
    memo.admission = admission
    memo.admission_flavors = assignment.pod_set_flavors
    return admission


def _not_selected(
    cq: ClusterQueue, node: QuotaNode, queue: ClusterQueueQueue, workload: Workload
) -> Entry:
    hint = (
        " (its namespaceSelector is null, which selects no namespace; {} selects all)"
        if cq.namespace_selector is None
        else ""
    )
    message = f"namespace {workload.namespace} is not selected by ClusterQueue {cq.name}{hint}"
    return Entry(
        cq, node, queue, workload, Assignment(NO_FIT, reason=MISCONFIGURED, message=message)
    )


def _classical(entries: list[Entry]) -> list[Entry]:
    # Kueue's order: how high in the cohort tree each must borrow (0: not at all), priority, FIFO.
    return sorted(entries, key=_CLASSICAL_ORDER)


# The key of Kueue's classical order, read in C (no Python call per entry).
_CLASSICAL_ORDER = attrgetter("assignment.borrowing_level", "workload.order")


def _victim_usage(
    queues: QueueManager, cq: ClusterQueue
) -> Callable[[AdmittedWorkload], float] | None:
    """With admission fair sharing in the ClusterQueue: the usage of a victim's LocalQueue."""
    if queues.ledger is None or not cq.admission_fair_sharing:
        return None
    usage = queues.lq_usage
    return lambda victim: usage(f"{victim.workload.namespace}/{victim.workload.queue_name}")


def _fair_order(entries: list[Entry]) -> Iterator[Entry]:
    """Kueue's fair-sharing tournament, re-run after every entry (admissions move shares)."""
    remaining = list(entries)
    while remaining:
        best = min(remaining, key=_fair_key)
        remaining.remove(best)
        yield best


def _fair_key(entry: Entry) -> tuple[object, ...]:
    # Compare at every level from the root down: first the subtree that would borrow
    # least after admission, then lower share, then priority and FIFO.
    path = [entry.node, *entry.node.ancestors()][::-1]
    shares: list[tuple[bool, float]] = []
    for child in path[1:]:
        share = dominant_resource_share(child, entry.assignment.usage)
        shares.append((share > 0, share))
    return (path[0].name, tuple(shares), entry.workload.order)


def _shrink(
    entry: Entry,
    search: Callable[[Workload], Assignment],
    targets: Callable[[Mapping[FlavorResource, int], frozenset[FlavorResource]], list[Target]],
) -> None:
    """Partial admission: the entry takes the largest counts that fit, or that fit once
    preemption makes room, when there are such counts; otherwise it is left as it is."""
    workload = entry.workload

    def fits(counts: tuple[int, ...]) -> tuple[Assignment, list[Target]] | None:
        assignment = search(scaled(workload, counts))
        if assignment.mode == FIT:
            return assignment, []
        if assignment.mode in PREEMPTING:
            victims = targets(assignment.usage, assignment.needs_preemption)
            if victims:
                return assignment, victims
        return None

    found = largest_fit(workload.pod_sets, fits)
    if found is not None:
        counts, (assignment, victims) = found
        entry.assignment = assignment._replace(counts=counts)
        entry.targets = victims

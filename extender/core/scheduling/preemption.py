"""Preemption: which admitted workloads to evict so a pending one fits (Kueue's minimal set)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from extender.core.api.models import (
    RECLAIM_ANY,
    RECLAIM_LOWER_PRIORITY,
    RECLAIM_NEVER,
    WITHIN_LOWER_OR_NEWER_EQUAL,
    WITHIN_LOWER_PRIORITY,
    WITHIN_NEVER,
    Admission,
    ClusterQueue,
    FlavorResource,
    WithinClusterQueue,
    Workload,
)
from extender.core.scheduling.fair_order import TargetOrdering
from extender.core.scheduling.quota import (
    QuotaNode,
    add_usage,
    available,
    borrowing_cluster_queues,
    is_borrowing,
    within_nominal,
)

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"


@dataclass(slots=True)
class AdmittedWorkload:
    """A workload holding quota: what it holds, where, and since when."""

    workload: Workload
    admission: Admission
    usage: Mapping[FlavorResource, int]
    node: QuotaNode
    reserved_at: float
    evicting: bool = False

    @property
    def priority(self) -> int:
        """The workload's priority."""
        return self.workload.priority


@dataclass(frozen=True, slots=True)
class Target:
    """One workload to evict, and the Preempted condition reason Kueue would give."""

    victim: AdmittedWorkload
    reason: str


AdmittedIn = Callable[[str], Iterable[AdmittedWorkload]]
"""The admitted workloads of a ClusterQueue, by name."""

VictimUsage = Callable[[AdmittedWorkload], float]
"""Admission fair sharing: the usage of the LocalQueue an admitted workload came through."""

LowestPriority = Callable[[str], "int | None"]
"""The lowest priority admitted in a ClusterQueue (None when it admitted nothing)."""


AlsoFits = Callable[[list[AdmittedWorkload]], bool]
"""Whether a preemptor fits, besides its quota, were these candidates gone."""


class TargetSearch(Protocol):
    """Classical or fair-sharing preemption: whom to evict so that a request fits."""

    def __call__(
        self,
        preemptor: Workload,
        cq: ClusterQueue,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        need: frozenset[FlavorResource],
        admitted_in: AdmittedIn,
        lowest_priority: LowestPriority | None = None,
        lq_usage: VictimUsage | None = None,
        also_fits: AlsoFits | None = None,
    ) -> list[Target]: ...


def _may_hold_lower(
    lowest: LowestPriority | None, cq_name: str, priority: int, equal: bool
) -> bool:
    """Cheap test: could this queue hold a workload below (or at) the priority at all?"""
    if lowest is None:
        return True
    floor = lowest(cq_name)
    return floor is not None and (floor < priority or (equal and floor == priority))


def fits(node: QuotaNode, request: Mapping[FlavorResource, int], allow_borrowing: bool) -> bool:
    """Whether the request fits the node now, optionally without borrowing."""
    for fr, amount in request.items():
        if not allow_borrowing and node.usage.get(fr, 0) + amount > node.subtree.get(fr, 0):
            return False
        if available(node, fr) < amount:
            return False
    return True


def _uses(candidate: AdmittedWorkload, need: frozenset[FlavorResource]) -> bool:
    usage = candidate.usage
    if len(need) == 1:
        for fr in need:
            return fr in usage
    return any(fr in need for fr in usage)


def _within_allows(
    policy: WithinClusterQueue, candidate: AdmittedWorkload, preemptor: Workload, queue_time: float
) -> bool:
    if policy is WITHIN_LOWER_PRIORITY:
        return candidate.priority < preemptor.priority
    if policy is WITHIN_LOWER_OR_NEWER_EQUAL:
        return candidate.priority < preemptor.priority or (
            candidate.priority == preemptor.priority
            and candidate.workload.creation_time > queue_time
        )
    return False


def may_preempt_at_all(cq: ClusterQueue, node: QuotaNode) -> bool:
    """Whether the ClusterQueue's policies let it preempt anything: within itself, or in a
    cohort it belongs to."""
    policy = cq.preemption
    return policy.within_cluster_queue is not WITHIN_NEVER or (
        node.parent is not None and policy.reclaim_within_cohort is not RECLAIM_NEVER
    )


def may_preempt_within(cq: ClusterQueue, priority: int, lowest: int | None) -> bool:
    """Cheap test: could the ClusterQueue's own admitted workloads (the lowest of whose
    priorities is `lowest`) hold a candidate for a preemptor of this priority?"""
    within = cq.preemption.within_cluster_queue
    if within is WITHIN_NEVER or lowest is None:
        return False
    return lowest < priority or (within is WITHIN_LOWER_OR_NEWER_EQUAL and lowest == priority)


def may_have_candidates(
    preemptor: Workload,
    cq: ClusterQueue,
    node: QuotaNode,
    need: Iterable[FlavorResource],
    lowest_priority: LowestPriority,
    *,
    fair_sharing: bool = False,
) -> bool:
    """False only when `candidates` is sure to find none: cheap enough for every head."""
    if may_preempt_within(cq, preemptor.priority, lowest_priority(cq.name)):
        return True
    if node.parent is None or cq.preemption.reclaim_within_cohort is RECLAIM_NEVER:
        return False
    if fair_sharing:
        return True
    borrowers = node.root().borrowers
    for fr in need:  # a loop, not any(): every head that does not fit asks
        others = borrowers.get(fr)
        if others and (len(others) > 1 or node not in others):
            return True
    return False


def candidates(
    preemptor: Workload,
    cq: ClusterQueue,
    node: QuotaNode,
    need: frozenset[FlavorResource],
    admitted_in: AdmittedIn,
    *,
    fair_sharing: bool = False,
    lowest_priority: LowestPriority | None = None,
    lq_usage: VictimUsage | None = None,
) -> list[AdmittedWorkload]:
    """Workloads that the ClusterQueue's policies allow to be preempted, in Kueue's order
    (with admission fair sharing, its own ClusterQueue's from the busiest LocalQueue first)."""
    found: list[AdmittedWorkload] = []
    within = cq.preemption.within_cluster_queue
    equal_too = within is WITHIN_LOWER_OR_NEWER_EQUAL
    if within is not WITHIN_NEVER and _may_hold_lower(
        lowest_priority, cq.name, preemptor.priority, equal_too
    ):
        for candidate in admitted_in(cq.name):
            if _uses(candidate, need) and _within_allows(
                within, candidate, preemptor, preemptor.creation_time
            ):
                found.append(candidate)
    reclaim = cq.preemption.reclaim_within_cohort
    if node.parent is not None and reclaim is not RECLAIM_NEVER:
        root = node.root()
        if fair_sharing:
            others: Iterable[QuotaNode] = root.cluster_queues()
        else:
            # Only queues that borrow a needed flavor-resource may be reclaimed from.
            found_borrowers: dict[str, QuotaNode] = {}
            for fr in need:
                for borrower in borrowing_cluster_queues(root, fr):
                    found_borrowers[borrower.name] = borrower
            others = [found_borrowers[n] for n in sorted(found_borrowers)]
        any_priority = reclaim is RECLAIM_ANY
        for other in others:
            if other is node:
                continue
            if not any_priority and not _may_hold_lower(
                lowest_priority, other.name, preemptor.priority, False
            ):
                continue
            for candidate in admitted_in(other.name):
                if not _uses(candidate, need):
                    continue
                if reclaim is RECLAIM_ANY or candidate.priority < preemptor.priority:
                    found.append(candidate)
    found.sort(
        key=lambda c: (
            not c.evicting,
            c.node is node,
            -lq_usage(c) if lq_usage is not None and c.node is node else 0.0,
            c.priority,
            -c.reserved_at,
            c.workload.uid,
        )
    )
    return found


def _fill_back(
    node: QuotaNode,
    request: Mapping[FlavorResource, int],
    removed: list[AdmittedWorkload],
    allow_borrowing: bool,
    also_fits: AlsoFits | None = None,
) -> list[AdmittedWorkload]:
    """Put back every removed workload that is not needed after all; restore the tree.
    Returns the targets."""
    targets = list(removed)
    for candidate in reversed(removed[:-1]):
        add_usage(candidate.node, candidate.usage, 1)
        without = [t for t in targets if t is not candidate]
        if fits(node, request, allow_borrowing) and (also_fits is None or also_fits(without)):
            targets.remove(candidate)
        else:
            add_usage(candidate.node, candidate.usage, -1)
    for candidate in targets:
        add_usage(candidate.node, candidate.usage, 1)
    return targets


# How a candidate may be preempted (Kueue's preemption variants), and the reason it is given.
_WITHIN_CLUSTER_QUEUE = 0
_HIERARCHICAL_RECLAIM = 1  # the preemptor is closer to the quota the candidate uses
_RECLAIM_WITHOUT_BORROWING = 2  # only if the preemptor then borrows nothing
_RECLAIM_WHILE_BORROWING = 3
_VARIANT_REASONS = (
    IN_CLUSTER_QUEUE,
    IN_COHORT_RECLAMATION,
    IN_COHORT_RECLAMATION,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
)


# A candidate as the search keeps it: the workload, how it may be preempted, and the cohort
# under which it and the preemptor meet (None in the preemptor's own ClusterQueue). A plain
# tuple: one is built per candidate per search.
_Candidate = tuple[AdmittedWorkload, int, "QuotaNode | None"]


def _fits_in_quota(
    node: QuotaNode, request: Mapping[FlavorResource, int]
) -> tuple[bool, dict[FlavorResource, int]]:
    """Whether the request fits the node's own subtree quota, and what of it is left once
    the node's unused guaranteed quota is taken (Kueue's QuantitiesFitInQuota)."""
    fit = True
    remaining: dict[FlavorResource, int] = {}
    for fr, amount in request.items():
        used = node.usage.get(fr, 0)
        if used + amount > node.subtree.get(fr, 0):
            fit = False
        remaining[fr] = max(0, amount - max(0, node.local.get(fr, 0) - used))
    return fit, remaining


def _variant(
    preemptor: Workload,
    cq: ClusterQueue,
    candidate: AdmittedWorkload,
    advantage: bool,
    threshold: int | None,
) -> int | None:
    """How a candidate of another ClusterQueue may be preempted, None if not at all."""
    reclaim = cq.preemption.reclaim_within_cohort
    if reclaim is RECLAIM_LOWER_PRIORITY and candidate.priority >= preemptor.priority:
        return None
    if advantage:
        return _HIERARCHICAL_RECLAIM
    if cq.preemption.borrow_within_cohort == "Never":
        return _RECLAIM_WITHOUT_BORROWING
    if candidate.priority >= preemptor.priority or (
        threshold is not None and candidate.priority > threshold
    ):
        return _RECLAIM_WITHOUT_BORROWING
    return _RECLAIM_WHILE_BORROWING


def _cohort_candidates(
    preemptor: Workload,
    cq: ClusterQueue,
    node: QuotaNode,
    request: Mapping[FlavorResource, int],
    need: frozenset[FlavorResource],
    admitted_in: AdmittedIn,
    lowest_priority: LowestPriority | None,
) -> tuple[list[_Candidate], list[_Candidate]]:
    """Candidates in other ClusterQueues: (over which the preemptor has a hierarchical
    advantage, over which only priority decides). Walking up from the preemptor, a cohort
    whose quota holds the request gives it the advantage over everything below that cohort;
    subtrees within their own quota of what is needed are not looked into."""
    hierarchy: list[_Candidate] = []
    by_priority: list[_Candidate] = []
    if node.parent is None or cq.preemption.reclaim_within_cohort is RECLAIM_NEVER:
        return hierarchy, by_priority
    borrowers_of = node.root().borrowers
    if not any(borrowers_of.get(fr) for fr in need):
        return hierarchy, by_priority  # only a ClusterQueue over its quota has candidates
    threshold = cq.preemption.max_priority_threshold
    advantage, remaining = _fits_in_quota(node, request)
    previous: QuotaNode = node
    lower_only = cq.preemption.reclaim_within_cohort is RECLAIM_LOWER_PRIORITY
    for subtree_root in node.ancestors():
        found = hierarchy if advantage else by_priority
        if subtree_root.height == 1:
            # Only ClusterQueues below: those over their quota are the tree's borrowers.
            borrowers = root_borrowers(subtree_root, need)
            stack = [c for c in borrowers if c.parent is subtree_root and c is not node]
        else:
            stack = [c for c in subtree_root.children if c is not previous]
        while stack:
            child = stack.pop()
            if within_nominal(child, need):
                continue
            if child.is_cohort:
                stack.extend(child.children)
                continue
            if child is node or (
                lower_only
                and not _may_hold_lower(lowest_priority, child.name, preemptor.priority, False)
            ):
                continue
            for candidate in admitted_in(child.name):
                if not _uses(candidate, need):
                    continue
                variant = _variant(preemptor, cq, candidate, advantage, threshold)
                if variant is not None:
                    found.append((candidate, variant, subtree_root))
        fit, remaining = _fits_in_quota(subtree_root, remaining)
        advantage = advantage or fit
        previous = subtree_root
    return hierarchy, by_priority


def root_borrowers(node: QuotaNode, need: frozenset[FlavorResource]) -> list[QuotaNode]:
    """The ClusterQueues of node's tree that use more than their quota of any of need."""
    root = node.root()
    if len(need) == 1:
        return list(borrowing_cluster_queues(root, next(iter(need))))
    found: dict[str, QuotaNode] = {}
    for fr in need:
        for borrower in borrowing_cluster_queues(root, fr):
            found[borrower.name] = borrower
    return list(found.values())


def _by_rank(candidate: _Candidate) -> tuple[int, float, str]:
    victim = candidate[0]
    return victim.workload.priority, -victim.reserved_at, victim.workload.uid


def _order(*groups: list[_Candidate]) -> list[_Candidate]:
    """Kueue's candidate order: those already being evicted first; then by group (in the
    order given); within a group lower priority, then the most recently admitted, then uid."""
    for group in groups:
        group.sort(key=_by_rank)
    ordered = [c for group in groups for c in group]
    if any(c[0].evicting for c in ordered):
        ordered.sort(key=lambda c: not c[0].evicting)  # stable: the rest keeps its order
    return ordered


def _still_valid(
    victim: AdmittedWorkload,
    variant: int,
    lca: QuotaNode | None,
    need: frozenset[FlavorResource],
    borrowing: bool,
) -> bool:
    """Whether a candidate of another ClusterQueue may still be taken, given those removed
    before it: only while its queue (and each cohort up to where it meets the preemptor)
    uses more than its own quota."""
    if borrowing and variant == _RECLAIM_WITHOUT_BORROWING:
        return False
    if within_nominal(victim.node, need):
        return False
    for ancestor in victim.node.ancestors():
        if ancestor is lca:
            break
        if within_nominal(ancestor, need):
            return False
    return True


def classical_targets(
    preemptor: Workload,
    cq: ClusterQueue,
    node: QuotaNode,
    request: Mapping[FlavorResource, int],
    need: frozenset[FlavorResource],
    admitted_in: AdmittedIn,
    lowest_priority: LowestPriority | None = None,
    lq_usage: VictimUsage | None = None,
    also_fits: AlsoFits | None = None,
) -> list[Target]:
    """Kueue's classical preemption: take candidates in order until the workload fits, then
    put back every one that is not needed after all. `also_fits` is what must hold besides
    the quota once the removed candidates are gone (a topology placement).

    Candidates come in three groups, each in Kueue's order (those already being evicted go
    first): other ClusterQueues' workloads the preemptor has a hierarchical advantage over,
    other ClusterQueues' workloads priority lets it take, its own ClusterQueue's. The search
    runs allowing the preemptor to borrow afterwards, not allowing it, or both in an order
    that depends on borrowWithinCohort and on whether the queue is under its nominal quota.
    """
    same_queue: list[_Candidate] = []
    within = cq.preemption.within_cluster_queue
    if within is not WITHIN_NEVER and _may_hold_lower(
        lowest_priority,
        cq.name,
        preemptor.priority,
        within is WITHIN_LOWER_OR_NEWER_EQUAL,
    ):
        for candidate in admitted_in(cq.name):
            if _uses(candidate, need) and _within_allows(
                within, candidate, preemptor, preemptor.creation_time
            ):
                same_queue.append((candidate, _WITHIN_CLUSTER_QUEUE, None))
    hierarchy, by_priority = _cohort_candidates(
        preemptor, cq, node, request, need, admitted_in, lowest_priority
    )
    if not (same_queue or hierarchy or by_priority):
        return []
    if lq_usage is not None:  # admission fair sharing: the busiest LocalQueue's first
        same_queue.sort(key=lambda c: (-lq_usage(c[0]), *_by_rank(c)))
        ordered = _order(hierarchy, by_priority) + same_queue
        if any(c[0].evicting for c in ordered):
            ordered.sort(key=lambda c: not c[0].evicting)
    else:
        ordered = _order(hierarchy, by_priority, same_queue)

    forbidden = cq.preemption.borrow_within_cohort == "Never"
    under_nominal = all(node.usage.get(fr, 0) < node.nominal(fr) for fr in need)
    if not (hierarchy or by_priority) or (forbidden and not under_nominal):
        attempts: tuple[bool, ...] = (True,)
    elif forbidden and not hierarchy:
        attempts = (False, True)
    else:
        attempts = (True, False)

    for borrowing in attempts:
        removed: list[AdmittedWorkload] = []
        variant_of: dict[int, int] = {}
        for victim, variant, lca in ordered:
            if victim.node is not node and not _still_valid(victim, variant, lca, need, borrowing):
                continue
            add_usage(victim.node, victim.usage, -1)
            removed.append(victim)
            variant_of[id(victim)] = variant
            if fits(node, request, borrowing) and (also_fits is None or also_fits(removed)):
                kept = _fill_back(node, request, removed, borrowing, also_fits)
                return [Target(v, _VARIANT_REASONS[variant_of[id(v)]]) for v in kept]
        for victim in removed:
            add_usage(victim.node, victim.usage)
    return []


# fairSharing.preemptionStrategies (Kueue's apis/config/v1beta2 PreemptionStrategy).
LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
DEFAULT_STRATEGIES = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


@dataclass(frozen=True, slots=True)
class FairPreemption:
    """Fair-sharing preemption as Kueue's Configuration and feature gates set it.

    `strategies` is fairSharing.preemptionStrategies: the first is tried on every candidate,
    a second (only LessThanInitialShare may be second) on those the first turned down.
    `within_nominal` is the FairSharingPreemptWithinNominal gate (Beta, on): a preemptor whose
    ClusterQueue stays within its nominal quota of what needs room, the new workload counted,
    takes from borrowing ClusterQueues whatever their shares (Kueue's runFirstFsStrategy)."""

    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    within_nominal: bool = True

    def __call__(
        self,
        preemptor: Workload,
        cq: ClusterQueue,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        need: frozenset[FlavorResource],
        admitted_in: AdmittedIn,
        lowest_priority: LowestPriority | None = None,
        lq_usage: VictimUsage | None = None,
        also_fits: AlsoFits | None = None,
    ) -> list[Target]:
        """The targets fair_sharing_targets finds under this policy (a TargetSearch)."""
        return fair_sharing_targets(
            preemptor, cq, node, request, need, admitted_in, lowest_priority, lq_usage,
            also_fits, policy=self,
        )  # fmt: skip


KUEUE_FAIR_PREEMPTION = FairPreemption()


def _passes(strategy: str, preemptor_share: float, before: float, after: float) -> bool:
    """Kueue's fairsharing strategies: S2-a compares with the target's share once the
    candidate is gone, S2-b with its share before."""
    if strategy == LESS_THAN_INITIAL_SHARE:
        return preemptor_share < before
    return preemptor_share <= after


def fair_sharing_targets(
    preemptor: Workload,
    cq: ClusterQueue,
    node: QuotaNode,
    request: Mapping[FlavorResource, int],
    need: frozenset[FlavorResource],
    admitted_in: AdmittedIn,
    lowest_priority: LowestPriority | None = None,
    lq_usage: VictimUsage | None = None,
    also_fits: AlsoFits | None = None,
    *,
    policy: FairPreemption = KUEUE_FAIR_PREEMPTION,
) -> list[Target]:
    """Fair-sharing preemption (Kueue's fairPreemptions, runFirstFsStrategy and
    runSecondFsStrategy), with the incoming workload's usage counted while shares are asked.

    Queues are taken from in the order of Kueue's tournament (fair_order.py). The preemptor's
    own ClusterQueue's candidates are taken as they come. Another queue's are taken
    unconditionally while the preemptor stays within its nominal quota (policy.within_nominal),
    else when the first strategy lets them, comparing shares at the two queues'
    almost-least-common ancestors; with a second strategy, what the first turned down gets one
    more chance, one workload per queue. `also_fits` is what must hold besides the quota once
    the removed candidates are gone (a topology placement), as for classical preemption.
    """
    pool = [
        c
        for c in candidates(
            preemptor,
            cq,
            node,
            need,
            admitted_in,
            fair_sharing=True,
            lowest_priority=lowest_priority,
            lq_usage=lq_usage,
        )
        # Kueue's findCandidates: another ClusterQueue only while it borrows what is needed.
        if c.node is node or is_borrowing(c.node, need)
    ]
    if not pool:
        return []
    # Kueue's queueWithinNominalInResourcesNeedingPreemption, with the new workload counted.
    within_nominal = policy.within_nominal and all(
        node.usage.get(fr, 0) + request.get(fr, 0) <= node.nominal(fr) for fr in need
    )
    first = policy.strategies[0] if policy.strategies else LESS_THAN_OR_EQUAL_TO_FINAL_SHARE
    removed: list[AdmittedWorkload] = []
    reasons: dict[int, str] = {}

    def take(candidate: AdmittedWorkload, reason: str) -> bool:
        add_usage(candidate.node, candidate.usage, -1)
        removed.append(candidate)
        reasons[id(candidate)] = reason
        add_usage(node, request, -1)  # Kueue's workloadFitsForFairSharing
        try:
            return fits(node, request, True) and (also_fits is None or also_fits(removed))
        finally:
            add_usage(node, request, 1)

    add_usage(node, request, 1)  # Kueue's SimulateUsageAddition
    try:
        fit = False
        retry: list[AdmittedWorkload] = []
        order = TargetOrdering(node, pool)
        while not fit and (target := order.next_queue()) is not None:
            candidate = order.pop(target)
            if target is node:
                fit = take(candidate, IN_CLUSTER_QUEUE)
            elif within_nominal:
                fit = take(candidate, IN_COHORT_RECLAMATION)
            else:
                preemptor_share, before = order.shares(target)
                after = order.target_share_after(target, candidate)
                if _passes(first, preemptor_share, before, after):
                    fit = take(candidate, IN_COHORT_FAIR_SHARING)
                else:
                    retry.append(candidate)
        if not fit and len(policy.strategies) > 1 and retry:
            # Kueue's runSecondFsStrategy (only LessThanInitialShare may come second): one
            # workload per queue at most.
            second = TargetOrdering(node, retry)
            while not fit and (target := second.next_queue()) is not None:
                preemptor_share, before = second.shares(target)
                candidate = second.pop(target)
                second.drop(target)
                if preemptor_share < before:
                    fit = take(candidate, IN_COHORT_FAIR_SHARING)
    finally:
        add_usage(node, request, -1)
    if not fit:
        for candidate in removed:
            add_usage(candidate.node, candidate.usage, 1)
        return []
    victims = _fill_back(node, request, removed, True, also_fits)
    return [Target(v, reasons[id(v)]) for v in victims]

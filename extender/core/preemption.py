"""Preemption: which admitted workloads to evict so a pending one fits (Kueue's minimal set)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from extender.core.fairsharing import dominant_resource_share
from extender.core.models import (
    Admission,
    ClusterQueue,
    FlavorResource,
    ReclaimWithinCohort,
    WithinClusterQueue,
    Workload,
)
from extender.core.quota import (
    QuotaNode,
    add_usage,
    available,
    borrowing_cluster_queues,
    is_borrowing,
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

LowestPriority = Callable[[str], "int | None"]
"""The lowest priority admitted in a ClusterQueue (None when it admitted nothing)."""


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
    return any(fr in need for fr in candidate.usage)


def _within_allows(
    policy: WithinClusterQueue, candidate: AdmittedWorkload, preemptor: Workload, queue_time: float
) -> bool:
    if policy is WithinClusterQueue.LOWER_PRIORITY:
        return candidate.priority < preemptor.priority
    if policy is WithinClusterQueue.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return candidate.priority < preemptor.priority or (
            candidate.priority == preemptor.priority
            and candidate.workload.creation_time > queue_time
        )
    return False


def may_have_candidates(
    preemptor: Workload,
    cq: ClusterQueue,
    node: QuotaNode,
    need: frozenset[FlavorResource],
    lowest_priority: LowestPriority,
    *,
    fair_sharing: bool = False,
) -> bool:
    """False only when `candidates` is sure to find none: cheap enough for every head."""
    within = cq.preemption.within_cluster_queue
    if within is not WithinClusterQueue.NEVER and _may_hold_lower(
        lowest_priority,
        cq.name,
        preemptor.priority,
        within is WithinClusterQueue.LOWER_OR_NEWER_EQUAL_PRIORITY,
    ):
        return True
    if node.parent is None or cq.preemption.reclaim_within_cohort is ReclaimWithinCohort.NEVER:
        return False
    if fair_sharing:
        return True
    root = node.root()
    return any(
        borrower is not node for fr in need for borrower in borrowing_cluster_queues(root, fr)
    )


def candidates(
    preemptor: Workload,
    cq: ClusterQueue,
    node: QuotaNode,
    need: frozenset[FlavorResource],
    admitted_in: AdmittedIn,
    *,
    fair_sharing: bool = False,
    lowest_priority: LowestPriority | None = None,
) -> list[AdmittedWorkload]:
    """Workloads that the ClusterQueue's policies allow to be preempted, in Kueue's order."""
    found: list[AdmittedWorkload] = []
    within = cq.preemption.within_cluster_queue
    equal_too = within is WithinClusterQueue.LOWER_OR_NEWER_EQUAL_PRIORITY
    if within is not WithinClusterQueue.NEVER and _may_hold_lower(
        lowest_priority, cq.name, preemptor.priority, equal_too
    ):
        for candidate in admitted_in(cq.name):
            if _uses(candidate, need) and _within_allows(
                within, candidate, preemptor, preemptor.creation_time
            ):
                found.append(candidate)
    reclaim = cq.preemption.reclaim_within_cohort
    if node.parent is not None and reclaim is not ReclaimWithinCohort.NEVER:
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
        any_priority = reclaim is ReclaimWithinCohort.ANY
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
                if reclaim is ReclaimWithinCohort.ANY or candidate.priority < preemptor.priority:
                    found.append(candidate)
    found.sort(
        key=lambda c: (
            not c.evicting,
            c.node is node,
            c.priority,
            -c.reserved_at,
            c.workload.uid,
        )
    )
    return found


def _borrow_threshold(cq: ClusterQueue, preemptor: Workload) -> int | None:
    if cq.preemption.borrow_within_cohort != "LowerPriority":
        return None
    threshold = preemptor.priority
    limit = cq.preemption.max_priority_threshold
    if limit is not None and limit < threshold:
        threshold = limit + 1
    return threshold


def _minimal(
    node: QuotaNode,
    request: Mapping[FlavorResource, int],
    need: frozenset[FlavorResource],
    pool: list[AdmittedWorkload],
    allow_borrowing: bool,
    threshold: int | None,
) -> list[AdmittedWorkload]:
    removed: list[AdmittedWorkload] = []
    fit = False
    for candidate in pool:
        if candidate.node is not node:
            if not is_borrowing(candidate.node, need):
                continue
            if threshold is not None and candidate.priority >= threshold:
                allow_borrowing = False
        add_usage(candidate.node, candidate.usage, -1)
        removed.append(candidate)
        if fits(node, request, allow_borrowing):
            fit = True
            break
    if not fit:
        for candidate in removed:
            add_usage(candidate.node, candidate.usage, 1)
        return []
    return _fill_back(node, request, removed, allow_borrowing)


def _fill_back(
    node: QuotaNode,
    request: Mapping[FlavorResource, int],
    removed: list[AdmittedWorkload],
    allow_borrowing: bool,
) -> list[AdmittedWorkload]:
    """Put back every removed workload that is not needed after all; restore the tree."""
    targets = list(removed)
    for candidate in reversed(removed[:-1]):
        add_usage(candidate.node, candidate.usage, 1)
        if fits(node, request, allow_borrowing):
            targets.remove(candidate)
        else:
            add_usage(candidate.node, candidate.usage, -1)
    for candidate in targets:
        add_usage(candidate.node, candidate.usage, 1)
    return targets


def _reason(node: QuotaNode, victim: AdmittedWorkload, borrowing: bool) -> str:
    if victim.node is node:
        return IN_CLUSTER_QUEUE
    return IN_COHORT_RECLAIM_WHILE_BORROWING if borrowing else IN_COHORT_RECLAMATION


def classical_targets(
    preemptor: Workload,
    cq: ClusterQueue,
    node: QuotaNode,
    request: Mapping[FlavorResource, int],
    need: frozenset[FlavorResource],
    admitted_in: AdmittedIn,
    lowest_priority: LowestPriority | None = None,
) -> list[Target]:
    """Kueue's classical preemption: remove candidates until it fits, then fill back."""
    pool = candidates(preemptor, cq, node, need, admitted_in, lowest_priority=lowest_priority)
    if not pool:
        return []
    same_queue = [c for c in pool if c.node is node]
    if len(same_queue) == len(pool):
        victims = _minimal(node, request, need, pool, True, None)
        return [Target(v, IN_CLUSTER_QUEUE) for v in victims]
    threshold = _borrow_threshold(cq, preemptor)
    victims = _minimal(node, request, need, pool, threshold is not None, threshold)
    borrowing = threshold is not None
    if not victims:
        victims = _minimal(node, request, need, same_queue, True, None)
        borrowing = True
    return [Target(v, _reason(node, v, borrowing)) for v in victims]


def fair_sharing_targets(
    preemptor: Workload,
    cq: ClusterQueue,
    node: QuotaNode,
    request: Mapping[FlavorResource, int],
    need: frozenset[FlavorResource],
    admitted_in: AdmittedIn,
    lowest_priority: LowestPriority | None = None,
) -> list[Target]:
    """Fair-sharing preemption with Kueue's default strategies.

    First LessThanOrEqualToFinalShare: take from the ClusterQueue with the highest share
    while the preemptor's share with the new workload stays <= the target's share after
    the removal; then LessThanInitialShare: < the target's share before it.
    """
    pool = candidates(
        preemptor, cq, node, need, admitted_in, fair_sharing=True, lowest_priority=lowest_priority
    )
    if not pool:
        return []
    by_queue: dict[str, list[AdmittedWorkload]] = {}
    for candidate in pool:
        by_queue.setdefault(candidate.node.name, []).append(candidate)
    preemptor_share = dominant_resource_share(node, request)
    removed: list[AdmittedWorkload] = []
    retry: list[AdmittedWorkload] = []
    fit = False
    while not fit and by_queue:
        # The queue with the highest share gives up a workload first.
        name = max(by_queue, key=lambda n: (dominant_resource_share(by_queue[n][0].node), n))
        candidate = by_queue[name].pop(0)
        if not by_queue[name]:
            del by_queue[name]
        if candidate.node is not node:
            add_usage(candidate.node, candidate.usage, -1)
            after = dominant_resource_share(candidate.node)
            add_usage(candidate.node, candidate.usage, 1)
            if not preemptor_share <= after:
                retry.append(candidate)
                continue
        add_usage(candidate.node, candidate.usage, -1)
        removed.append(candidate)
        fit = fits(node, request, True)
    for candidate in retry:
        if fit:
            break
        if preemptor_share < dominant_resource_share(candidate.node):
            add_usage(candidate.node, candidate.usage, -1)
            removed.append(candidate)
            fit = fits(node, request, True)
    if not fit:
        for candidate in removed:
            add_usage(candidate.node, candidate.usage, 1)
        return []
    victims = _fill_back(node, request, removed, True)
    return [
        Target(v, IN_CLUSTER_QUEUE if v.node is node else IN_COHORT_FAIR_SHARING) for v in victims
    ]

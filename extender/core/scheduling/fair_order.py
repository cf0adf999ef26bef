"""Which ClusterQueue gives up a workload next in fair-sharing preemption (Kueue's tournament).

Kueue v0.19.2's TargetClusterQueueOrdering (pkg/scheduler/preemption/fairsharing/ordering.go):
from the root down, each cohort picks among its children the one with the highest dominant
resource share, a child cohort winning a tie against a ClusterQueue, until a ClusterQueue is
reached. A ClusterQueue (other than the preemptor's) that no longer borrows, or has no
candidate left, is pruned; so is a cohort off the preemptor's path that no longer borrows, and
a cohort whose children are all pruned. Shares are compared at the almost-least-common
ancestors of the preemptor and the target (least_common_ancestor.go, target.go).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Generic, Protocol, TypeVar

from extender.core.api.models import FlavorResource
from extender.core.scheduling.fairsharing import dominant_resource_share
from extender.core.scheduling.quota import QuotaNode, add_usage

_NONE = -1.0  # below every share (Kueue's NegativeDRS)


class Candidate(Protocol):
    """An admitted workload, as the ordering reads it: where it holds quota, and how much."""

    @property
    def node(self) -> QuotaNode: ...

    @property
    def usage(self) -> Mapping[FlavorResource, int]: ...


CandidateT = TypeVar("CandidateT", bound=Candidate)


class TargetOrdering(Generic[CandidateT]):
    """The candidates of one fair-sharing preemption, handed out queue by queue.

    The preemptor's ClusterQueue must already hold the incoming workload's usage (Kueue
    simulates its addition before ordering), so its share and its cohorts' count it."""

    def __init__(self, preemptor: QuotaNode, candidates: Iterable[CandidateT]) -> None:
        self.preemptor = preemptor
        self.path = {id(a) for a in preemptor.ancestors()}
        self.queues: dict[int, list[CandidateT]] = {}
        self.rank: dict[int, int] = {}
        for i, candidate in enumerate(candidates):
            self.queues.setdefault(id(candidate.node), []).append(candidate)
            self.rank[id(candidate)] = i
        self.pruned: set[int] = set()

    def next_queue(self) -> QuotaNode | None:
        """The ClusterQueue to take from next (None: no candidate is left)."""
        if self.preemptor.parent is None:
            own = self.preemptor
            return own if id(own) not in self.pruned and self.queues.get(id(own)) else None
        root = self.preemptor.root()
        while id(root) not in self.pruned:
            target = self._next(root)
            if target is not None:
                return target
        return None

    def _next(self, cohort: QuotaNode) -> QuotaNode | None:
        best_cq: QuotaNode | None = None
        best_cq_share = _NONE
        best_cohort: QuotaNode | None = None
        best_cohort_share = _NONE
        for child in cohort.children:
            if id(child) in self.pruned:
                continue
            share = dominant_resource_share(child)
            if child.is_cohort:
                if share <= 0 and id(child) not in self.path:
                    self.pruned.add(id(child))
                elif share >= best_cohort_share:
                    best_cohort, best_cohort_share = child, share
                continue
            if (share <= 0 and child is not self.preemptor) or not self.queues.get(id(child)):
                self.pruned.add(id(child))
            elif best_cq is None or share > best_cq_share:
                best_cq, best_cq_share = child, share
            elif share == best_cq_share and self._head_rank(child) < self._head_rank(best_cq):
                best_cq = child  # Kueue's CandidatesOrdering of the two first candidates
        if best_cohort is None and best_cq is None:
            self.pruned.add(id(cohort))
            return None
        if best_cohort is not None and best_cohort_share >= best_cq_share:
            return self._next(best_cohort)
        return best_cq

    def _head_rank(self, node: QuotaNode) -> int:
        return self.rank[id(self.queues[id(node)][0])]

    def has_workload(self, node: QuotaNode) -> bool:
        return bool(self.queues.get(id(node)))

    def pop(self, node: QuotaNode) -> CandidateT:
        """The queue's first candidate, taken out of the ordering."""
        return self.queues[id(node)].pop(0)

    def drop(self, node: QuotaNode) -> None:
        """No more candidates from this queue (Kueue's DropQueue)."""
        self.pruned.add(id(node))

    def shares(self, target: QuotaNode) -> tuple[float, float]:
        """(the preemptor's share, the target's share), each at its almost-least-common
        ancestor: the node just below the lowest cohort the two share."""
        lca = next(a for a in target.ancestors() if id(a) in self.path)
        return (
            dominant_resource_share(_almost(self.preemptor, lca)),
            dominant_resource_share(_almost(target, lca)),
        )

    def target_share_after(self, target: QuotaNode, candidate: CandidateT) -> float:
        """The target's share at its almost-least-common ancestor with the candidate gone."""
        add_usage(candidate.node, candidate.usage, -1)
        try:
            return self.shares(target)[1]
        finally:
            add_usage(candidate.node, candidate.usage, 1)


def _almost(node: QuotaNode, lca: QuotaNode) -> QuotaNode:
    below = node
    for ancestor in node.ancestors():
        if ancestor is lca:
            return below
        below = ancestor
    raise AssertionError(f"{lca.name} is not above {node.name}")

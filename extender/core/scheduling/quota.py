"""Quota arithmetic over the cohort tree, as Kueue's resource nodes compute it.

Every ClusterQueue and Cohort is a node. For each (flavor, resource):

* ``subtree``: own nominal quota plus what each child lends up (its subtree minus what it
  keeps for itself);
* ``local`` (Kueue's guaranteed quota): ``max(0, subtree - lendingLimit)`` when a lending
  limit is set, else 0 -- the part never lent out;
* ``usage``: for a ClusterQueue what its admitted workloads hold; for a cohort the sum of
  each child's usage above its local quota.

Usage changes propagate up the tree incrementally, so one admission costs O(depth).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from extender.core.api.models import ClusterQueue, Cohort, FlavorResource, ResourceQuota


@dataclass(eq=False, slots=True)
class QuotaNode:
    """One ClusterQueue or Cohort in the quota tree (mutable: usage changes)."""

    name: str
    is_cohort: bool
    quotas: Mapping[FlavorResource, ResourceQuota]
    fair_weight: Fraction = Fraction(1)
    parent: QuotaNode | None = None
    children: list[QuotaNode] = field(default_factory=list)
    subtree: dict[FlavorResource, int] = field(default_factory=dict)
    local: dict[FlavorResource, int] = field(default_factory=dict)
    usage: dict[FlavorResource, int] = field(default_factory=dict)
    # Filled in by QuotaTree.build: the ClusterQueues below this node, and (on roots only)
    # which ClusterQueues currently borrow each flavor-resource, kept by add_usage.
    leaves: list[QuotaNode] = field(default_factory=list)
    # Kueue's height of a cohort: 1 with only ClusterQueues below, one more than its highest
    # child cohort otherwise (0 for a ClusterQueue, or an empty cohort).
    height: int = 0
    limits: dict[FlavorResource, int] = field(default_factory=dict)
    borrowers: dict[FlavorResource, set[QuotaNode]] = field(default_factory=dict)
    # The top of this node's tree, set by QuotaTree.build (None: this node is a top). Every
    # head of every cycle asks for it, more than once.
    top: QuotaNode | None = None

    def root(self) -> QuotaNode:
        """The top of this node's tree."""
        top = self.top
        return self if top is None else top

    def ancestors(self) -> Iterator[QuotaNode]:
        """Parent, grandparent, ... up to the root."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def cluster_queues(self) -> list[QuotaNode]:
        """Every ClusterQueue node in this subtree."""
        return self.leaves

    def __post_init__(self) -> None:
        self.limits = {
            fr: q.borrowing_limit for fr, q in self.quotas.items() if q.borrowing_limit is not None
        }

    def borrowing_limit(self, fr: FlavorResource) -> int | None:
        """The node's borrowingLimit for fr (None: unlimited)."""
        return self.limits.get(fr)

    def nominal(self, fr: FlavorResource) -> int:
        """The node's own nominalQuota for fr."""
        quota = self.quotas.get(fr)
        return 0 if quota is None else quota.nominal


def available(node: QuotaNode, fr: FlavorResource) -> int:
    """How much of fr a workload in this node could use now (Kueue's ``available``)."""
    # Written for speed (every head of every cycle asks): no call for an empty dict, no min().
    usage = node.usage.get(fr, 0)
    parent = node.parent
    if parent is None:
        return node.subtree.get(fr, 0) - usage
    local = node.local.get(fr, 0) if node.local else 0
    if parent.parent is None:  # the parent is the root (most trees): no call for it
        parent_available = parent.subtree.get(fr, 0) - parent.usage.get(fr, 0)
    else:
        parent_available = available(parent, fr)
    limit = node.limits.get(fr) if node.limits else None
    if limit is not None:
        stored_in_parent = node.subtree.get(fr, 0) - local
        used_in_parent = usage - local if usage > local else 0
        most = stored_in_parent - used_in_parent + limit
        if most < parent_available:
            parent_available = most
    return (local - usage if local > usage else 0) + parent_available


def potential_available(node: QuotaNode, fr: FlavorResource) -> int:
    """The most of fr this node could use if nothing were in use (Kueue's potentialAvailable)."""
    parent = node.parent
    if parent is None:
        return node.subtree.get(fr, 0)
    above = parent.subtree.get(fr, 0) if parent.parent is None else potential_available(parent, fr)
    result = (node.local.get(fr, 0) if node.local else 0) + above
    limit = node.limits.get(fr) if node.limits else None
    if limit is not None:
        most = node.subtree.get(fr, 0) + limit
        if most < result:
            result = most
    return result


def borrowing_level(node: QuotaNode, fr: FlavorResource, amount: int) -> int:
    """0 when `amount` more fits in the node's own quota, else the height of the smallest
    cohort subtree it fits in (the whole tree's when none does): Kueue compares workloads that
    borrow by this, so one that borrows within a small cohort goes before one that needs the
    root's quota, whatever their priorities."""
    return lowest_subtree_that_fits(node, fr, amount)[0]


def lowest_subtree_that_fits(node: QuotaNode, fr: FlavorResource, amount: int) -> tuple[int, bool]:
    """(height of the smallest subtree whose quota holds `amount` more of fr, whether that
    subtree is below the root). The second is Kueue's "may reclaim in the hierarchy": quota
    of a cohort below the root is the preemptor's to reclaim, whoever borrowed it."""
    parent = node.parent
    if parent is None:
        return 0, False
    used = node.usage.get(fr, 0)
    if used + amount <= node.subtree.get(fr, 0):
        return 0, True
    local = node.local.get(fr, 0) if node.local else 0
    remaining = amount - (local - used if local > used else 0)
    height = 0
    ancestor: QuotaNode | None = parent
    while ancestor is not None:
        height = ancestor.height
        used = ancestor.usage.get(fr, 0)
        if used + remaining <= ancestor.subtree.get(fr, 0):
            return height, ancestor.parent is not None
        local = ancestor.local.get(fr, 0) if ancestor.local else 0
        remaining -= local - used if local > used else 0
        ancestor = ancestor.parent
    return height, False


def within_nominal(node: QuotaNode, frs: Iterable[FlavorResource]) -> bool:
    """Whether the node uses no more than its own subtree quota of every one of the frs."""
    return all(node.usage.get(fr, 0) <= node.subtree.get(fr, 0) for fr in frs)


def is_borrowing(node: QuotaNode, frs: Iterable[FlavorResource]) -> bool:
    """Whether the node uses more than its own subtree quota of any of the frs."""
    return any(node.usage.get(fr, 0) > node.subtree.get(fr, 0) for fr in frs)


def borrowing_cluster_queues(root: QuotaNode, fr: FlavorResource) -> set[QuotaNode]:
    """The ClusterQueues under a root that use more of fr than their own quota."""
    return root.borrowers.get(fr, _NONE)


_NONE: set[QuotaNode] = set()


def add_usage(node: QuotaNode, usage: Mapping[FlavorResource, int], sign: int = 1) -> None:
    """Add (sign=1) or remove (sign=-1) a workload's usage, propagating up the tree."""
    # Written for speed (every admission and release): no dict call for an empty `local`.
    leaf = node.parent is not None and not node.is_cohort
    for fr, amount in usage.items():
        delta = sign * amount
        if not delta:
            continue
        old = node.usage.get(fr, 0)
        if leaf:
            quota = node.subtree.get(fr, 0)
            now = old + delta > quota
            if (old > quota) != now:
                borrowers = (node.top or node).borrowers.setdefault(fr, set())
                if now:
                    borrowers.add(node)
                else:
                    borrowers.discard(node)
        current = node
        while True:
            new = old + delta
            current.usage[fr] = new
            parent = current.parent
            if parent is None:
                break
            guarded = current.local
            if guarded:
                local = guarded.get(fr, 0)
                delta = (new - local if new > local else 0) - (old - local if old > local else 0)
                if not delta:
                    break
            elif old < 0 or new < 0:  # never in practice: usage is not negative
                delta = (new if new > 0 else 0) - (old if old > 0 else 0)
                if not delta:
                    break
            # Otherwise nothing is guarded here, and all of the change reaches the parent.
            current = parent
            old = current.usage.get(fr, 0)


@dataclass(slots=True)
class QuotaTree:
    """The cohort forest: ClusterQueue nodes, Cohort nodes, and which cohorts form cycles."""

    cluster_queues: dict[str, QuotaNode]
    cohorts: dict[str, QuotaNode]
    cyclic: frozenset[str]

    @classmethod
    def build(cls, cluster_queues: Iterable[ClusterQueue], cohorts: Iterable[Cohort]) -> QuotaTree:
        """Build the tree from the API objects; cohorts named but not defined are implicit."""
        cohort_objs = {c.name: c for c in cohorts}
        cohort_nodes: dict[str, QuotaNode] = {}

        def cohort_node(name: str) -> QuotaNode:
            node = cohort_nodes.get(name)
            if node is None:
                obj = cohort_objs.get(name)
                node = QuotaNode(
                    name, True, obj.quotas if obj else {}, obj.fair_weight if obj else Fraction(1)
                )
                cohort_nodes[name] = node
            return node

        for name in cohort_objs:
            cohort_node(name)
        # Parent links; a cohort on a cycle (and everything under it) is cut off.
        cyclic: set[str] = set()
        for name, obj in cohort_objs.items():
            seen = {name}
            parent = obj.parent
            while parent is not None:
                if parent in seen:
                    cyclic |= seen
                    break
                seen.add(parent)
                parent = cohort_objs[parent].parent if parent in cohort_objs else None
        for name, obj in cohort_objs.items():
            if obj.parent is not None and name not in cyclic:
                node, parent_node = cohort_node(name), cohort_node(obj.parent)
                node.parent = parent_node
                parent_node.children.append(node)
        cq_nodes: dict[str, QuotaNode] = {}
        for cq in cluster_queues:
            node = QuotaNode(cq.name, False, cq.quotas, cq.fair_weight)
            cq_nodes[cq.name] = node
            if cq.cohort is not None and cq.cohort not in cyclic:
                parent_node = cohort_node(cq.cohort)
                node.parent = parent_node
                parent_node.children.append(node)
        tree = cls(cq_nodes, cohort_nodes, frozenset(cyclic))
        for node in list(cq_nodes.values()) + list(cohort_nodes.values()):
            if node.parent is None:
                _compute_subtree(node)
        return tree


def _collect_leaves(node: QuotaNode) -> list[QuotaNode]:
    leaves = [] if node.is_cohort else [node]
    for child in node.children:
        leaves.extend(_collect_leaves(child))
    node.leaves = leaves
    return leaves


def _compute_subtree(node: QuotaNode, top: QuotaNode | None = None) -> None:
    if node.parent is None:
        _collect_leaves(node)
    node.top = top
    subtree: dict[FlavorResource, int] = {fr: q.nominal for fr, q in node.quotas.items()}
    node.height = min(len(node.children), 1) if node.is_cohort else 0
    for child in node.children:
        _compute_subtree(child, node if top is None else top)
        if child.is_cohort:
            node.height = max(node.height, child.height + 1)
        for fr, amount in child.subtree.items():
            subtree[fr] = subtree.get(fr, 0) + amount - child.local.get(fr, 0)
    node.subtree = subtree
    node.local = {}
    if node.parent is not None:
        for fr, quota in node.quotas.items():
            if quota.lending_limit is not None:
                node.local[fr] = max(0, subtree.get(fr, 0) - quota.lending_limit)

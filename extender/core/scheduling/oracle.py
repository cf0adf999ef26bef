"""Kueue's preemption oracle for one flavor-resource: whether victims make room, and how."""

from __future__ import annotations

from extender.core.api.models import FlavorResource
from extender.core.scheduling.flavors import PREEMPT, RECLAIM, Mode
from extender.core.scheduling.preemption import Target
from extender.core.scheduling.quota import QuotaNode, add_usage, borrowing_level


def preemption_verdict(
    node: QuotaNode, fr: FlavorResource, amount: int, victims: list[Target]
) -> tuple[Mode, int] | None:
    """Kueue's preemption oracle for one flavor-resource: with these victims gone, whether the
    workload preempts its own ClusterQueue's workloads or reclaims, and how high it would
    borrow (None: no victims, no preemption)."""
    if not victims:
        return None
    own, freed = False, 0
    for target in victims:
        if target.victim.node is node:
            own = True
            freed += target.victim.usage.get(fr, 0)
    if node.usage.get(fr, 0) - freed + amount <= node.subtree.get(fr, 0):
        level = 0  # within its own quota once its own victims are gone
    else:
        for target in victims:
            add_usage(target.victim.node, target.victim.usage, -1)
        level = borrowing_level(node, fr, amount)
        for target in victims:
            add_usage(target.victim.node, target.victim.usage)
    return (PREEMPT if own else RECLAIM), level

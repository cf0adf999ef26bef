"""Fair sharing: weighted dominant resource share (DRS) of ClusterQueues and cohorts."""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction

from extender.core.api.models import FlavorResource
from extender.core.scheduling.quota import QuotaNode, potential_available

INFINITE_SHARE = math.inf
MAX_WEIGHTED_SHARE = 9223372036854775807


def dominant_resource_share(
    node: QuotaNode, extra: Mapping[FlavorResource, int] | None = None
) -> float:
    """DRS of a node, with `extra` usage added: max over resources of borrowed*1000/lendable.

    Borrowed is usage above the node's subtree quota; lendable is what the parent could
    ever provide of that resource over all flavors. Divided by the node's weight; a weight
    of 0 makes any borrowing infinitely unfair.
    """
    parent = node.parent
    if parent is None:
        return 0.0
    extra = extra or {}
    borrowed: dict[str, int] = {}
    for fr in set(node.usage) | set(extra):
        amount = node.usage.get(fr, 0) + extra.get(fr, 0) - node.subtree.get(fr, 0)
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
    if not borrowed:
        return 0.0
    weight = node.fair_weight
    if weight == 0:
        return INFINITE_SHARE
    lendable: dict[str, int] = {}
    for fr in parent.subtree:
        if fr[1] in borrowed:
            lendable[fr[1]] = lendable.get(fr[1], 0) + potential_available(parent, fr)
    ratio = max(
        (Fraction(amount * 1000, lendable[r]) if lendable.get(r) else Fraction(10**9))
        for r, amount in borrowed.items()
    )
    return float(ratio / weight)


def weighted_share(node: QuotaNode) -> int:
    """status.fairSharing.weightedShare: ceil(DRS), MaxInt64 when infinite."""
    share = dominant_resource_share(node)
    if share == INFINITE_SHARE:
        return MAX_WEIGHTED_SHARE
    return math.ceil(share)

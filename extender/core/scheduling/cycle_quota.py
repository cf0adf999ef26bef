"""What step 5 of a scheduling cycle took from each quota tree, and what it holds there.

Entries are nominated against the quota tree as it was when the cycle began; step 5 admits
them one by one. `CycleQuota` tells an entry that fitted then whether it still fits, as
cheaply as the case allows, and keeps the quota held for this cycle only (a preemptor's, a
lender's) in the tree until the cycle ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from extender.core.api.models import (
    RECLAIM_ANY,
    ClusterQueue,
    FlavorResource,
    QueueingStrategy,
    Workload,
)
from extender.core.scheduling.flavors import Assignment
from extender.core.scheduling.preemption import AdmittedWorkload, Target, fits
from extender.core.scheduling.queues import ClassMemo, ClusterQueueQueue
from extender.core.scheduling.quota import QuotaNode, add_usage
from extender.core.scheduling.reasons import PendingStatus


@dataclass(slots=True)
class Entry:
    """A head nominated for this cycle: where it would go, how, and (once decided) why it
    stays pending."""

    cq: ClusterQueue
    node: QuotaNode
    queue: ClusterQueueQueue
    workload: Workload
    assignment: Assignment
    targets: Sequence[Target] = ()
    status: PendingStatus | None = None
    memo: ClassMemo | None = None  # what the scheduler keeps for the head's class


def _nobody_borrows(root: QuotaNode, assignment: Assignment) -> bool:
    """Whether no ClusterQueue in the tree uses more than its own quota of what this needs.

    Then every ClusterQueue's own quota is still there for it: a fit within it holds.
    """
    borrowers = root.borrowers
    for fr in assignment.usage:  # noqa: SIM110 (a loop, not any(): most admissions ask)
        if borrowers.get(fr):
            return False
    return True


class CycleQuota:
    """What step 5 of one cycle took from each quota tree, and what is held there for it.

    Entries were nominated against the tree as it was; this tells an entry that fitted then
    whether it still fits, as cheaply as the case allows. Quota held for this cycle only (a
    preemptor's, a lender's) is added to the tree here and taken back out at the end.
    """

    def __init__(self, classical: bool) -> None:
        self.classical = classical
        # Amounts admitted, reserved or held per tree (all flavor-resources summed: an upper
        # bound on what any one of them lost since nomination).
        # Keyed by each tree's top node (hashed by identity, in C).
        self.taken: dict[QuotaNode, int] = {}
        self.lenders: dict[QuotaNode, list[Entry]] = {}  # entries admitted in their own quota
        self.holds: dict[QuotaNode, dict[QuotaNode, dict[FlavorResource, int]]] = {}
        self.reservations: list[Entry] = []
        self.held: list[tuple[QuotaNode, dict[FlavorResource, int]]] = []
        # Workloads this cycle preempts: out of the tree until the cycle ends, one by one or
        # netted with their preemptor's usage into one change of its ClusterQueue.
        self.removed: list[AdmittedWorkload] = []
        self.netted: list[tuple[QuotaNode, dict[FlavorResource, int]]] = []

    def refusal(self, entry: Entry) -> str | None:
        """None if a fit still holds, else why not. A borrower first sees lenders' holds."""
        assignment, node = entry.assignment, entry.node
        root = node.top or node  # node.root(), without the call: every admission asks
        held: dict[QuotaNode, dict[FlavorResource, int]] = {}
        own = None
        if assignment.borrowing_level and self.classical:
            held = self._holds_in(root)
            own = held.pop(node, None)
            if own is not None:  # its own unused quota is its own to use
                add_usage(node, own, -1)
        spent = self.taken.get(root, 0)
        if (
            not spent
            or assignment.slack >= spent
            or (assignment.borrowing_level == 0 and _nobody_borrows(root, assignment))
            or fits(node, assignment.usage, True)
        ):
            return None
        if own is not None:
            add_usage(node, own)
            held[node] = own
        message = "quota was taken by another workload admitted in the same cycle"
        if held:
            keepers = sorted(n.name for n in held)
            more = f" and {len(keepers) - 3} more" if len(keepers) > 3 else ""
            message += (
                f", or kept by ClusterQueue {', '.join(keepers[:3])}{more} for its own "
                "pending workloads (lent now, it would be reclaimed at once)"
            )
        return message

    def preempt(self, entry: Entry) -> str | None:
        """A preempting entry: if it fits once its victims are gone (with those of earlier
        preemptors of this cycle), its victims' quota is taken out and its own held for the
        rest of the cycle, as Kueue's snapshot sees a cycle's preemptions; None. Otherwise
        nothing changes and the answer is why not. The caller made sure that no victim is
        another preemptor's of this cycle."""
        node, usage = entry.node, entry.assignment.usage
        victims = [target.victim for target in entry.targets]
        net = net_within_own(node, usage, victims)
        if net is not None:
            # One walk up the tree for the preemptor and all its victims, not one each.
            add_usage(node, net)
            self.netted.append((node, net))
            self._take(node.root(), usage.values())
            return None
        for victim in victims:
            add_usage(victim.node, victim.usage, -1)
        if not fits(node, usage, True):
            for victim in victims:
                add_usage(victim.node, victim.usage)
            return (
                f"{entry.assignment.message}; it no longer fits after the workloads admitted or "
                "preempted for earlier in this cycle"
            )
        self.removed.extend(victims)
        self.reserve(entry)
        return None

    def hold(self, entry: Entry, amounts: Mapping[FlavorResource, int]) -> None:
        """Keep quota for a pending entry from the entries after it, for this cycle only."""
        amounts = {fr: v for fr, v in amounts.items() if v > 0}
        if not amounts:
            return
        add_usage(entry.node, amounts)
        self.held.append((entry.node, amounts))
        self._take(entry.node.root(), amounts.values())

    def admitted(self, entry: Entry) -> None:
        """An entry was admitted (its usage is assumed): it may lend what it left unused."""
        assignment = entry.assignment
        node = entry.node
        tree = node.top or node  # node.root(), without the call
        self.taken[tree] = self.taken.get(tree, 0) + sum(assignment.usage.values())
        if not assignment.borrowing_level:
            lenders = self.lenders.get(tree)
            if lenders is None:
                self.lenders[tree] = [entry]
            else:
                lenders.append(entry)

    def reserve(self, entry: Entry) -> None:
        """A preemptor keeps what it needs for the rest of the cycle, so what its victims free
        (and what is free now) is not taken by an entry ordered after it."""
        add_usage(entry.node, entry.assignment.usage)
        self.reservations.append(entry)
        self._take(entry.node.root(), entry.assignment.usage.values())

    def _take(self, root: QuotaNode, amounts: Iterable[int]) -> None:
        self.taken[root] = self.taken.get(root, 0) + sum(amounts)

    def release_holds(self) -> None:
        """Give back what preemptors reserved and lenders kept: held for this cycle only."""
        for entry in self.reservations:
            add_usage(entry.node, entry.assignment.usage, -1)
        self.reservations.clear()
        for held in self.holds.values():
            for node, amounts in held.items():
                add_usage(node, amounts, -1)
        self.holds.clear()
        for node, amounts in self.held:
            add_usage(node, amounts, -1)
        self.held.clear()
        for victim in self.removed:
            add_usage(victim.node, victim.usage)
        self.removed.clear()
        for node, net in self.netted:
            add_usage(node, net, -1)
        self.netted.clear()

    def _holds_in(self, root: QuotaNode) -> dict[QuotaNode, dict[FlavorResource, int]]:
        # Borrowers come after every entry that fits its own quota, so the lenders of a tree
        # are all known when its first borrower is reached.
        held = self.holds.get(root)
        if held is None:
            held = self.holds[root] = _lender_holds(self.lenders.get(root, ()))
            for amounts in held.values():
                self._take(root, amounts.values())
        return held


def net_within_own(
    node: QuotaNode, usage: Mapping[FlavorResource, int], victims: Sequence[AdmittedWorkload]
) -> dict[FlavorResource, int] | None:
    """The change to the node's usage of admitting this request in place of these victims,
    if arithmetic alone shows that it fits; else None (then the tree must be asked).

    It fits when every victim is the node's own, the node then stays within its own quota of
    what it requests, and no other ClusterQueue of the tree borrows any of it: every queue is
    then within its own quota, and so is every cohort (a test holds this to taking the
    victims out and asking the tree).
    """
    borrowers = node.root().borrowers
    for victim in victims:
        if victim.node is not node:
            return None
    net = dict(usage)
    for victim in victims:
        for fr, amount in victim.usage.items():
            net[fr] = net.get(fr, 0) - amount
    for fr in usage:
        for borrower in borrowers.get(fr, ()):
            if borrower is not node:
                return None
        if node.usage.get(fr, 0) + net[fr] > node.subtree.get(fr, 0):
            return None
    return net


def _lender_holds(admitted: Iterable[Entry]) -> dict[QuotaNode, dict[FlavorResource, int]]:
    """Unused quota that ClusterQueues keep from this cycle's borrowers, held in the tree.

    A ClusterQueue that admitted in its own quota this cycle and whose next pending workload
    fits what it leaves unused will admit that workload next cycle. Lent out now, the quota
    would be reclaimed from the borrower at once (reclaimWithinCohort: Any), a preemption
    that costs the borrower its work and the API two writes. Kueue lends it and reclaims it;
    Tower keeps it until the lender's pending work no longer fits (or is parked). Only under
    BestEffortFIFO: a StrictFIFO head that never fits would keep the quota idle.
    """
    held: dict[QuotaNode, dict[FlavorResource, int]] = {}
    for entry in admitted:
        cq, node = entry.cq, entry.node
        if (
            node in held
            or cq.preemption.reclaim_within_cohort is not RECLAIM_ANY
            or entry.queue.strategy is not QueueingStrategy.BEST_EFFORT_FIFO
        ):
            continue
        head = entry.queue.head()
        if head is None:
            continue
        amounts: dict[FlavorResource, int] = {}
        for fr in cq.quotas:
            unused = node.subtree.get(fr, 0) - node.usage.get(fr, 0)
            need = sum(ps.totals.get(fr[1], 0) for ps in head.pod_sets)
            if 0 < need <= unused:
                amounts[fr] = unused
        if amounts:
            add_usage(node, amounts)
            held[node] = amounts
    return held


def to_reserve(entry: Entry) -> dict[FlavorResource, int]:
    """What a pending entry without preemption candidates keeps from later entries: its
    request, capped at what its nominal quota (plus borrowingLimit, when it must borrow) still
    leaves (Kueue's resourcesToReserve)."""
    node, assignment = entry.node, entry.assignment
    out: dict[FlavorResource, int] = {}
    for fr, amount in assignment.usage.items():
        used = node.usage.get(fr, 0)
        if assignment.borrowing_level > 0:
            limit = node.borrowing_limit(fr)
            out[fr] = amount if limit is None else min(amount, node.nominal(fr) + limit - used)
        else:
            out[fr] = max(0, min(amount, node.nominal(fr) - used))
    return out

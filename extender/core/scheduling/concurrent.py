"""Concurrent admission in the cycle: a variant searches its one flavor, and yields to siblings.

A variant (extender/core/admission/concurrent.py) is a Workload owned by its parent Workload,
allowed one flavor of its ClusterQueue's resource group. Kueue's scheduler (scheduler.go,
ConcurrentAdmission) treats it as any head, with these rules added, kept here:

- its flavor search looks at its allowed flavor only (`variant_view`);
- while a sibling of a more preferred flavor is admitted, it waits;
- when it fits and a sibling of a less preferred flavor is admitted, that sibling is evicted
  (reason FlavorMigration) and it waits for the migration, instead of being admitted too;
- it does not preempt while its concurrent-admission preemption gate is closed (the family's
  controller opens one variant's gate at a time, extender/core/admission/concurrent.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Generic, TypeVar

from extender.core.admission.concurrent import PREEMPTION_GATED
from extender.core.api.models import ClusterQueue, ResourceGroup, Workload
from extender.core.scheduling.cache import Cache
from extender.core.scheduling.cycle_quota import Entry
from extender.core.scheduling.flavors import FIT, PREEMPTING
from extender.core.scheduling.preemption import AdmittedWorkload
from extender.core.scheduling.queues import ClusterQueueQueue
from extender.core.scheduling.quota import QuotaNode
from extender.core.scheduling.reasons import PENDING, WAITING_FOR_PREEMPTED, PendingStatus

FLAVOR_MIGRATION = "FlavorMigration"  # Kueue's WorkloadEvictedByFlavorMigration
MORE_FAVORABLE = "A more favorable variant is already admitted"
OWNER_KIND = "Workload"  # a variant's owner: its parent
POLICY_FIELD = "spec.concurrentAdmissionPolicy"

E = TypeVar("E")
# Makes the cycle's eviction decision: (victim, reason, preemption reason, message, preemptor).
EvictFactory = Callable[[Workload, str, str | None, str, str | None], E]
# The queue manager's set_aside: a head that cannot be admitted steps aside.
SetAside = Callable[[QuotaNode, ClusterQueueQueue, Workload], bool]


def is_variant(workload: Workload) -> bool:
    """A variant: owned by its parent Workload and allowed its flavors."""
    return bool(workload.allowed_flavors) and workload.owner_kind == OWNER_KIND


def variant_view(cq: ClusterQueue, workload: Workload) -> ClusterQueue:
    """The ClusterQueue as a variant's flavor search sees it: its resource groups with the
    variant's allowed flavors only (the ClusterQueue itself for any other workload)."""
    allowed = workload.allowed_flavors
    if not allowed:
        return cq
    groups = tuple(
        ResourceGroup(g.covered_resources, tuple(f for f in g.flavors if f.name in allowed))
        for g in cq.resource_groups
    )
    return replace(cq, resource_groups=groups)


class VariantRule(Generic[E]):
    """Kueue's scheduler rules for variants, asked for each entry of step 5 before it is
    admitted or preempts: True when the rule decided the entry (it stays pending)."""

    def __init__(self, cache: Cache, set_aside: SetAside, evict: EvictFactory[E]) -> None:
        self._cache = cache
        self._set_aside = set_aside
        self._evict = evict

    def waits(self, entry: Entry, evicted: list[E]) -> bool:
        workload = entry.workload
        if not is_variant(workload):
            # A gated Workload that is no variant (a MultiKueue copy on a worker): only the
            # preemption waits for its gate (Kueue's scheduler, either gate on).
            gated = entry.assignment.mode in PREEMPTING and entry.targets
            if gated and workload.preemption_gated:
                return self._aside(entry, PREEMPTION_GATED)
            return False
        cq = self._cache.cluster_queues.get(entry.cq.name, entry.cq)
        order = {name: i for i, name in enumerate(cq.flavor_names())}
        rank = order.get(workload.allowed_flavors[0], len(order))
        siblings = list(self._siblings(workload, cq.name))
        ranks = [order.get(s.workload.allowed_flavors[0], len(order)) for s in siblings]
        if any(r < rank for r in ranks):
            return self._aside(entry, MORE_FAVORABLE)
        mode = entry.assignment.mode
        if mode in PREEMPTING and entry.targets and workload.preemption_gated:
            return self._aside(entry, PREEMPTION_GATED)
        worse = [s for s, r in zip(siblings, ranks, strict=True) if r > rank]
        if mode != FIT or not worse:
            return False
        victim = worse[0]
        if not victim.evicting:
            victim.evicting = True
            message = (
                f"Evicted to accommodate a workload (UID: {workload.uid}) due to migration "
                "to more favorable resource flavor"
            )
            evicted.append(
                self._evict(victim.workload, FLAVOR_MIGRATION, None, message, workload.key)
            )
        entry.status = PendingStatus(
            WAITING_FOR_PREEMPTED,
            f"{entry.assignment.message or 'fits'}. Pending the migration of 1 workload(s): "
            f"{victim.workload.key}",
        )
        return True

    def _siblings(self, workload: Workload, cq_name: str) -> Iterator[AdmittedWorkload]:
        """The admitted variants of the same parent."""
        for held in self._cache.admitted_in(cq_name):
            other = held.workload
            if (
                other.key != workload.key
                and other.owner_name == workload.owner_name
                and other.namespace == workload.namespace
                and is_variant(other)
            ):
                yield held

    def _aside(self, entry: Entry, message: str) -> bool:
        entry.status = PendingStatus(PENDING, message)
        self._set_aside(entry.node, entry.queue, entry.workload)
        return True


def acting_on_policy(cq: ClusterQueue) -> ClusterQueue:
    """A ClusterQueue whose concurrentAdmissionPolicy Tower acts on (the gate is on): the
    field no longer keeps it inactive."""
    if POLICY_FIELD not in cq.unacted:
        return cq
    return replace(cq, unacted=tuple(p for p in cq.unacted if p != POLICY_FIELD))

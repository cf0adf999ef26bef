"""Preemption and partial admission for topology: quota fits, but no domain holds the workload.

Kueue's scheduler asks its TAS flavor assigner the same questions: would the domains hold
the workload with some admitted workloads gone (and which), and what are the largest counts
whose quota fits and whose domains hold them. The answers come from topology-aware
scheduling through `TopologyHooks` and a `TopologyFit` test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence, Set
from typing import Protocol

from extender.core.api.models import Admission, Workload
from extender.core.scheduling.cache import Cache
from extender.core.scheduling.cycle_quota import Entry
from extender.core.scheduling.flavors import FIT, Assignment, search_flavors
from extender.core.scheduling.partial import largest_fit, may_shrink, scaled
from extender.core.scheduling.preemption import (
    AdmittedWorkload,
    Target,
    TargetSearch,
    classical_targets,
    may_preempt_at_all,
)

TopologyFit = Callable[[Workload, Admission, "Sequence[str] | None"], bool]


class TopologyHooks(Protocol):
    """What preemption asks of topology-aware scheduling (tas/scheduling.TopologyScheduling)."""

    def fits_without(
        self, workload: Workload, admission: Admission, victims: Sequence[str] | None
    ) -> bool:
        """Would its topology podSets be placed were these workloads gone (None: all)."""

    def reserve(
        self, workload: Workload, admission: Admission, victims: Sequence[str] | None
    ) -> None:
        """Keep the domains it will take from later entries, until the cycle ends."""

    def end_cycle(self) -> None:
        """Give back what the cycle reserved."""

    def prepare(self, workload: Workload, flavors: Iterable[str]) -> None:
        """A workload was queued where these flavors may take it: work its placement will
        need may be done now, outside the cycle."""


def topology_targets(
    entry: Entry,
    admission: Admission,
    fit: TopologyFit,
    cache: Cache,
    lq_usage: Callable[[AdmittedWorkload], float] | None,
    search: TargetSearch = classical_targets,
    claimed: Set[str] = frozenset(),
) -> list[Target]:
    """Kueue's preemption for topology: the quota fits but no domain holds the workload. If
    the domains would hold it with no topology-aware workload on them, the candidates its
    preemption policy allows are taken until it is placed, then those not needed are put
    back; none when preemption cannot make room. Workloads `claimed` by a preemptor earlier
    in the cycle are not candidates: the cycle's quota already counts them gone."""
    cq, node, workload = entry.cq, entry.node, entry.workload
    if not may_preempt_at_all(cq, node) or not fit(workload, admission, None):
        return []
    usage = entry.assignment.usage

    def admitted_in(name: str) -> Iterable[AdmittedWorkload]:
        return [a for a in cache.admitted_in(name) if a.workload.key not in claimed]

    return search(
        workload,
        cq,
        node,
        usage,
        frozenset(usage),
        admitted_in if claimed else cache.admitted_in,
        cache.lowest_priority,
        lq_usage=lq_usage,
        also_fits=lambda removed: fit(workload, admission, [v.workload.key for v in removed]),
    )


def shrink_to_topology(entry: Entry, fit: TopologyFit, cache: Cache) -> Assignment | None:
    """Partial admission when the quota fits but no domain holds every pod: the largest
    counts whose quota fits and whose domains hold them (Kueue's reducer asks both)."""
    workload, cq, node = entry.workload, entry.cq, entry.node
    if not may_shrink(workload):
        return None

    def fits(counts: tuple[int, ...]) -> Assignment | None:
        assignment = search_flavors(scaled(workload, counts), cq, cache.flavors, node)
        if assignment.mode != FIT:
            return None
        assignment = assignment._replace(counts=counts)
        return assignment if fit(workload, assignment.admission(cq.name, workload), []) else None

    found = largest_fit(workload.pod_sets, fits)
    return None if found is None else found[1]


def placeable_targets(
    entry: Entry,
    victims: list[Target],
    fit: TopologyFit,
    cache: Cache,
    lq_usage: Callable[[AdmittedWorkload], float] | None,
    search: TargetSearch = classical_targets,
) -> list[Target]:
    """Victims for the quota, checked against topology: when the workload's domains would
    still not hold it once they are gone, every flavor-resource it uses is preempted for,
    with its placement the test (Kueue switches a flavor that fits by quota but not by
    topology from Fit to Preempt). None when even that makes no room."""
    workload = entry.workload
    admission = entry.assignment.admission(entry.cq.name, workload)
    if fit(workload, admission, [t.victim.workload.key for t in victims]):
        return victims
    usage = entry.assignment.usage
    return search(
        workload,
        entry.cq,
        entry.node,
        usage,
        frozenset(usage),
        cache.admitted_in,
        cache.lowest_priority,
        lq_usage=lq_usage,
        also_fits=lambda removed: fit(workload, admission, [v.workload.key for v in removed]),
    )

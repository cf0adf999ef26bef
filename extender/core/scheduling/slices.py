"""An elastic job's scale-up slice in the cycle: it counts its old slice's quota as its own.

Kueue's scheduler treats the admitted slice a new one replaces as a preemption target that
is never evicted: flavor assignment counts only the difference between the two, in the
flavors the old slice was admitted to (a scaled-up job keeps its flavor), and once the new
slice is admitted the old one's quota becomes the new one's, in the same step. Here the old
slice's usage is taken out of its ClusterQueue for the search and put back at once, so the
assignment is judged as if it held nothing else; what the cycle takes from the tree is only
the difference. The old slice's quota is released when the new one is admitted, not before.

A slice that does not fit may preempt, as Kueue lets it: the search asks preemption's oracle
with the old slice's usage out of the tree, and whom it would evict is found among the
admitted workloads less the old slice, which is never a victim of its own replacement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from extender.core.api.models import Admission, ClusterQueue, FlavorResource, Workload
from extender.core.scheduling.cache import Cache
from extender.core.scheduling.flavors import (
    FIT,
    NO_CANDIDATES,
    NO_FIT,
    PREEMPTING,
    Assignment,
    PreemptionOracle,
    search_flavors,
)
from extender.core.scheduling.preemption import AdmittedIn, AdmittedWorkload, Target
from extender.core.scheduling.quota import QuotaNode, add_usage
from extender.core.scheduling.reasons import INADMISSIBLE
from extender.core.scheduling.text import Text


def replaced(cache: Cache, workload: Workload, cq_name: str) -> AdmittedWorkload | None:
    """The admitted slice a workload replaces, if it holds quota in the same ClusterQueue
    and namespace (Kueue's ReplacedWorkloadSlice); None for any other workload."""
    key = workload.replacement_for
    if not key:
        return None
    old = cache.admitted.get(key)
    if (
        old is None
        or old.evicting
        or old.admission.cluster_queue != cq_name
        or old.workload.namespace != workload.namespace
    ):
        return None
    return old


def _kept_flavors(cq: ClusterQueue, admission: Admission) -> ClusterQueue:
    """The ClusterQueue as the new slice may use it: in each resource group, only the flavors
    the old slice was admitted to (every flavor where it was given none of the group)."""
    used: dict[str, set[str]] = {}
    for psa in admission.pod_set_assignments:
        for resource, flavor in psa.flavors.items():
            used.setdefault(resource, set()).add(flavor)
    groups = []
    for group in cq.resource_groups:
        names = set().union(*(used.get(r, set()) for r in group.covered_resources))
        kept = tuple(f for f in group.flavors if f.name in names) if names else group.flavors
        groups.append(replace(group, flavors=kept or group.flavors))
    return replace(cq, resource_groups=tuple(groups))


def _flavor_change(workload: Workload, assignment: Assignment, old: Admission) -> str | None:
    """Kueue's refusal when a pod set would move to another flavor than its old slice's."""
    before = {psa.name: psa.flavors for psa in old.pod_set_assignments}
    for ps, flavors in zip(workload.pod_sets, assignment.pod_set_flavors, strict=False):
        for resource, flavor in flavors.items():
            original = before.get(ps.name, {}).get(resource)
            if original is not None and original != flavor:
                return (
                    f"could not assign {flavor} flavor since the original workload is "
                    f"assigned: {original}"
                )
    return None


TargetsFor = Callable[[Mapping[FlavorResource, int], frozenset[FlavorResource]], list[Target]]
"""Whom preemption would evict for a request, to make room in the flavor-resources named."""


def without_old(admitted_in: AdmittedIn, old: AdmittedWorkload) -> AdmittedIn:
    """The admitted workloads preemption may choose from for a slice: all but its old one."""
    old_key = old.workload.key

    def candidates(cq_name: str) -> list[AdmittedWorkload]:
        return [a for a in admitted_in(cq_name) if a.workload.key != old_key]

    return candidates


def assign(
    cache: Cache,
    cq: ClusterQueue,
    node: QuotaNode,
    workload: Workload,
    old: AdmittedWorkload,
    fair_sharing: bool,
    oracle: PreemptionOracle | None = None,
    targets_for: TargetsFor | None = None,
) -> tuple[Assignment, list[Target]]:
    """Flavor assignment of a scale-up slice: the old slice's quota counted as its own, in the
    old slice's flavors, and whom it would preempt where only preemption makes room (the
    oracle and targets_for never offer the old slice). The usage of a fit, or of a
    preemption, is what the cycle takes from the tree: the difference."""
    victims: list[Target] = []
    add_usage(old.node, old.usage, -1)
    try:
        assignment = search_flavors(
            workload,
            _kept_flavors(cq, old.admission),
            cache.flavors,
            node,
            oracle,
            fair_sharing=fair_sharing,
        )
        if assignment.mode in PREEMPTING and targets_for is not None:
            victims = targets_for(assignment.usage, assignment.needs_preemption)
    finally:
        add_usage(old.node, old.usage)
    if assignment.mode == FIT or (assignment.mode in PREEMPTING and victims):
        moved = _flavor_change(workload, assignment, old.admission)
        if moved is not None:
            return Assignment(NO_FIT, reason=INADMISSIBLE, message=moved), []
        usage = difference(assignment.usage, old.usage)
        if victims:
            assignment = assignment._replace(message=_counting(assignment.message, old))
        return assignment._replace(usage=usage, slack=-1), victims
    if assignment.mode in PREEMPTING:
        assignment = assignment._replace(mode=NO_CANDIDATES)
    return assignment._replace(message=_counting(assignment.message, old)), []


def _counting(message: Text, old: AdmittedWorkload) -> str:
    """Why the numbers in a slice's message leave out its old slice's quota."""
    return (
        f"{message} (counting the quota of {old.workload.key}, the slice it replaces: a "
        "scaled-up job keeps that quota until its new slice is admitted)"
    )


def difference(
    new: Mapping[FlavorResource, int], old: Mapping[FlavorResource, int]
) -> dict[FlavorResource, int]:
    """What a new slice takes beyond its old one, per flavor-resource (none below zero)."""
    return {fr: max(amount - old.get(fr, 0), 0) for fr, amount in new.items()}


class SliceLedger:
    """Slices replaced by an admission whose old slice is not seen finished yet: the old one
    as it held quota (put back if the new admission is undone), and which replaced it (its
    admission, still in the API until it is finished, must not be taken in again)."""

    def __init__(self, cache: Cache) -> None:
        self._cache = cache
        self._replacing: dict[str, AdmittedWorkload] = {}  # new key -> old slice
        self._replaced_by: dict[str, str] = {}  # old key -> new key
        cache.release_hooks.append(self._released)

    def replace(self, old: AdmittedWorkload, new_key: str) -> None:
        """The new slice is admitted: the old one's quota leaves the cache with it."""
        old_key = old.workload.key
        self._cache.release(old_key)
        self._replacing[new_key] = old
        self._replaced_by[old_key] = new_key

    def _released(self, key: str) -> None:
        """A new slice's admission undone (its write failed) before its old slice was
        finished: the old slice holds its quota again, as the API still says it does."""
        old = self._replacing.pop(key, None)
        if old is None:
            return
        self._replaced_by.pop(old.workload.key, None)
        self._cache.assume(old.workload, old.admission, old.reserved_at, old.usage, old.node)

    def replaced_slice(self, key: str) -> str | None:
        """The slice that replaced this admitted one in the cache, while the old one is not
        seen finished yet."""
        return self._replaced_by.get(key)

    def settled(self, old_key: str) -> None:
        """The replaced slice is finished (or gone): the replacement is for good."""
        new_key = self._replaced_by.pop(old_key, None)
        if new_key is not None:
            self._replacing.pop(new_key, None)

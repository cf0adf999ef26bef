"""Flavor scan progress kept per pending workload between cycles (Kueue's LastTriedFlavorIdx).

Kueue's flavor search stops at the first flavor its fungibility accepts and remembers, per
pod set and resource group, where it stopped. A workload nominated there but not admitted
(its topology does not fit the flavor's nodes, an admission check refuses it, or an earlier
entry took the room) starts its next search at the flavor after that one, so it is not pinned
to a flavor that keeps failing it. The progress is forgotten once it no longer describes the
state: the configuration (quotas, flavors) changed since it was recorded, or, under Kueue's
`FlavorFungibilityPreserveScanProgress` (Beta, on by default), only when it is older than the
cycle before and the configuration changed, or the workload's pod sets changed. With the gate
off, an updated Workload also starts over, and so does one skipped for contention.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from extender.core.api.models import TRY_NEXT_FLAVOR, ClusterQueue, Workload
from extender.core.scheduling.cycle_quota import Entry
from extender.core.scheduling.flavors import FIT, Assignment
from extender.core.scheduling.reasons import (
    INADMISSIBLE,
    WAITING_FOR_PODS_READY,
    WAITING_FOR_PREEMPTED,
)

GATE = "FlavorFungibilityPreserveScanProgress"

_NOT_SKIPS = frozenset((WAITING_FOR_PREEMPTED, WAITING_FOR_PODS_READY))

ScanStart = Mapping[tuple[int, int], int]
"""Per (pod set index, resource group index): the last flavor index tried (-1: none left)."""


@dataclass(frozen=True, slots=True)
class _Kept:
    workload: Workload  # the object as it was when the progress was recorded
    tried: ScanStart
    generation: int  # the configuration generation it was recorded under
    cycle: int


def tried_flavors(cq: ClusterQueue, assignment: Assignment) -> dict[tuple[int, int], int]:
    """Where a fit's search stopped, per pod set and resource group: the chosen flavor's index,
    unless the search went on past it (a borrowing fit under TryNextFlavor) or it is the last
    of its group (then -1: the next search starts from the first flavor again)."""
    if assignment.mode != FIT:
        return {}
    fungibility = cq.flavor_fungibility
    went_on = assignment.borrowing_level > 0 and fungibility.when_can_borrow is TRY_NEXT_FLAVOR
    tried: dict[tuple[int, int], int] = {}
    for index, flavors in enumerate(assignment.pod_set_flavors):
        for resource, flavor in flavors.items():
            group_index = cq.group_of.get(resource)
            if group_index is None:
                continue
            names = [f.name for f in cq.resource_groups[group_index].flavors]
            at = names.index(flavor) if flavor in names else -1
            tried[(index, group_index)] = -1 if went_on or at == len(names) - 1 else at
    return tried


class ScanProgress:
    """The scan progress of pending workloads, by workload key."""

    def __init__(self) -> None:
        # Kueue's FlavorFungibilityPreserveScanProgress (Beta, on by default).
        self.preserve = True
        self.cycle = 0
        self.kept: dict[str, _Kept] = {}

    def start(self, workload: Workload, generation: int) -> ScanStart | None:
        """Where this workload's search resumes (None: from the first flavor); progress that
        no longer describes the state is forgotten here (Kueue's lastAssignmentOutdated)."""
        kept = self.kept.get(workload.key)
        if kept is None:
            return None
        if self._outdated(kept, workload, generation):
            del self.kept[workload.key]
            return None
        return kept.tried

    def _outdated(self, kept: _Kept, workload: Workload, generation: int) -> bool:
        if self.preserve:
            if kept.workload.pod_sets != workload.pod_sets:
                return True  # another shape: the recorded indices describe another search
            if self.cycle - kept.cycle <= 1:
                return False
        elif kept.workload is not workload:
            return True  # updated: Kueue rebuilds its Info, and the progress with it
        return generation > kept.generation

    def record(
        self, workload: Workload, tried: ScanStart, generation: int, *, skipped: bool
    ) -> None:
        """A nominated fit not admitted this cycle. One skipped for contention (an earlier
        entry took the room) keeps its progress only under the gate."""
        if not any(i >= 0 for i in tried.values()) or (skipped and not self.preserve):
            self.kept.pop(workload.key, None)
            return
        self.kept[workload.key] = _Kept(workload, dict(tried), generation, self.cycle)

    def after_cycle(
        self, entries: list[Entry], generation: int, pending: Callable[[str], object]
    ) -> None:
        """Keep the progress of each fit nominated but not admitted; forget the rest (admitted,
        preempting, or searched to the end), and that of workloads no longer pending."""
        for key in [k for k in self.kept if pending(k) is None]:
            del self.kept[key]  # deleted, or admitted meanwhile
        for entry in entries:
            status, key = entry.status, entry.workload.key
            # Waiting for preempted workloads or for others' pods to be ready, it is admitted
            # to this same flavor later: nothing to resume.
            if status is None or entry.assignment.mode != FIT or status.reason in _NOT_SKIPS:
                if key in self.kept:
                    del self.kept[key]
                continue
            tried = tried_flavors(entry.cq, entry.assignment)
            skipped = status.reason != INADMISSIBLE
            self.record(entry.workload, tried, generation, skipped=skipped)

    def pending_flavors(self, entry: Entry) -> bool:
        """Whether a fit refused this cycle leaves flavors its next search will try (Kueue's
        PendingFlavors: then it is not set aside as inadmissible)."""
        tried = tried_flavors(entry.cq, entry.assignment)
        return any(i >= 0 for i in tried.values())

    def discard(self, key: str) -> None:
        """Admitted, preempting, gone or judged afresh: its next search starts from the first."""
        self.kept.pop(key, None)

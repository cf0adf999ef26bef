"""Pending workloads of one ClusterQueue: Kueue's ordering, StrictFIFO and BestEffortFIFO.

Workloads are ordered by priority (descending), then queue-order time, then uid. Workloads
that would be scheduled identically (same namespace, priority and pod sets) form an
equivalence class, as Kueue's scheduling-equivalence hashing does: when the head of a class
cannot fit, the whole class becomes inadmissible at once. So the cost of a cycle grows with
the number of classes that can still move, not with every pending workload.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field

from extender.core.models import QueueingStrategy, Workload

QueueKey = tuple[float, str]  # (queue-order time, uid) inside one class


def equivalence_key(workload: Workload) -> Hashable:
    """Workloads with equal keys get the same flavor and quota verdict in the same state."""
    return (
        workload.namespace,
        workload.queue_name,
        workload.priority,
        tuple(
            (
                ps.name,
                ps.count,
                tuple(sorted(ps.requests.items())),
                tuple(sorted(ps.node_selector.items())),
                ps.required_terms,
                ps.tolerations,
            )
            for ps in workload.pod_sets
        ),
    )


@dataclass(slots=True)
class _Class:
    key: Hashable
    priority: int
    heap: list[tuple[float, str, str]] = field(default_factory=list)  # (time, uid, wl key)
    active: bool = True
    version: int = 0


@dataclass(slots=True)
class _Member:
    workload: Workload
    klass: _Class
    queue_time: float


class ClusterQueueQueue:
    """The pending queue of one ClusterQueue."""

    def __init__(self, strategy: QueueingStrategy) -> None:
        self.strategy = strategy
        self._classes: dict[Hashable, _Class] = {}
        self._members: dict[str, _Member] = {}
        # One valid entry per active non-empty class: (-priority, time, uid, version, class key).
        self._heads: list[tuple[int, float, str, int, Hashable]] = []
        self._inadmissible: set[Hashable] = set()
        self._versions = itertools.count(1)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def counts(self) -> tuple[int, int]:
        """(active, inadmissible) pending workloads."""
        inadmissible = sum(1 for m in self._members.values() if not m.klass.active)
        return len(self._members) - inadmissible, inadmissible

    def workloads(self) -> Iterator[Workload]:
        """Every pending workload, in no particular order."""
        return (m.workload for m in self._members.values())

    def push(self, workload: Workload, queue_time: float | None = None) -> None:
        """Add a workload (or put one back after it was taken out)."""
        key = equivalence_key(workload)
        klass = self._classes.get(key)
        if klass is None:
            klass = _Class(key, workload.priority)
            self._classes[key] = klass
        when = workload.creation_time if queue_time is None else queue_time
        self._members[workload.key] = _Member(workload, klass, when)
        old_top = self._top(klass)
        heapq.heappush(klass.heap, (when, workload.uid, workload.key))
        if klass.active and self._top(klass) != old_top:
            self._publish(klass)

    def remove(self, key: str) -> Workload | None:
        """Take a workload out (admitted, deleted or moved); returns it if it was here."""
        member = self._members.pop(key, None)
        if member is None:
            return None
        klass = member.klass
        was_top = bool(klass.heap) and klass.heap[0][2] == key
        self._drop_stale(klass)
        if not klass.heap:
            self._classes.pop(klass.key, None)
            self._inadmissible.discard(klass.key)
            klass.version = next(self._versions)
        elif was_top and klass.active:
            self._publish(klass)
        return member.workload

    def head(self) -> Workload | None:
        """The workload this ClusterQueue offers to the next cycle, if any."""
        heads = self._heads
        while heads:
            _, _, _, version, ckey = heads[0]
            klass = self._classes.get(ckey)
            top = None if klass is None or klass.version != version else self._top(klass)
            if klass is None or not klass.active or top is None:
                heapq.heappop(heads)
                continue
            return self._members[top[2]].workload
        return None

    def mark_inadmissible(self, workload: Workload) -> None:
        """The head could not fit: under BestEffortFIFO its whole class steps aside.

        Under StrictFIFO it stays the head and blocks the queue, as in Kueue.
        """
        if self.strategy is QueueingStrategy.STRICT_FIFO:
            return
        member = self._members.get(workload.key)
        if member is None or not member.klass.active:
            return
        member.klass.active = False
        member.klass.version = next(self._versions)
        self._inadmissible.add(member.klass.key)

    def requeue_inadmissible(self) -> int:
        """Something changed that may let inadmissible workloads fit: make them eligible again."""
        moved = 0
        for ckey in self._inadmissible:
            klass = self._classes.get(ckey)
            if klass is not None and not klass.active:
                klass.active = True
                moved += len(klass.heap)
                self._publish(klass)
        self._inadmissible.clear()
        return moved

    def is_inadmissible(self, key: str) -> bool:
        """Whether a pending workload is parked until the next requeue trigger."""
        member = self._members.get(key)
        return member is not None and not member.klass.active

    def _top(self, klass: _Class) -> tuple[float, str, str] | None:
        self._drop_stale(klass)
        return klass.heap[0] if klass.heap else None

    def _drop_stale(self, klass: _Class) -> None:
        heap = klass.heap
        members = self._members
        while heap:
            member = members.get(heap[0][2])
            if member is not None and member.klass is klass and member.queue_time == heap[0][0]:
                return
            heapq.heappop(heap)

    def _publish(self, klass: _Class) -> None:
        top = self._top(klass)
        klass.version = next(self._versions)
        if top is not None:
            heapq.heappush(self._heads, (-klass.priority, top[0], top[1], klass.version, klass.key))

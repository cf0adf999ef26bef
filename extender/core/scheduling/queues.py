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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from extender.core.api.models import Admission, QueueingStrategy, Workload

if TYPE_CHECKING:
    from extender.core.scheduling.flavors import QuickPlan
    from extender.core.scheduling.verdicts import Verdict


class ClassKey:
    """An equivalence class's key, hashed once: the queue looks classes and their kept memos
    up by it at every arrival and departure, and a nested tuple is hashed anew each time."""

    __slots__ = ("_hash", "parts")

    def __init__(self, parts: tuple[object, ...]) -> None:
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClassKey) and (
            self is other or (self._hash == other._hash and self.parts == other.parts)
        )

    def __repr__(self) -> str:
        return f"ClassKey{self.parts!r}"


def equivalence_key(workload: Workload) -> ClassKey:
    """Workloads with equal keys get the same flavor and quota verdict in the same state."""
    parts = (
        workload.namespace,
        workload.queue_name,
        workload.priority,
        workload.replacement_for,  # a scale-up slice counts its old slice's quota as its own
        workload.allowed_flavors,  # a concurrent-admission variant searches these only
        tuple(
            (
                ps.name,
                ps.count,
                tuple(sorted(ps.requests.items())),
                tuple(sorted(ps.node_selector.items())),
                ps.required_terms,
                ps.tolerations,
                ps.min_count,  # partial admission can shrink one and not the other
                ps.topology,  # placed on domains by it
            )
            for ps in workload.pod_sets
        ),
    )
    return ClassKey(parts)


@dataclass(slots=True, eq=False)
class ClassMemo:
    """What the scheduler keeps for one equivalence class (its members are judged and admitted
    alike). An emptied class is kept with it for a while (`MEMOS_KEPT`): a ClusterQueue whose
    workloads arrive one at a time empties and refills the same class again and again.

    * ``verdict``: the last "fits nowhere" verdict and the state it was found in
      (extender/core/scheduling/verdicts.py), so an unchanged state need not be judged again;
    * ``admission``: the last admission built for a member, and (``admission_flavors``) the
      flavors of each pod set it was built for;
    * ``plan``: quick_fit's plan (flavors.QuickPlan, None where only the search decides),
      valid for the configuration generation ``plan_generation``;
    * ``selected_epoch``: the cache's ``selection_epoch`` in which the ClusterQueue was
      found to select the class's namespace (-1: not known to).
    """

    verdict: Verdict | None = None
    admission: Admission | None = None
    admission_flavors: tuple[Mapping[str, str], ...] = ()
    plan: QuickPlan | None = None
    plan_generation: int = -1
    selected_epoch: int = -1


@dataclass(slots=True, eq=False)
class _Class:
    key: ClassKey
    priority: int
    lq: str  # namespace/name of the LocalQueue its members came through
    # (queue time, uid, member sequence, workload key); entries of removed members stay
    # until they reach the top. The top entry is always a current member's.
    heap: list[tuple[float, str, int, str]] = field(default_factory=list)
    active: bool = True
    version: int = 0
    memo: ClassMemo = field(default_factory=ClassMemo)


@dataclass(slots=True)
class _Member:
    workload: Workload
    klass: _Class
    seq: int


# An entry of the heads heap: (-priority, time, uid, class version, class, workload). The
# version is unique, so comparison never reaches the class; an entry is current while its
# version is the class's.
_HeadEntry = tuple[int, float, str, int, _Class, Workload]


# How many emptied classes (and their memos) a queue keeps, the most recently emptied (each
# is a few small objects; a queue of many shapes forgets the oldest).
MEMOS_KEPT = 32


class ClusterQueueQueue:
    """The pending queue of one ClusterQueue."""

    def __init__(self, strategy: QueueingStrategy) -> None:
        self.strategy = strategy
        self._classes: dict[ClassKey, _Class] = {}  # current and emptied ones
        self._emptied: dict[_Class, None] = {}  # emptied classes, oldest first
        self._members: dict[str, _Member] = {}
        # One current entry per active non-empty class.
        self._heads: list[_HeadEntry] = []
        self._inadmissible: set[_Class] = set()
        # Workloads backing off until their requeueAt: pending and counted as inadmissible
        # (as Kueue counts them), but in no class, so never offered to a cycle.
        self._held: dict[str, Workload] = {}
        # Admission fair sharing: a LocalQueue's usage, lowest first before priority (None:
        # off, the heads heap's own order).
        self.fair_usage: Callable[[str], float] | None = None
        self._versions = itertools.count(1)
        self._seqs = itertools.count(1)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def counts(self) -> tuple[int, int]:
        """(active, inadmissible) pending workloads."""
        inadmissible = sum(1 for m in self._members.values() if not m.klass.active)
        return len(self._members) - inadmissible, inadmissible + len(self._held)

    def workloads(self) -> Iterator[Workload]:
        """Every pending workload, backing-off ones too, in no particular order."""
        yield from (m.workload for m in self._members.values())
        yield from self._held.values()

    def hold(self, workload: Workload) -> None:
        """A workload backing off: pending here, but not offered until it is pushed again."""
        if workload.key in self._members:
            self.remove(workload.key)
        self._held[workload.key] = workload

    def is_held(self, key: str) -> bool:
        """Whether a pending workload is backing off (held out of every class)."""
        return key in self._held

    def push(self, workload: Workload, queue_time: float | None = None) -> ClassMemo | None:
        """Add a workload (or put one back after it was taken out); the memo of its class if
        the class was made for it (its first member, or the first after it emptied)."""
        if workload.key in self._members or (self._held and workload.key in self._held):
            self.remove(workload.key)
        key = equivalence_key(workload)
        klass = self._classes.get(key)
        made = None
        if klass is None:
            klass = _Class(key, workload.priority, f"{workload.namespace}/{workload.queue_name}")
            self._classes[key] = klass
            made = klass.memo
        elif not klass.heap:  # emptied, kept for its memo: refilled now, as a new class
            del self._emptied[klass]
            klass.active = True
            made = klass.memo
        when = workload.creation_time if queue_time is None else queue_time
        seq = next(self._seqs)
        self._members[workload.key] = _Member(workload, klass, seq)
        heap = klass.heap
        old_top = heap[0] if heap else None
        entry = (when, workload.uid, seq, workload.key)
        heapq.heappush(heap, entry)
        if klass.active and heap[0] is not old_top:
            self._publish(klass)
        return made

    def remove(self, key: str) -> Workload | None:
        """Take a workload out (admitted, deleted or moved); returns it if it was here."""
        held = self._held.pop(key, None)
        if held is not None:
            return held
        member = self._members.pop(key, None)
        if member is None:
            return None
        klass = member.klass
        heap = klass.heap
        if heap[0][2] != member.seq:
            return member.workload  # its entry is dropped when it reaches the top
        heapq.heappop(heap)
        if heap:  # the next entry is usually a current member's: no call to learn that
            top = heap[0]
            next_member = self._members.get(top[3])
            if next_member is None or next_member.seq != top[2]:
                self._drop_stale(heap)
        if not heap:
            # Kept, with its memo, until it refills or more recently emptied ones push it
            # out: keyed by the class itself, so no key is hashed here.
            emptied = self._emptied
            emptied[klass] = None
            if len(emptied) > MEMOS_KEPT:
                oldest = next(iter(emptied))
                del emptied[oldest]
                del self._classes[oldest.key]
            self._inadmissible.discard(klass)
            klass.version = next(self._versions)
        elif klass.active:
            self._publish(klass)
        return member.workload

    def head(self) -> Workload | None:
        """The workload this ClusterQueue offers to the next cycle, if any."""
        offered = self.offer()
        return None if offered is None else offered[0]

    def offer(self) -> tuple[Workload, ClassMemo] | None:
        """The workload this ClusterQueue offers to the next cycle, and its class's memo (a
        cycle asks for both of every queue's head: one call, no lookup by key)."""
        if self.fair_usage is not None:
            best = self._fair_head(self.fair_usage)
            return None if best is None else (best[5], best[4].memo)
        heads = self._heads
        while heads:
            entry = heads[0]
            klass = entry[4]
            if klass.version == entry[3]:
                return entry[5], klass.memo
            heapq.heappop(heads)
        return None

    def _fair_head(self, usage: Callable[[str], float]) -> _HeadEntry | None:
        """With admission fair sharing: the head of the class whose LocalQueue has used the
        least, then by priority and queue order (usages change between cycles, so every
        current head is looked at: the cost grows with the active classes, not the
        workloads)."""
        best: _HeadEntry | None = None
        best_key: tuple[float, int, float, str] | None = None
        seen: dict[str, float] = {}
        live = 0
        for entry in self._heads:
            klass = entry[4]
            if klass.version != entry[3]:
                continue
            live += 1
            used = seen.get(klass.lq)
            if used is None:
                used = seen[klass.lq] = usage(klass.lq)
            key = (used, entry[0], entry[1], entry[2])
            if best_key is None or key < best_key:
                best, best_key = entry, key
        if len(self._heads) > 2 * live + 16:  # drop stale entries the top did not reach
            self._heads = [e for e in self._heads if e[4].version == e[3]]
            heapq.heapify(self._heads)
        return best

    def mark_inadmissible(self, workload: Workload, *, even_strict: bool = False) -> bool:
        """The head could not fit: under BestEffortFIFO its whole class steps aside.

        Under StrictFIFO it stays the head and blocks the queue, as in Kueue, unless
        `even_strict` (its namespace may not use the ClusterQueue: waiting at the head would
        block the queue for good). Returns whether the queue moved (the class stepped aside).
        """
        if self.strategy is QueueingStrategy.STRICT_FIFO and not even_strict:
            return False
        member = self._members.get(workload.key)
        if member is None or not member.klass.active:
            return False
        member.klass.active = False
        member.klass.version = next(self._versions)
        self._inadmissible.add(member.klass)
        return True

    def requeue_inadmissible(self) -> int:
        """Something changed that may let inadmissible workloads fit: make them eligible again."""
        moved = 0
        for klass in self._inadmissible:
            if not klass.active and klass.heap:
                klass.active = True
                moved += len(klass.heap)
                self._publish(klass)
        self._inadmissible.clear()
        return moved

    def class_head(self, key: str) -> str | None:
        """The first workload of this one's equivalence class: the one a cycle tries for all
        of them, whose reason is theirs too."""
        member = self._members.get(key)
        if member is None:
            return None
        heap = member.klass.heap
        self._drop_stale(heap)
        return heap[0][3] if heap else None

    def memo(self, workload: Workload) -> ClassMemo | None:
        """What the scheduler keeps for this pending workload's equivalence class (None: the
        workload is not queued here)."""
        member = self._members.get(workload.key)
        return None if member is None else member.klass.memo

    def is_inadmissible(self, key: str) -> bool:
        """Whether a pending workload is parked until the next requeue trigger (or backing off)."""
        member = self._members.get(key)
        return (member is not None and not member.klass.active) or key in self._held

    def _drop_stale(self, heap: list[tuple[float, str, int, str]]) -> None:
        members = self._members
        while heap:
            member = members.get(heap[0][3])
            if member is not None and member.seq == heap[0][2]:
                return
            heapq.heappop(heap)

    def _publish(self, klass: _Class) -> None:
        klass.version = version = next(self._versions)
        when, uid, _, key = klass.heap[0]
        entry = (-klass.priority, when, uid, version, klass, self._members[key].workload)
        heads = self._heads
        if heads and heads[0][4] is klass:
            # The class was the queue's head (it usually is: its head was just admitted);
            # its old entry is stale from now on, so the new one takes its place.
            heapq.heapreplace(heads, entry)
        else:
            heapq.heappush(heads, entry)

"""Kueue's visibility answers: a queue's pending workloads, a page at a time, in queue order.

Each one comes with its position in its ClusterQueue and in its LocalQueue.

Kueue lists every pending workload of a ClusterQueue (those the next cycles may try and those
set aside as inadmissible alike) sorted by priority (higher first), then queue time, then
uid; where the ClusterQueue uses admission fair sharing, by its LocalQueue's usage (lower
first) before that. `PendingPositions` keeps that order as it changes: the queue manager
tells it each arrival and departure (O(LOAD + n/LOAD) each, ranked.py), so a page of `limit`
workloads at any offset costs O(limit + d log n), d the LocalQueues on the page, and never a
sort. Positions start at 0, as Kueue's.

One thread (the controller's loop) changes it; others (the HTTP server's) read it. The
sequences are never changed in place (ranked.py), so a reader needs the `guard` (a lock the
caller passes in; none when one thread does both) only to pick up the current ones, and
holds it for microseconds; the loop holds it only to put new ones in place.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from itertools import islice
from typing import Protocol

from extender.core.api.models import Workload
from extender.core.scheduling.ranked import Ranked

# (-priority, queue time, uid, key, LocalQueue key, workload): Kueue's order up to the key,
# which is unique, so a comparison never reaches the last two.
Entry = tuple[int, float, str, str, str, Workload]

Guard = AbstractContextManager[object]

_NONE: Ranked[Entry] = Ranked()


def local_queue_key(workload: Workload) -> str:
    """namespace/name of the LocalQueue a workload was submitted to."""
    return f"{workload.namespace}/{workload.queue_name}"


def queue_order_key(workload: Workload) -> tuple[int, float, str, str]:
    """Kueue's order of a ClusterQueue's pending workloads (without admission fair sharing):
    higher priority first, then earlier queue time, then uid (the key breaks what is left)."""
    return (*workload.order, workload.key)


def _entry(workload: Workload) -> Entry:
    return (*workload.order, workload.key, local_queue_key(workload), workload)


@dataclass(frozen=True, slots=True)
class PendingWorkload:
    """One pending workload of an answer, with its positions (from 0)."""

    workload: Workload
    position_in_cluster_queue: int
    position_in_local_queue: int


class _Segment(Protocol):
    """Workloads that come together in a ClusterQueue's order (all of them without admission
    fair sharing; with it, the LocalQueues of one usage)."""

    def __len__(self) -> int: ...

    def between(self, start: int, stop: int) -> list[Entry]: ...

    def rank(self, entry: Entry) -> int: ...


class _Merged:
    """LocalQueues whose usage ties, merged by Kueue's order. A page's first item is found by
    bisecting the ClusterQueue's whole order (how many of theirs come before each place:
    O(log² n · k) for k LocalQueues), then each LocalQueue is read from there, merged:
    O(limit · log k)."""

    def __init__(self, parts: list[Ranked[Entry]], order: Ranked[Entry]) -> None:
        self.parts = parts
        self.order = order
        self.size = sum(map(len, parts))

    def __len__(self) -> int:
        return self.size

    def between(self, start: int, stop: int) -> list[Entry]:
        start, stop = max(start, 0), min(stop, self.size)
        if start >= stop:
            return []
        lo, hi = 0, len(self.order)  # the first place with `start` of theirs before it
        while lo < hi:
            mid = (lo + hi) // 2
            if self.rank(self.order.between(mid, mid + 1)[0]) < start:
                lo = mid + 1
            else:
                hi = mid
        if lo == len(self.order):
            return []
        first = self.order.between(lo, lo + 1)[0]
        merged = heapq.merge(*(part.iterate(part.rank(first)) for part in self.parts))
        return list(islice(merged, stop - start))

    def rank(self, entry: Entry) -> int:
        return sum(part.rank(entry) for part in self.parts)


@dataclass(frozen=True, slots=True)
class _View:
    """One ClusterQueue's pending workloads as of one moment (nothing here changes)."""

    order: Ranked[Entry]
    by_local_queue: Mapping[str, Ranked[Entry]]
    usage: Mapping[str, float] | None  # each LocalQueue's, with admission fair sharing

    def segments(self) -> list[tuple[tuple[str, ...], _Segment]]:
        """The ClusterQueue's order as consecutive segments, each with its LocalQueues."""
        usage, by_lq = self.usage, self.by_local_queue
        if usage is None or len(by_lq) < 2:
            return [(tuple(by_lq), self.order)]
        ordered = sorted(by_lq, key=lambda lq: usage.get(lq, 0.0))
        groups: list[list[str]] = []
        for lq in ordered:
            if groups and usage.get(lq, 0.0) == usage.get(groups[-1][0], 0.0):
                groups[-1].append(lq)
            else:
                groups.append([lq])
        out: list[tuple[tuple[str, ...], _Segment]] = []
        for group in groups:
            segment: _Segment
            if len(group) == 1:
                segment = by_lq[group[0]]
            elif len(group) == len(by_lq):
                segment = self.order  # every LocalQueue ties: the plain order
            else:
                segment = _Merged([by_lq[lq] for lq in group], self.order)
            out.append((tuple(group), segment))
        return out

    def cluster_queue_page(self, offset: int, limit: int) -> list[PendingWorkload]:
        out: list[PendingWorkload] = []
        stop = offset + limit
        base = 0
        # A LocalQueue's workloads on one page are consecutive in that LocalQueue: its first
        # is ranked there, the next ones follow it.
        next_in_lq: dict[str, int] = {}
        for _, segment in self.segments():
            size = len(segment)
            if base >= stop:
                break
            if base + size > offset:
                first = max(offset - base, 0)
                for i, entry in enumerate(segment.between(first, stop - base)):
                    lq = entry[4]
                    in_lq = next_in_lq.get(lq)
                    if in_lq is None:
                        in_lq = self.by_local_queue[lq].rank(entry)
                    next_in_lq[lq] = in_lq + 1
                    out.append(PendingWorkload(entry[5], base + first + i, in_lq))
            base += size
        return out

    def local_queue_page(self, lq: str, offset: int, limit: int) -> list[PendingWorkload]:
        ranked = self.by_local_queue.get(lq)
        if ranked is None:
            return []
        entries = ranked.between(offset, offset + limit)
        base = 0
        segment: _Segment = self.order
        for lqs, candidate in self.segments():
            if lq in lqs:  # where its LocalQueue's usage puts it (the whole order without)
                segment = candidate
                break
            base += len(candidate)
        return [
            PendingWorkload(entry[5], base + segment.rank(entry), offset + i)
            for i, entry in enumerate(entries)
        ]


class _Line:
    """One ClusterQueue's current sequences (replaced, never changed, under the guard)."""

    __slots__ = ("by_local_queue", "order", "usage")

    def __init__(self) -> None:
        self.order: Ranked[Entry] = _NONE
        self.by_local_queue: dict[str, Ranked[Entry]] = {}
        self.usage: Mapping[str, float] | None = None


class PendingPositions:
    """Every ClusterQueue's pending workloads in Kueue's order, and each LocalQueue's, kept
    as they change (see the module's docstring)."""

    def __init__(self, guard: Guard | None = None) -> None:
        self._guard: Guard = guard if guard is not None else nullcontext()
        self._lines: dict[str, _Line] = {}
        self._entries: dict[str, tuple[str, Entry]] = {}  # the writer's own: key -> its place
        # Replaced whole, never changed: a reader takes either the old or the new one.
        self._cluster_queues: frozenset[str] = frozenset()
        self._local_queues: Mapping[str, str] = {}  # LocalQueue key -> its ClusterQueue

    # ----- what the queue manager tells it (one thread) -------------------------------

    def configure(self, cluster_queues: Iterable[str], local_queues: Mapping[str, str]) -> None:
        """The ClusterQueues and LocalQueues that exist (an answer for another is None)."""
        self._cluster_queues = frozenset(cluster_queues)
        self._local_queues = dict(local_queues)

    def add(self, cluster_queue: str, workload: Workload) -> None:
        """A workload now waits in this ClusterQueue's queue (in place of its old version)."""
        if workload.key in self._entries:
            self.remove(workload.key)
        entry = _entry(workload)
        line = self._lines.get(cluster_queue)
        if line is None:
            with self._guard:
                line = self._lines[cluster_queue] = _Line()
        order = line.order.insert(entry)
        in_lq = line.by_local_queue.get(entry[4], _NONE).insert(entry)
        with self._guard:
            line.order = order
            line.by_local_queue[entry[4]] = in_lq
        self._entries[workload.key] = (cluster_queue, entry)

    def remove(self, key: str) -> None:
        """A workload left its queue (admitted, deleted, moved); nothing if it was in none."""
        place = self._entries.pop(key, None)
        if place is None:
            return
        cluster_queue, entry = place
        line = self._lines[cluster_queue]
        order = line.order.remove(entry)
        in_lq = line.by_local_queue[entry[4]].remove(entry)
        with self._guard:
            line.order = order
            if in_lq:
                line.by_local_queue[entry[4]] = in_lq
            else:
                del line.by_local_queue[entry[4]]

    def load(self, cluster_queue: str, workloads: Iterable[Workload]) -> None:
        """A ClusterQueue's whole queue at once, in place of what it held (sorted once,
        O(n log n), where one `add` at a time would copy chunks n times)."""
        self.drop(cluster_queue)
        entries: dict[str, Entry] = {}
        for workload in workloads:
            self.remove(workload.key)  # it waited in another ClusterQueue
            entries[workload.key] = _entry(workload)
        by_lq: dict[str, list[Entry]] = {}
        for key, entry in entries.items():
            self._entries[key] = (cluster_queue, entry)
            by_lq.setdefault(entry[4], []).append(entry)
        line = _Line()
        line.order = Ranked.of(entries.values())
        line.by_local_queue = {lq: Ranked.of(group) for lq, group in by_lq.items()}
        with self._guard:
            self._lines[cluster_queue] = line

    def drop(self, cluster_queue: str) -> None:
        """A ClusterQueue's queue is gone, and every workload that waited in it."""
        line = self._lines.get(cluster_queue)
        if line is None:
            return
        for entry in line.order:
            self._entries.pop(entry[3], None)
        with self._guard:
            del self._lines[cluster_queue]

    def set_usage(self, cluster_queue: str, usage: Mapping[str, float] | None) -> None:
        """Its LocalQueues' admission fair sharing usage (None: it does not use it)."""
        line = self._lines.get(cluster_queue)
        if line is not None and (usage is not None or line.usage is not None):
            frozen = None if usage is None else dict(usage)
            with self._guard:
                line.usage = frozen

    def local_queues_in(self, cluster_queue: str) -> list[str]:
        """The LocalQueues with a workload waiting in this ClusterQueue (the writer's view)."""
        line = self._lines.get(cluster_queue)
        return list(line.by_local_queue) if line is not None else []

    # ----- answers (any thread) ---------------------------------------------------------

    def _view(self, cluster_queue: str) -> _View:
        with self._guard:
            line = self._lines.get(cluster_queue)
            if line is None:
                return _View(_NONE, {}, None)
            return _View(line.order, dict(line.by_local_queue), line.usage)

    def cluster_queue(self, name: str, offset: int, limit: int) -> list[PendingWorkload] | None:
        """`limit` pending workloads of a ClusterQueue from position `offset` (None: no such
        ClusterQueue)."""
        if name not in self._cluster_queues:
            return None
        return self._view(name).cluster_queue_page(max(offset, 0), max(limit, 0))

    def local_queue(
        self, namespace: str, name: str, offset: int, limit: int
    ) -> list[PendingWorkload] | None:
        """`limit` pending workloads of a LocalQueue from its position `offset` (None: no
        such LocalQueue; none pending when its ClusterQueue does not exist)."""
        lq = f"{namespace}/{name}"
        cluster_queue = self._local_queues.get(lq)
        if cluster_queue is None:
            return None
        view = self._view(cluster_queue)
        return view.local_queue_page(lq, max(offset, 0), max(limit, 0))


def ordered(
    workloads: Iterable[Workload], usage: Callable[[str], float] | None = None
) -> list[Workload]:
    """Workloads in Kueue's queue order, sorted (the oracle the tests hold the positions to;
    `usage`: each LocalQueue's admission fair sharing usage, when the ClusterQueue uses it)."""
    if usage is None:
        return sorted(workloads, key=queue_order_key)
    return sorted(workloads, key=lambda w: (usage(local_queue_key(w)), *queue_order_key(w)))

"""Where the visibility API's answers come from: the leader's live queues, or on a replica
that stands by (it keeps no queues), its watch caches read as `kubectl tower queue` reads a
cluster, at most once per interval.

The Service in front of the API reaches every replica, and kube-aggregator sends each
request to any of them, so a standby must answer too (Kueue's followers keep their queue
manager fed for this). Its answers are as old as its last read (2 s, or five times what a
read takes, at most), in Kueue's order without admission fair sharing's usage, which only
the leader keeps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from extender.core.scheduling.visibility import PendingPositions
from extender.kube.api.resources import WORKLOADS, Resource
from extender.kube.api.snapshot import load
from extender.kube.api.store import Store
from extender.kube.api.trim import FinishedWorkload


class _CacheLister:
    """The watch caches read as `snapshot.load` reads an API server (list only); finished
    Workloads wait nowhere and hold nothing, so they are left out."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def list(self, resource: Resource, *args: Any, **kwargs: Any) -> tuple[list[Any], str]:
        items = [o for _, o in self.store.items(resource) if not isinstance(o, FinishedWorkload)]
        return items, ""


class CachedPositions:
    """A standby's answers, from its caches through the core's builder (see the module).

    A read costs about 70 µs of CPU per Workload (3.6 s at 50,000, bench/visibility.py), so
    reads are spaced by `interval` or by `spacing` times the last read's duration, whichever
    is longer (about a sixth of a core at most, by default), and a stale answer is served while the
    next read runs in the background: only the first request waits for a read.
    """

    def __init__(
        self,
        store: Store,
        *,
        interval: float = 2.0,
        spacing: float = 5.0,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
        spawn: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.store = store
        self.interval = interval
        self.spacing = spacing
        self.monotonic = monotonic
        self.clock = clock
        self.spawn = spawn or _in_background
        self._lock = threading.Lock()  # held only to look at or set the fields below
        self._read_lock = threading.Lock()  # one read of the caches at a time
        self._positions: PendingPositions | None = None
        self._next_read = 0.0
        self._reading = False

    def __call__(self) -> PendingPositions | None:
        with self._lock:
            positions = self._positions
            due = positions is not None and not self._reading
            due = due and self.monotonic() >= self._next_read
            self._reading = self._reading or due
        if due:
            self.spawn(self._read_later)
        if positions is not None:
            return positions
        with self._read_lock:  # the first answer waits for the first read
            if self._positions is None and self.store.synced(WORKLOADS).is_set():
                self._read()
            return self._positions  # None while the caches have not listed Workloads

    def _read_later(self) -> None:
        try:
            with self._read_lock:
                self._read()
        finally:
            with self._lock:
                self._reading = False

    def _read(self) -> None:
        started = self.monotonic()
        snapshot = load(_CacheLister(self.store), self.clock())  # type: ignore[arg-type]
        positions = snapshot.state.queues.keep_positions()
        took = self.monotonic() - started
        with self._lock:
            self._positions = positions
            self._next_read = started + took + max(self.interval, self.spacing * took)


def _in_background(read: Callable[[], None]) -> None:
    threading.Thread(target=read, name="visibility-cache-read", daemon=True).start()


def leader_or_cached(
    leader: Callable[[], PendingPositions | None], cached: Callable[[], PendingPositions | None]
) -> Callable[[], PendingPositions | None]:
    """The leader's live queues while this replica leads and has built them, else the
    caches' (the runtime passes the current term's `Controller.positions`)."""

    def positions() -> PendingPositions | None:
        live = leader()
        return live if live is not None else cached()

    return positions

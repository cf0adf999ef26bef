"""Where the visibility API's answers come from: the leader's live queues, or on a replica
that stands by (it keeps no queues), its watch caches read as `kubectl tower queue` reads a
cluster, at most once per interval.

The Service in front of the API reaches every replica, and kube-aggregator sends each
request to any of them, so a standby must answer too (Kueue's followers keep their queue
manager fed for this). Its answers are as old as its last read, `interval` seconds at most,
and use Kueue's order without admission fair sharing's usage, which only the leader keeps.
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
    """A standby's answers, from its caches through the core's builder (see the module)."""

    def __init__(
        self,
        store: Store,
        *,
        interval: float = 2.0,
        monotonic: Callable[[], float] = time.monotonic,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.interval = interval
        self.monotonic = monotonic
        self.clock = clock
        self._lock = threading.Lock()  # one read of the caches at a time; the others wait
        self._positions: PendingPositions | None = None
        self._read_at = 0.0

    def __call__(self) -> PendingPositions | None:
        with self._lock:
            fresh = self.monotonic() - self._read_at < self.interval
            if self._positions is not None and fresh:
                return self._positions
            if not self.store.synced(WORKLOADS).is_set():
                return self._positions  # None until the caches have listed once
            snapshot = load(_CacheLister(self.store), self.clock())  # type: ignore[arg-type]
            self._positions = snapshot.state.queues.keep_positions()
            self._read_at = self.monotonic()
            return self._positions


def leader_or_cached(
    leader: Callable[[], PendingPositions | None], cached: Callable[[], PendingPositions | None]
) -> Callable[[], PendingPositions | None]:
    """The leader's live queues while this replica leads and has built them, else the
    caches' (the runtime passes the current term's `Controller.positions`)."""

    def positions() -> PendingPositions | None:
        live = leader()
        return live if live is not None else cached()

    return positions

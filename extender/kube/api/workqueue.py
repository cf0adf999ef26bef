"""Keys waiting to be reconciled: de-duplicated, delayed, retried with exponential backoff.

As client-go's rate-limited work queue: watch events only add keys; a key added while it
waits is not added twice, so the queue never holds more entries than there are objects,
however many events arrive. A failed reconcile is retried after a per-key delay that
doubles with each failure (with jitter) up to a cap; a success forgets the failures.
Keys may carry a priority: the highest is handed out first, FIFO among equals.

Adds come from the watch threads, the reconcilers run on one thread; `wait` lets that
thread sleep until a key is due or `wake()` is called.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Backoff:
    """Per-key exponential backoff: base · 2^failures, capped, with ±10% jitter."""

    def __init__(
        self, base: float = 0.05, cap: float = 60.0, rng: random.Random | None = None
    ) -> None:
        self.base = base
        self.cap = cap
        self._rng = rng or random.Random()

    def delay(self, failures: int) -> float:
        raw: float = min(self.cap, self.base * (2.0 ** min(failures, 30)))
        return raw * (0.9 + 0.2 * self._rng.random())


class WorkQueue(Generic[K]):
    """De-duplicating, delaying, prioritising queue of keys; thread-safe."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        backoff: Backoff | None = None,
        wakeup: threading.Event | None = None,
    ) -> None:
        self._clock = clock
        self.backoff = backoff or Backoff()
        self.wakeup = wakeup or threading.Event()
        self._lock = threading.Lock()
        self._seq = itertools.count()
        self._ready: list[tuple[int, int, K]] = []  # (-priority, seq, key)
        self._queued: dict[K, int] = {}  # key -> the priority it waits with
        self._delayed: list[tuple[float, int, K]] = []  # (due, seq, key)
        self._due: dict[K, float] = {}
        self._failures: dict[K, int] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._queued) + len(self._due)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._queued or key in self._due

    def add(self, key: K, priority: int = 0) -> None:
        """Reconcile `key` as soon as possible (once, however often it is added)."""
        with self._lock:
            self._add(key, priority)
        self.wakeup.set()

    def _add(self, key: K, priority: int) -> None:
        current = self._queued.get(key)
        if current is not None and current >= priority:
            return
        self._queued[key] = priority  # a higher priority re-inserts; the old entry is stale
        heapq.heappush(self._ready, (-priority, next(self._seq), key))
        self._due.pop(key, None)

    def add_after(self, key: K, delay: float) -> None:
        """Reconcile `key` after `delay` seconds (sooner if it is added meanwhile)."""
        if delay <= 0:
            self.add(key)
            return
        due = self._clock() + delay
        with self._lock:
            if key in self._queued:
                return
            current = self._due.get(key)
            if current is not None and current <= due:
                return
            self._due[key] = due
            heapq.heappush(self._delayed, (due, next(self._seq), key))
        self.wakeup.set()

    def retry(self, key: K, at_least: float = 0.0) -> float:
        """A reconcile of `key` failed: try again after its backoff (or `at_least`, such
        as a Retry-After); the delay chosen is returned."""
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        delay = max(at_least, self.backoff.delay(failures))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """A reconcile of `key` succeeded: its next failure starts the backoff afresh."""
        with self._lock:
            self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        with self._lock:
            return self._failures.get(key, 0)

    def pop(self) -> K | None:
        """The next key that is due, highest priority first; None when none is."""
        with self._lock:
            self._promote()
            while self._ready:
                negative, _, key = heapq.heappop(self._ready)
                if self._queued.get(key) == -negative:
                    del self._queued[key]
                    return key
            return None

    def next_due(self) -> float | None:
        """Seconds until the next key is due (0 when one is ready), None when empty."""
        with self._lock:
            self._promote()
            if self._queued:
                return 0.0
            while self._delayed and self._due.get(self._delayed[0][2]) != self._delayed[0][0]:
                heapq.heappop(self._delayed)
            if not self._delayed:
                return None
            return max(0.0, self._delayed[0][0] - self._clock())

    def _promote(self) -> None:
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) == due:
                del self._due[key]
                self._add(key, 0)


def wait(wakeup: threading.Event, queues: list[WorkQueue[K]], idle: float) -> None:
    """Sleep until a key of `queues` is due, `wakeup` is set, or `idle` seconds pass."""
    timeout = idle
    for queue in queues:
        due = queue.next_due()
        if due is not None:
            timeout = min(timeout, due)
    if timeout > 0:
        wakeup.wait(timeout)
    wakeup.clear()

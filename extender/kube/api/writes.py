"""Writes in flight together: a bounded pool of sender threads that keeps each object's
writes in order and hands every answer back to the loop's thread.

The controller's state (the core, the reconcilers' bookkeeping) is only ever touched on the
loop's thread. A sender thread does nothing but the HTTP request a write was given; its
answer, or its failure, waits in `answered` until the loop calls `complete()`, which runs the
write's `done` on the loop's thread. So concurrency buys parallel round trips to the API
server and nothing else can race.

- Per object, writes go out one at a time, in the order submitted: the next write to an
  object is handed to a sender only once the loop has taken in the answer to the one before
  (a reconcile of a busy object waits for that too: `when_idle`). Two writes to one object
  never race.
- The budget (`--kube-api-qps` / `--kube-api-burst`) and the lease's fence are the client's:
  a sender waits for its token, and the fence is asked right before the request is sent. A
  write the fence refuses stops the pool: what is queued is abandoned, never sent, and the
  loop's next `complete()` raises NotLeaderError, which ends the term.
- A lower `priority` number is sent first (starts, then admissions, then creations), FIFO
  among equals, so a backlog of new Workloads never holds back the jobs already admitted.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from extender.kube.api.client import KubeError, NotLeaderError

log = logging.getLogger("tower.writes")

Done = Callable[[Any, BaseException | None], None]

# Priorities: what is closest to a running job goes first.
START = 0
ADMIT = 1
CREATE = 2


class WriteObserver:
    """What the pool tells about itself (metrics); the default tells no one."""

    def queued(self, count: int) -> None:
        """Writes waiting for a sender (including those behind a write to the same object)."""

    def in_flight(self, count: int) -> None:
        """Writes a sender is working on."""

    def waited(self, seconds: float) -> None:
        """One write waited this long between submit and its sender taking it."""


@dataclass(slots=True, eq=False)
class Write:
    key: Hashable
    call: Callable[[], Any]
    done: Done
    priority: int
    submitted: float
    result: Any = None
    error: BaseException | None = None
    seq: int = field(default=0)


class WritePool:
    """`size` sender threads; `submit` from the loop's thread, `complete` on it too."""

    def __init__(
        self,
        size: int,
        *,
        wakeup: threading.Event | None = None,
        observer: WriteObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
        name: str = "tower-write",
    ) -> None:
        if size < 1:
            raise ValueError("the write pool needs at least one sender")
        self.size = size
        self.wakeup = wakeup or threading.Event()
        self.observer = observer or WriteObserver()
        self.clock = clock
        self._cond = threading.Condition()
        self._seq = itertools.count()
        self._ready: list[tuple[int, int, Write]] = []  # heads of their object's chain
        self._chains: dict[Hashable, deque[Write]] = {}  # object -> its writes, head first
        self._answered: deque[Write] = deque()
        self._idle: dict[Hashable, list[Callable[[], None]]] = {}
        self._in_flight = 0
        self._queued = 0
        self._queued_by_priority: Counter[int] = Counter()
        self._stopped = False
        self.fenced: NotLeaderError | None = None
        self.max_in_flight = 0  # the most writes in flight at once (for tests and benchmarks)
        self._threads = [
            threading.Thread(target=self._send, name=f"{name}-{i}", daemon=True)
            for i in range(size)
        ]
        for thread in self._threads:
            thread.start()

    # ----- the loop's side ---------------------------------------------------------------

    def submit(
        self, key: Hashable, call: Callable[[], Any], done: Done, *, priority: int = ADMIT
    ) -> None:
        """Send `call()` once every earlier write to `key` was answered and taken in; `done`
        then runs on the loop's thread with (answer, None) or (None, error)."""
        if self.fenced is not None:
            raise self.fenced
        write = Write(key, call, done, priority, self.clock(), seq=next(self._seq))
        with self._cond:
            if self._stopped:
                raise NotLeaderError("the write pool is stopped: this term is over")
            self._queued += 1
            self._queued_by_priority[priority] += 1
            chain = self._chains.get(key)
            if chain is not None:
                chain.append(write)
            else:
                self._chains[key] = deque((write,))
                heapq.heappush(self._ready, (priority, write.seq, write))
                self._cond.notify()
            queued = self._queued
        self.observer.queued(queued)

    def busy(self, key: Hashable) -> bool:
        """Whether a write to `key` is queued, in flight, or answered but not taken in."""
        with self._cond:
            return key in self._chains

    def when_idle(self, key: Hashable, then: Callable[[], None]) -> None:
        """Run `then` (on the loop's thread) once `key` has no write left; now if it has none."""
        with self._cond:
            if key in self._chains:
                self._idle.setdefault(key, []).append(then)
                return
        then()

    def has_answers(self) -> bool:
        with self._cond:
            return bool(self._answered)

    @property
    def queued(self) -> int:
        with self._cond:
            return self._queued

    def queued_at(self, priority: int) -> int:
        """Writes of this priority not yet handed to a sender."""
        with self._cond:
            return self._queued_by_priority[priority]

    @property
    def in_flight(self) -> int:
        with self._cond:
            return self._in_flight

    def complete(self) -> int:
        """Take in every answered write: the next write to its object may go, and its `done`
        runs here. Raises NotLeaderError once the fence refused a write."""
        count = 0
        while True:
            with self._cond:
                if not self._answered:
                    break
                write = self._answered.popleft()
                idle = self._release(write)
            count += 1
            if not isinstance(write.error, NotLeaderError):
                self._done(write)
            for then in idle:
                then()
        if self.fenced is not None:
            raise self.fenced
        return count

    def run(self, key: Hashable, call: Callable[[], Any]) -> Any:
        """A write on the caller's (the loop's) thread, sent after the writes to `key`
        already submitted were answered and taken in (their `done` has run)."""
        while True:
            with self._cond:
                if key not in self._chains or self._stopped:
                    break
                if not self._answered:
                    self._cond.wait(0.5)
            self.complete()
        return call()

    def stop(self) -> int:
        """End of the term: what is queued is abandoned (never sent); the senders end once
        their request is answered. The number abandoned is returned."""
        with self._cond:
            self._stopped = True
            abandoned = self._abandon()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout=0.05)
        return abandoned

    # ----- the senders' side -------------------------------------------------------------

    def _send(self) -> None:
        while True:
            with self._cond:
                while not self._ready and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                _, _, write = heapq.heappop(self._ready)
                self._queued -= 1
                self._queued_by_priority[write.priority] -= 1
                self._in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self._in_flight)
                queued, in_flight = self._queued, self._in_flight
            self.observer.queued(queued)
            self.observer.in_flight(in_flight)
            self.observer.waited(max(0.0, self.clock() - write.submitted))
            try:
                write.result = write.call()
            except NotLeaderError as err:
                write.error = err
                with self._cond:
                    if self.fenced is None:
                        self.fenced = err
                        dropped = self._abandon()
                        if dropped:
                            log.warning(
                                "the lease was lost: %d queued writes abandoned, never sent",
                                dropped,
                            )
            except BaseException as err:  # handed to the loop, which knows what it means
                write.error = err
            with self._cond:
                self._in_flight -= 1
                in_flight = self._in_flight
                self._answered.append(write)
                self._cond.notify_all()
            self.observer.in_flight(in_flight)
            self.wakeup.set()

    # ----- bookkeeping (under the lock) --------------------------------------------------

    def _release(self, write: Write) -> list[Callable[[], None]]:
        """`write` was taken in: the next write to its object is ready, or the object is
        idle (and what waited for that is returned, to run outside the lock)."""
        chain = self._chains.get(write.key)
        if chain is None or not chain or chain[0] is not write:
            return []
        chain.popleft()
        if chain and not self._stopped:
            following = chain[0]
            heapq.heappush(self._ready, (following.priority, following.seq, following))
            self._cond.notify()
            return []
        del self._chains[write.key]
        return self._idle.pop(write.key, [])

    def _abandon(self) -> int:
        """Drop every write not yet handed to a sender (their objects' chains too)."""
        dropped = 0
        for _, _, write in self._ready:
            chain = self._chains.get(write.key)
            if chain is not None and chain[0] is write:
                dropped += len(chain)
                del self._chains[write.key]
        self._ready.clear()
        # Chains whose head is in flight or answered keep only that head.
        for chain in self._chains.values():
            while len(chain) > 1:
                chain.pop()
                dropped += 1
        self._queued = 0
        self._queued_by_priority.clear()
        self.observer.queued(0)
        return dropped

    def _done(self, write: Write) -> None:
        try:
            write.done(write.result, write.error)
        except NotLeaderError:
            raise
        except KubeError as err:
            log.warning("after a write to %s: %s", write.key, err)
        except Exception:  # a bug in a callback must not end the loop
            log.exception("after a write to %s", write.key)


__all__ = ["ADMIT", "CREATE", "START", "WriteObserver", "WritePool"]

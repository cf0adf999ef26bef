"""The write pool: writes in flight together, bounded; each object's in order; the fence
stops it; answers are taken in on the caller's thread."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from extender.kube.api.client import ApiError, NotLeaderError
from extender.kube.api.writes import ADMIT, CREATE, START, WritePool


class Server:
    """Stands in for the API server: each request takes `latency` seconds; it records who
    was in flight at once, per object and overall."""

    def __init__(self, latency: float = 0.02) -> None:
        self.latency = latency
        self.lock = threading.Lock()
        self.in_flight: dict[str, int] = {}
        self.most = 0
        self.overlaps: list[str] = []  # objects that had two writes in flight at once
        self.sent: list[tuple[str, int]] = []

    def call(self, key: str, n: int, fail: Exception | None = None) -> Any:
        def request() -> Any:
            with self.lock:
                self.sent.append((key, n))
                self.in_flight[key] = self.in_flight.get(key, 0) + 1
                if self.in_flight[key] > 1:
                    self.overlaps.append(key)
                self.most = max(self.most, sum(self.in_flight.values()))
            time.sleep(self.latency)
            with self.lock:
                self.in_flight[key] -= 1
            if fail is not None:
                raise fail
            return {"key": key, "n": n}

        return request


def drain(pool: WritePool, until: float = 5.0) -> None:
    deadline = time.monotonic() + until
    while (pool.queued or pool.in_flight or pool.has_answers()) and time.monotonic() < deadline:
        pool.wakeup.wait(0.05)
        pool.wakeup.clear()
        pool.complete()
    assert not pool.queued, "the pool did not drain"
    assert not pool.in_flight, "the pool did not drain"


@pytest.fixture
def pool():
    made: list[WritePool] = []

    def make(size: int = 4) -> WritePool:
        made.append(WritePool(size))
        return made[-1]

    yield make
    for p in made:
        p.stop()


def test_writes_to_different_objects_are_in_flight_together_up_to_the_pool_size(pool):
    server, p = Server(), pool(4)
    answers: list[Any] = []
    for i in range(20):
        p.submit(f"obj-{i}", server.call(f"obj-{i}", 0), lambda a, e: answers.append(a))
    drain(p)
    assert len(answers) == 20
    assert server.most == 4  # bounded, and used
    assert p.max_in_flight == 4


def test_writes_to_one_object_go_one_at_a_time_in_the_order_submitted(pool):
    server, p = Server(latency=0.005), pool(8)
    done: list[tuple[str, int]] = []
    for n in range(6):
        for key in ("a", "b"):
            p.submit(key, server.call(key, n), lambda a, e: done.append((a["key"], a["n"])))
    drain(p)
    assert server.overlaps == []
    assert [n for key, n in server.sent if key == "a"] == list(range(6))
    assert [n for key, n in done if key == "b"] == list(range(6))


def test_the_next_write_to_an_object_waits_until_the_answer_before_it_was_taken_in(pool):
    server, p = Server(latency=0.0), pool(2)
    p.submit("a", server.call("a", 0), lambda a, e: None)
    p.submit("a", server.call("a", 1), lambda a, e: None)
    time.sleep(0.1)  # the first is answered; nobody took it in
    assert server.sent == [("a", 0)]
    assert p.busy("a")
    p.complete()
    drain(p)
    assert server.sent == [("a", 0), ("a", 1)]
    assert not p.busy("a")


def test_answers_and_failures_reach_done_on_the_callers_thread(pool):
    server, p = Server(latency=0.0), pool(2)
    seen: list[tuple[Any, Any, str]] = []
    refused = ApiError(409, "Conflict", "the object has been modified")

    def done(answer: Any, err: BaseException | None) -> None:
        seen.append((answer, err, threading.current_thread().name))

    p.submit("a", server.call("a", 0), done)
    p.submit("b", server.call("b", 0, fail=refused), done)
    drain(p)
    me = threading.current_thread().name
    assert sorted(((a or {}).get("key", "-"), e is refused, t == me) for a, e, t in seen) == [
        ("-", True, True),
        ("a", False, True),
    ]


def test_a_higher_priority_write_goes_first(pool):
    server, p = Server(latency=0.01), pool(1)
    gate = threading.Event()
    p.submit("blocker", lambda: gate.wait(2), lambda a, e: None)
    time.sleep(0.02)  # the one sender is busy
    for i in range(3):
        p.submit(f"create-{i}", server.call(f"create-{i}", 0), lambda a, e: None, priority=CREATE)
    p.submit("admit", server.call("admit", 0), lambda a, e: None, priority=ADMIT)
    p.submit("start", server.call("start", 0), lambda a, e: None, priority=START)
    gate.set()
    drain(p)
    assert [key for key, _ in server.sent] == ["start", "admit", "create-0", "create-1", "create-2"]


def test_when_the_fence_refuses_a_write_the_queued_ones_are_never_sent(pool):
    server, p = Server(latency=0.01), pool(1)
    gate = threading.Event()
    lost = NotLeaderError("the lease was lost")

    def fenced() -> Any:
        gate.wait(2)
        raise lost

    done: list[Any] = []
    p.submit("a", fenced, lambda a, e: done.append(e))
    for i in range(5):
        p.submit(f"b-{i}", server.call(f"b-{i}", 0), lambda a, e: done.append(e))
    gate.set()
    deadline = time.monotonic() + 5
    while not p.has_answers() and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(NotLeaderError):
        p.complete()
    assert server.sent == []  # nothing new was sent
    assert done == []  # nor told as done: the term is over
    assert p.queued == 0
    with pytest.raises(NotLeaderError):
        p.submit("c", server.call("c", 0), lambda a, e: None)


def test_stop_abandons_what_is_queued(pool):
    server, p = Server(latency=0.05), pool(1)
    for i in range(5):
        p.submit(f"k-{i}", server.call(f"k-{i}", 0), lambda a, e: None)
    time.sleep(0.01)
    assert p.stop() == 4  # one was in flight already
    time.sleep(0.1)
    assert len(server.sent) == 1


def test_a_write_on_the_loops_thread_waits_for_that_objects_writes_in_the_pool(pool):
    server, p = Server(latency=0.05), pool(2)
    order: list[str] = []
    p.submit("a", server.call("a", 0), lambda a, e: order.append("pool answer taken in"))
    p.run("a", lambda: order.append("written by the loop"))
    assert order == ["pool answer taken in", "written by the loop"]
    p.run("b", lambda: order.append("b at once"))  # nothing on its way to b
    assert order[-1] == "b at once"


def test_a_reconcile_of_a_busy_object_runs_once_the_object_is_idle(pool):
    server, p = Server(latency=0.02), pool(2)
    later: list[str] = []
    p.submit("a", server.call("a", 0), lambda a, e: None)
    p.when_idle("a", lambda: later.append("a"))
    p.when_idle("b", lambda: later.append("b"))  # idle already: at once
    assert later == ["b"]
    drain(p)
    assert later == ["b", "a"]


def test_a_failing_done_is_logged_and_the_object_is_released(pool, caplog):
    server, p = Server(latency=0.0), pool(1)

    def broken(answer: Any, err: BaseException | None) -> None:
        raise RuntimeError("a bug")

    p.submit("a", server.call("a", 0), broken)
    p.submit("a", server.call("a", 1), lambda a, e: None)
    drain(p)
    assert [n for _, n in server.sent] == [0, 1]
    assert "after a write to a" in caplog.text


def test_queued_writes_are_counted_by_priority_until_a_sender_takes_them(pool):
    """The scheduler holds its next cycle while admissions wait for a sender (queued_at)."""
    p = pool(1)
    gate = threading.Event()
    p.submit("blocker", lambda: gate.wait(2), lambda a, e: None, priority=START)
    time.sleep(0.02)  # the one sender is busy
    p.submit("a", lambda: None, lambda a, e: None, priority=ADMIT)
    p.submit("b", lambda: None, lambda a, e: None, priority=ADMIT)
    p.submit("c", lambda: None, lambda a, e: None, priority=CREATE)
    assert (p.queued_at(START), p.queued_at(ADMIT), p.queued_at(CREATE)) == (0, 2, 1)
    gate.set()
    drain(p)
    assert (p.queued_at(ADMIT), p.queued_at(CREATE)) == (0, 0)

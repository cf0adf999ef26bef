"""The work queue: keys de-duplicated, delayed, prioritised, retried with growing backoff."""

from __future__ import annotations

import itertools
import random

import pytest

from extender.kube.api.workqueue import Backoff, WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drain(queue: WorkQueue) -> list:
    out = []
    while (key := queue.pop()) is not None:
        out.append(key)
    return out


def test_a_key_added_many_times_is_reconciled_once():
    queue = WorkQueue(Clock())
    for _ in range(1000):
        queue.add("default/a")
    queue.add("default/b")
    assert len(queue) == 2  # bounded by the number of keys, not of events
    assert drain(queue) == ["default/a", "default/b"]


def test_higher_priority_first_then_first_in_first_out():
    queue = WorkQueue(Clock())
    queue.add("low-1")
    queue.add("high", priority=10)
    queue.add("low-2")
    queue.add("low-1", priority=5)  # raised while it waits
    assert drain(queue) == ["high", "low-1", "low-2"]


def test_a_delayed_key_is_due_only_after_its_delay_and_an_add_brings_it_forward():
    clock = Clock()
    queue = WorkQueue(clock)
    queue.add_after("later", 5.0)
    queue.add_after("soon", 1.0)
    assert queue.pop() is None
    assert queue.next_due() == pytest.approx(1.0)
    clock.now = 1.0
    assert drain(queue) == ["soon"]
    queue.add("later")  # something happened: no need to wait for the timer
    assert drain(queue) == ["later"]
    clock.now = 10.0
    assert drain(queue) == []  # the timer does not bring it back a second time
    assert queue.next_due() is None


@pytest.mark.parametrize(
    ("failures", "low", "high"),
    [(0, 0.045, 0.055), (1, 0.09, 0.11), (4, 0.72, 0.88), (20, 54.0, 66.0)],
    ids=["first", "second", "fifth", "capped"],
)
def test_backoff_doubles_with_jitter_up_to_its_cap(failures, low, high):
    backoff = Backoff(base=0.05, cap=60.0, rng=random.Random(1))
    for _ in range(50):
        assert low <= backoff.delay(failures) <= high


def test_a_failing_key_waits_longer_each_time_and_a_success_starts_afresh():
    clock = Clock()
    queue = WorkQueue(clock, backoff=Backoff(base=1.0, cap=100.0, rng=random.Random(3)))
    delays = [queue.retry("k") for _ in range(4)]
    assert all(b > a for a, b in itertools.pairwise(delays))
    assert queue.failures("k") == 4
    queue.forget("k")
    assert queue.failures("k") == 0
    assert queue.retry("k") < 1.2


def test_retry_waits_at_least_what_the_server_asked():
    clock = Clock()
    queue = WorkQueue(clock)
    assert queue.retry("k", at_least=7.0) == 7.0
    clock.now = 6.9
    assert queue.pop() is None
    clock.now = 7.0
    assert queue.pop() == "k"

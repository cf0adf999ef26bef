"""client-go's token bucket, with the clock injected."""

from __future__ import annotations

import pytest

from extender.kube.api.client import RequestBudget
from extender.kube.api.resources import JOBS, WORKLOADS


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_burst_passes_then_requests_are_paced_at_qps():
    clock = Clock()
    budget = RequestBudget(50, 100, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        budget.acquire()
    assert clock.slept == []
    for _ in range(50):
        budget.acquire()
    assert clock.now == pytest.approx(1.0)  # 50 more took one second at 50 QPS


def test_spare_never_dips_into_the_reserve():
    clock = Clock()
    budget = RequestBudget(50, 100, clock=clock, sleep=clock.sleep)
    taken = sum(budget.spare(keep=50) for _ in range(100))
    assert taken == 50
    clock.now += 0.1  # five tokens come back
    assert [budget.spare(keep=50) for _ in range(6)] == [True] * 5 + [False]


def test_a_token_given_back_is_there_for_the_next_request_but_never_above_the_burst():
    clock = Clock()
    budget = RequestBudget(50, 100, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        budget.acquire()
    budget.acquire()  # the bucket is empty: this one waits 20 ms
    assert clock.now == pytest.approx(0.02)
    budget.give_back()  # ... and turned out not to be needed
    budget.acquire()
    assert clock.now == pytest.approx(0.02)  # the next one did not wait
    clock.now += 10  # the bucket refills to the burst
    budget.give_back()
    taken = sum(budget.spare(keep=0) for _ in range(102))
    assert taken == 100


def test_writes_and_reads_are_counted_apart():
    budget = RequestBudget(1, 1)
    budget.count("PATCH", WORKLOADS, "status")
    budget.count("PATCH", JOBS)
    budget.count("GET", JOBS)
    assert budget.writes == {("PATCH", "workloads/status"): 1, ("PATCH", "jobs"): 1}
    assert budget.total_writes == 2
    assert budget.reads == {("GET", "jobs"): 1}


@pytest.mark.parametrize(("qps", "burst"), [(0, 10), (5, 0), (-1, 1)])
def test_a_budget_that_cannot_work_is_refused(qps, burst):
    with pytest.raises(ValueError, match="qps > 0"):
        RequestBudget(qps, burst)

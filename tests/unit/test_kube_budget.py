"""client-go's token bucket, and leader election's rules, with the clock injected."""

from __future__ import annotations

import threading

import pytest

from extender.kube.client import ApiError, RequestBudget
from extender.kube.leader import LeaderElector
from extender.kube.resources import JOBS, WORKLOADS


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


class LeaseStore:
    """Just enough of the API for leases: get, create, update with resourceVersion checks."""

    def __init__(self) -> None:
        self.lease: dict | None = None
        self.rv = 0

    def get(self, resource, name, namespace=None):
        if self.lease is None:
            raise ApiError(404, "NotFound", "not found")
        return {
            **self.lease,
            "spec": dict(self.lease["spec"]),
            "metadata": dict(self.lease["metadata"]),
        }

    def create(self, resource, body, namespace=None):
        if self.lease is not None:
            raise ApiError(409, "AlreadyExists", "exists")
        self.rv += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}
        return self.lease

    def update(self, resource, body, subresource=""):
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "modified")
        self.rv += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}
        return self.lease


def elector(store, identity, clock):
    return LeaderElector(
        store,
        identity,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        clock=clock,
        monotonic=clock,
    )


def test_only_one_replica_leads_until_the_lease_expires():
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    assert a._try() is True
    assert b._try() is False  # b first sees the lease now...
    clock.now += 14
    assert b._try() is False  # ...and it has not expired by b's own clock
    clock.now += 2
    assert b._try() is True
    assert store.lease["spec"]["holderIdentity"] == "b"
    assert store.lease["spec"]["leaseTransitions"] == 1


def test_a_renewing_leader_keeps_the_lease():
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    assert a._try()
    for _ in range(10):
        clock.now += 5
        assert a._try() is True
        assert b._try() is False  # every renewal is a change b observes


def test_release_hands_over_at_once():
    store, clock = LeaseStore(), Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    stop = threading.Event()
    assert a.acquire(stop)
    a.release()
    stop.set()
    assert b._try() is True

"""Leader election's rules and its fence, with the clock injected."""

from __future__ import annotations

import threading

import pytest

from extender.kube.api.client import ApiError, NotLeaderError, TransportError
from extender.kube.api.lease import Fence, LeaderElector, SetupError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class LeaseStore:
    """Just enough of the API for leases: get, create, update with resourceVersion checks;
    `down` makes every call fail as an unreachable server does; `namespaces` lists the
    namespaces that exist, and `may_create_namespaces` whether this user may add one."""

    def __init__(self) -> None:
        self.lease: dict | None = None
        self.rv = 0
        self.down = False
        self.namespaces = {"tower-system"}
        self.may_create_namespaces = True

    def _reachable(self):
        if self.down:
            raise TransportError("connection-refused", "connect: connection refused", sent=False)

    def get(self, resource, name, namespace=None):
        self._reachable()
        if self.lease is None:
            raise ApiError(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
        return {
            **self.lease,
            "spec": dict(self.lease["spec"]),
            "metadata": dict(self.lease["metadata"]),
        }

    def create(self, resource, body, namespace=None):
        self._reachable()
        if resource.plural == "namespaces":
            if not self.may_create_namespaces:
                raise ApiError(403, "Forbidden", 'namespaces is forbidden: User "u" cannot create')
            self.namespaces.add(body["metadata"]["name"])
            return body
        if namespace not in self.namespaces:
            raise ApiError(404, "NotFound", f'namespaces "{namespace}" not found')
        if self.lease is not None:
            raise ApiError(409, "AlreadyExists", "exists")
        self.rv += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}
        return self.lease

    def update(self, resource, body, subresource=""):
        self._reachable()
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "modified")
        self.rv += 1
        self.lease = {**body, "metadata": {**body["metadata"], "resourceVersion": str(self.rv)}}
        return self.lease


def elector(store, identity, clock, **kwargs):
    return LeaderElector(
        store,
        identity,
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
        clock=clock,
        monotonic=clock,
        **kwargs,
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


def test_the_fence_holds_for_the_renew_deadline_after_the_last_renewal_was_sent():
    clock = Clock()
    fence = Fence(clock, deadline=10)
    with pytest.raises(NotLeaderError):
        fence.check()  # never renewed
    fence.extend(renewed_at=0.0)
    clock.now = 9.9
    fence.check()
    clock.now = 10.0
    with pytest.raises(NotLeaderError):
        fence.check()
    assert fence.refusals == 2


@pytest.mark.parametrize(
    ("outage", "writes_allowed_at"),
    [
        (5, [1, 9, 12, 20]),  # renewals fail for 5 s: still inside the deadline
        (30, [1, 9]),  # for 30 s: nothing may be written from t=10 on
    ],
    ids=["a short outage keeps the lease", "a long one stops writes at the deadline"],
)
def test_writes_stop_at_the_renew_deadline_whatever_the_renewals_do(outage, writes_allowed_at):
    store, clock = LeaseStore(), Clock()
    a = elector(store, "a", clock)
    assert a._attempt()  # acquired at t=0
    allowed = []
    for t in range(1, 25):
        clock.now = float(t)
        store.down = 0 < t <= outage
        if t % 2 == 0:
            a._attempt()  # the renew thread, every retry period
        if t in (1, 9, 12, 20):
            try:
                a.fence.check()
                allowed.append(t)
            except NotLeaderError:
                pass
    assert allowed == writes_allowed_at


def test_a_lease_namespace_that_is_missing_is_created():
    store, clock = LeaseStore(), Clock()
    store.namespaces = set()
    a = elector(store, "a", clock)
    assert a._attempt() is False  # the namespace is created...
    assert "tower-system" in store.namespaces
    assert a._attempt() is True  # ...and then the lease


def test_a_lease_namespace_that_cannot_be_created_is_one_line_saying_what_to_do():
    store, clock = LeaseStore(), Clock()
    store.namespaces = set()
    store.may_create_namespaces = False
    a = elector(store, "a", clock)
    with pytest.raises(SetupError) as err:
        a._attempt()
    assert str(err.value) == (
        "the leader-election namespace tower-system does not exist and this identity may not "
        "create it: create it (kubectl create namespace tower-system), or apply deploy/rbac/ "
        "which creates it with the controller's permissions"
    )


def test_an_unreachable_api_server_is_retried_not_fatal():
    store, clock = LeaseStore(), Clock()
    store.down = True
    a = elector(store, "a", clock)
    assert a._attempt() is False
    store.down = False
    assert a._attempt() is True

"""Leader election on a coordination.k8s.io/v1 Lease, with a fence every write passes.

Timings default to controller-runtime's: lease 15 s, renew deadline 10 s, retry 2 s. Expiry
of another holder's lease is judged by when this process last saw the lease change (not by
the holder's clock), so clock skew between replicas cannot make two leaders.

The fence is what makes a lost lease stop writes at once. It holds while the last
successful renewal was *sent* less than the renew deadline ago, judged on this process's
monotonic clock at the moment of each write, so a renewal that hangs, a renew thread that
is late, or a scheduling cycle that runs long cannot stretch it. Another replica can take
the lease only a full lease duration after it last saw a renewal, which is later still.
The lease has its own client, whose requests time out well inside the renew deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from extender.kube.api.client import ApiError, KubeClient, KubeError, NotLeaderError
from extender.kube.api.resources import LEASES, NAMESPACES

log = logging.getLogger("tower.lease")


class SetupError(Exception):
    """The lease can never be taken as things are: the message says what to do."""


def _micro_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Fence:
    """Whether this replica may write now. `check()` raises NotLeaderError when it may not."""

    def __init__(self, monotonic: Callable[[], float], deadline: float) -> None:
        self._monotonic = monotonic
        self._deadline = deadline
        self._until = -1.0
        self._lock = threading.Lock()
        self.refusals = 0

    def extend(self, renewed_at: float) -> None:
        """A renewal sent at `renewed_at` succeeded."""
        with self._lock:
            self._until = max(self._until, renewed_at + self._deadline)

    def revoke(self) -> None:
        with self._lock:
            self._until = -1.0

    def holds(self) -> bool:
        return self._monotonic() < self._until

    def check(self) -> None:
        if not self.holds():
            self.refusals += 1
            raise NotLeaderError("not writing: this replica's lease was not renewed in time")


class Unfenced(Fence):
    """For a controller run without leader election: it always may write."""

    def __init__(self) -> None:
        super().__init__(time.monotonic, 0.0)

    def holds(self) -> bool:
        return True

    def check(self) -> None:
        return None


class LeaderElector:
    """`acquire()` blocks until this replica leads; `lost` is set when it stops leading."""

    def __init__(
        self,
        client: KubeClient,
        identity: str,
        *,
        name: str = "tower-controller",
        namespace: str = "tower-system",
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        create_namespace: bool = True,
        yield_to: Callable[[], str | None] | None = None,
    ) -> None:
        self.client = client
        # Another controller that must not lead beside this one (Kueue's): the reason it
        # leads now, or None. While it does, this replica neither takes nor keeps the lease.
        self.yield_to = yield_to
        self.identity = identity
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.monotonic = monotonic
        self.create_namespace = create_namespace
        self.fence = Fence(monotonic, renew_deadline)
        self.lost = threading.Event()
        self.leading = threading.Event()
        self._observed: Any = None
        self._observed_at = 0.0
        self._observed_duration = lease_duration
        self.problem = ""  # why the last attempt failed, in words (empty once it succeeds)
        self._term = 0
        self._failing_since: float | None = None

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _try(self) -> bool:
        """One attempt to acquire or renew the Lease."""
        now = self.clock()
        try:
            lease = self.client.get(LEASES, self.name, self.namespace)
        except ApiError as err:
            if not err.not_found:
                raise
            return self._create(now)
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"))
        if record != self._observed:
            self._observed = record
            self._observed_at = self.monotonic()
            self._observed_duration = float(spec.get("leaseDurationSeconds") or 0)
        holder = spec.get("holderIdentity")
        if (
            holder
            and holder != self.identity
            and self.monotonic()
            < self._observed_at + float(spec.get("leaseDurationSeconds") or self.lease_duration)
        ):
            return False
        new_spec = dict(spec)
        if holder != self.identity:
            new_spec["acquireTime"] = _micro_time(now)
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        new_spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=max(1, int(self.lease_duration)),
            renewTime=_micro_time(now),
        )
        lease["spec"] = new_spec
        try:
            self.client.update(LEASES, lease)
        except ApiError as err:
            if err.conflict:
                return False
            raise
        return True

    def _create(self, now: float) -> bool:
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, int(self.lease_duration)),
                "acquireTime": _micro_time(now),
                "renewTime": _micro_time(now),
                "leaseTransitions": 0,
            },
        }
        try:
            self.client.create(LEASES, body, self.namespace)
        except ApiError as err:
            if err.already_exists:
                return False
            if err.not_found and "namespaces" in err.message:
                self._make_namespace()
                return False  # the next attempt creates the Lease
            raise
        return True

    def _make_namespace(self) -> None:
        """The lease's namespace is missing: create it when allowed, else say what to do."""
        fix = (
            f"create it (kubectl create namespace {self.namespace}), or apply deploy/rbac/ "
            "which creates it with the controller's permissions"
        )
        if not self.create_namespace:
            raise SetupError(
                f"the leader-election namespace {self.namespace} does not exist: {fix}"
            )
        try:
            self.client.create(NAMESPACES, {"metadata": {"name": self.namespace}})
        except ApiError as err:
            if err.already_exists:
                return
            if err.forbidden:
                raise SetupError(
                    f"the leader-election namespace {self.namespace} does not exist and this "
                    f"identity may not create it: {fix}"
                ) from None
            raise
        log.info("created namespace %s for the leader-election lease", self.namespace)

    def _attempt(self) -> bool:
        sent = self.monotonic()
        other = self.yield_to() if self.yield_to is not None else None
        if other is not None:
            self.problem = other
            return False
        try:
            acquired = self._try()
        except SetupError:
            raise
        except ApiError as err:
            if err.forbidden:
                raise SetupError(
                    f"cannot use the leader-election lease {self.where}: {err.message} "
                    "(apply deploy/rbac/, which grants the controller its Lease, or run with "
                    "--no-leader-elect)"
                ) from None
            self._report(err)
            return False
        except KubeError as err:  # the API server may be briefly unreachable
            self._report(err)
            return False
        self._failing_since = None
        self.problem = ""
        if acquired:
            self.fence.extend(sent)
        return acquired

    def other_leader(self) -> str | None:
        """Another replica that holds the lease, as last seen (None if none, or expired)."""
        holder = self._observed[0] if self._observed else None
        if not holder or holder == self.identity:
            return None
        if self.monotonic() >= self._observed_at + self._observed_duration:
            return None
        return str(holder)

    def _report(self, err: KubeError) -> None:
        self.problem = str(err)
        now = self.monotonic()
        if self._failing_since is None:
            self._failing_since = now
            log.warning("lease %s: %s", self.where, err)
        else:
            log.debug("lease %s: %s", self.where, err)

    def acquire(self, stop: threading.Event) -> bool:
        """Block until this replica holds the Lease (True) or `stop` is set (False).
        Raises SetupError when the lease can never be taken as things are."""
        self.lost.clear()
        while not stop.is_set():
            if self._attempt():
                log.info("became the leader (%s)", self.identity)
                self.leading.set()
                self._term += 1
                threading.Thread(
                    target=self._renew, args=(stop, self._term), daemon=True, name="lease-renew"
                ).start()
                return True
            stop.wait(self.retry_period)
        return False

    def _renew(self, stop: threading.Event, term: int) -> None:
        while not stop.is_set() and term == self._term and not self.lost.is_set():
            stop.wait(self.retry_period)
            if stop.is_set() or term != self._term:
                break
            try:
                self._attempt()
            except SetupError as err:  # RBAC taken away while leading
                log.error("%s", err)
            if self.yield_to is not None and self.yield_to() is not None:
                self._step_down()  # said by whoever watches the other (one line)
                break
            if not self.fence.holds():
                log.error(
                    "lost the lease %s (not renewed for %.1fs): writes stopped",
                    self.where,
                    self.renew_deadline,
                )
                self.fence.revoke()
                self.leading.clear()
                self.lost.set()

    def _step_down(self) -> None:
        """Stop leading at once and give the lease back (another controller leads)."""
        self.release()
        self.lost.set()

    def release(self) -> None:
        """Give the Lease up on a clean shutdown so a standby takes over at once."""
        if not self.leading.is_set():
            return
        self._term += 1  # the renew thread stops
        try:
            if self.fence.holds():
                lease = self.client.get(LEASES, self.name, self.namespace)
                if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                    lease["spec"]["holderIdentity"] = None
                    lease["spec"]["leaseDurationSeconds"] = 1
                    self.client.update(LEASES, lease)
        except KubeError as err:
            log.warning("could not release the lease %s: %s", self.where, err)
        self.fence.revoke()
        self.leading.clear()

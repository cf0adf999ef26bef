"""Kueue's leader-election Lease, watched so that Tower never admits beside a live Kueue.

Kueue's controller manager leads through its own Lease (`c1f6bfd2.kueue.x-k8s.io` in Kueue's
namespace, or its Configuration's leaderElection). While another holder renews it, a second
admitter would take the same quota twice, so Tower's controller takes no term: it waits, says
once which Lease and holder stop it, and says it again on /readyz. A lease is live while its
holder is set and its record changed less than its duration ago, judged on this process's
monotonic clock as for Tower's own lease (so clock skew cannot make it look expired); a lease
whose renewTime is already older than its duration on this clock is not live either, so a
Kueue stopped long ago does not hold Tower back for a lease duration.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from extender.kube.api.client import ApiError, KubeClient, KubeError, NotLeaderError
from extender.kube.api.lease import Fence
from extender.kube.api.resources import LEASES

log = logging.getLogger("tower.lease")

KUEUE_LEASE = "kueue-system/c1f6bfd2.kueue.x-k8s.io"  # Kueue v0.19.2's defaults
KUEUE_DEPLOYMENT = "kueue-controller-manager"


def _seconds(stamp: Any) -> float | None:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Holder:
    """Who held the lease, as last read."""

    identity: str
    duration: float  # leaseDurationSeconds
    renewed: float | None  # renewTime, seconds since the epoch (the holder's clock)


def parse_lease(text: str) -> tuple[str, str] | None:
    """NAMESPACE/NAME as (namespace, name); None for "none" or ""; ValueError otherwise."""
    if text in ("", "none"):
        return None
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise ValueError(f"{text!r} is not NAMESPACE/NAME (or none)")
    return namespace, name


def holder_of(lease: dict[str, Any]) -> Holder | None:
    spec = lease.get("spec") or {}
    identity = spec.get("holderIdentity")
    if not identity:
        return None
    return Holder(
        str(identity),
        float(spec.get("leaseDurationSeconds") or 15),
        _seconds(spec.get("renewTime")),
    )


def live_line(where: str, holder: Holder, ago: float | None) -> str:
    """The one line that says why Tower admits nothing."""
    seen = f", renewed {ago:.1f}s ago" if ago is not None else ""
    namespace = where.split("/", 1)[0]
    return (
        f"Kueue's controller holds its lease {where} (holder {holder.identity}{seen}): Tower "
        f"admits nothing beside a live Kueue; stop it first (kubectl -n {namespace} scale "
        f"deployment {KUEUE_DEPLOYMENT} --replicas=0), then Tower takes over within "
        f"{holder.duration:.0f}s"
    )


class KueueLease:
    """Whether Kueue's controller leads now: `live()` is the reason Tower waits, or None.
    `poll()` reads the Lease once; `start()` polls it every `period` seconds."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        name: str,
        *,
        period: float = 2.0,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.namespace, self.name = namespace, name
        self.period = period
        self.clock, self.monotonic = clock, monotonic
        self._record: tuple[Any, ...] | None = None
        self._changed_at = 0.0
        self._holder: Holder | None = None
        self._state = ""  # "live" or "free", as last told
        self._unreadable = ""  # why the lease could not be read, as last told
        self._lock = threading.Lock()

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}"

    def poll(self) -> None:
        try:
            lease = self.client.get(LEASES, self.name, self.namespace)
        except ApiError as err:
            if err.not_found:
                self._set(None, None)  # no Kueue here (or never started)
                return
            self._cannot_read(err)
            return
        except KubeError as err:
            self._cannot_read(err)
            return
        spec = lease.get("spec") or {}
        self._set(holder_of(lease), (spec.get("holderIdentity"), spec.get("renewTime")))

    def _set(self, holder: Holder | None, record: tuple[Any, ...] | None) -> None:
        with self._lock:
            self._unreadable = ""
            if record != self._record:
                self._record = record
                self._changed_at = self.monotonic()
            self._holder = holder
        self._tell()

    def _cannot_read(self, err: KubeError) -> None:
        # Unreadable is not live: a Tower without the Kueue-lease rule must still work, but
        # it is said, since the guard then guards nothing.
        line = f"cannot read Kueue's lease {self.where} ({err}): Tower cannot tell whether it runs"
        if isinstance(err, ApiError) and err.forbidden:
            line += " (deploy/rbac/ grants the controller get on it)"
        with self._lock:
            said, self._unreadable = self._unreadable, line
        if said != line:
            log.warning("%s", line)

    def live(self) -> str | None:
        with self._lock:
            holder, changed_at = self._holder, self._changed_at
        if holder is None:
            return None
        now = self.monotonic()
        if now >= changed_at + holder.duration:
            return None  # not renewed for a whole duration since it was last seen to change
        if holder.renewed is not None and self.clock() - holder.renewed > holder.duration:
            return None  # its renewTime is stale already by this clock: a stopped Kueue
        ago = None if holder.renewed is None else max(0.0, self.clock() - holder.renewed)
        return live_line(self.where, holder, ago)

    def _tell(self) -> None:
        """One line each time it turns live or free (the first look at a free one is quiet)."""
        line = self.live()
        state = "free" if line is None else "live"
        if state == self._state or (state == "free" and not self._state):
            self._state = state
            return
        self._state = state
        if line is not None:
            log.warning("%s", line)
        else:
            log.info("Kueue's lease %s is free: Tower may lead", self.where)

    def start(self, stop: threading.Event) -> None:
        self.poll()

        def loop() -> None:
            while not stop.wait(self.period):
                self.poll()

        threading.Thread(target=loop, daemon=True, name="kueue-lease").start()

    def wait_free(self, stop: threading.Event) -> bool:
        """Block while Kueue's lease is live; False if `stop` was set meanwhile."""
        while not stop.is_set():
            if self.live() is None:
                return True
            stop.wait(min(self.period, 1.0))
        return False


class YieldingFence(Fence):
    """Another fence that also stops holding while Kueue's lease is live: the controller's
    term ends within a poll of Kueue starting, and no write goes out meanwhile."""

    def __init__(self, inner: Fence, kueue: KueueLease) -> None:
        super().__init__(inner._monotonic, 0.0)
        self.inner = inner
        self.kueue = kueue

    def holds(self) -> bool:
        return self.inner.holds() and self.kueue.live() is None

    def check(self) -> None:
        line = self.kueue.live()
        if line is not None:
            self.refusals += 1
            raise NotLeaderError(f"not writing: {line}")
        self.inner.check()


def live_now(client: KubeClient, where: str, now: float) -> str | None:
    """One look, for a command line (`kubectl tower why`): the line if Kueue's lease is held
    and its renewTime is within its duration by `now`; None if free, absent or unreadable."""
    namespace, name = parse_lease(where) or ("", "")
    if not name:
        return None
    try:
        holder = holder_of(client.get(LEASES, name, namespace))
    except KubeError:
        return None
    if holder is None or holder.renewed is None or now - holder.renewed > holder.duration:
        return None
    return live_line(where, holder, max(0.0, now - holder.renewed))

"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does.

Timings default to controller-runtime's: lease 15 s, renew deadline 10 s, retry 2 s. Expiry is
judged by when this process last saw the lease change (not by the holder's clock), so clock
skew between replicas cannot make two leaders.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from extender.kube.client import ApiError, KubeClient
from extender.kube.resources import LEASES

log = logging.getLogger("tower.leader")


def _micro_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
    ) -> None:
        self.client = client
        self.identity = identity
        self.name = name
        self.namespace = namespace
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.monotonic = monotonic
        self.lost = threading.Event()
        self.leading = threading.Event()
        self._observed: Any = None
        self._observed_at = 0.0

    def _try(self) -> bool:
        """One attempt to acquire or renew the Lease."""
        now = self.clock()
        try:
            lease = self.client.get(LEASES, self.name, self.namespace)
        except ApiError as err:
            if not err.not_found:
                raise
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": int(self.lease_duration),
                    "acquireTime": _micro_time(now),
                    "renewTime": _micro_time(now),
                    "leaseTransitions": 0,
                },
            }
            try:
                self.client.create(LEASES, body, self.namespace)
            except ApiError as create_err:
                if create_err.already_exists:
                    return False
                raise
            return True
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"))
        if record != self._observed:
            self._observed = record
            self._observed_at = self.monotonic()
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
            leaseDurationSeconds=int(self.lease_duration),
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

    def _attempt(self) -> bool:
        try:
            return self._try()
        except Exception as err:  # the API server may be briefly unreachable
            log.warning("lease %s/%s: %s", self.namespace, self.name, err)
            return False

    def acquire(self, stop: threading.Event) -> bool:
        """Block until this replica holds the Lease (True) or `stop` is set (False)."""
        while not stop.is_set():
            if self._attempt():
                log.info("became the leader (%s)", self.identity)
                self.leading.set()
                threading.Thread(
                    target=self._renew, args=(stop,), daemon=True, name="lease-renew"
                ).start()
                return True
            stop.wait(self.retry_period)
        return False

    def _renew(self, stop: threading.Event) -> None:
        last_renewed = self.monotonic()
        while not stop.is_set() and not self.lost.is_set():
            stop.wait(self.retry_period)
            if stop.is_set():
                break
            if self._attempt():
                last_renewed = self.monotonic()
            elif self.monotonic() - last_renewed > self.renew_deadline:
                log.error("lost the lease (not renewed for %.1fs)", self.renew_deadline)
                self.leading.clear()
                self.lost.set()

    def release(self) -> None:
        """Give the Lease up on a clean shutdown so a standby takes over at once."""
        if not self.leading.is_set():
            return
        try:
            lease = self.client.get(LEASES, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["holderIdentity"] = None
                lease["spec"]["leaseDurationSeconds"] = 1
                self.client.update(LEASES, lease)
        except Exception as err:
            log.warning("could not release the lease: %s", err)
        self.leading.clear()

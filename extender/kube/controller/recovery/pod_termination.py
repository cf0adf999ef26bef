"""Pods stuck terminating on an unreachable node, let go a minute on (FailureRecoveryPolicy).

Runs beside the controller when the gate is on, with its own two watches: every pod, kept as
a few fields only while it opted in and is being deleted, and every node, kept as whether it
is tainted unreachable. A pod due and on an unreachable node is marked Failed with the
KueueFailureRecovery condition (so its Job's controller counts it and drops its finalizer),
told in a Warning event, then deleted with no grace period. Its writes are fenced as the
controller's: a standby acts only once it leads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from extender.core.admission.failure_recovery import (
    GRACE,
    REASON,
    UNREACHABLE,
    TerminatingPod,
    Verdict,
    decide,
    opted_in,
    status_patch,
)
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError, KubeClient, KubeError, NotLeaderError
from extender.kube.api.events import Recorder
from extender.kube.api.informer import Informer
from extender.kube.api.resources import NODES, PODS
from extender.kube.api.store import Store

log = logging.getLogger("tower.recovery")

LOOK_AGAIN = 5.0  # the longest sleep: a failed write is retried, a jump of the clock is seen


@dataclass(frozen=True, slots=True)
class _Pod:
    key: str
    resource_version: str
    terminating: TerminatingPod | None  # None: not one the policy looks at


@dataclass(frozen=True, slots=True)
class _Node:
    key: str
    resource_version: str
    unreachable: bool


def _pod(obj: dict[str, Any]) -> _Pod:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    version = str(meta.get("resourceVersion") or "")
    deleting = bool(meta.get("deletionTimestamp"))
    if not opted_in(meta.get("annotations"), deleting):
        return _Pod(key, version, None)
    return _Pod(
        key,
        version,
        TerminatingPod(
            key,
            str(spec.get("nodeName") or ""),
            o.seconds_at(meta.get("deletionTimestamp")),
            int(meta.get("deletionGracePeriodSeconds") or 0),
            str(status.get("phase") or "Pending"),
        ),
    )


def _node(obj: dict[str, Any]) -> _Node:
    meta = obj.get("metadata") or {}
    taints = (obj.get("spec") or {}).get("taints") or ()
    return _Node(
        str(meta.get("name")),
        str(meta.get("resourceVersion") or ""),
        any(isinstance(t, dict) and t.get("key") == UNREACHABLE for t in taints),
    )


class PodTermination:
    """The policy's loop: `start()` its watches and its thread, which ends with `stop`."""

    def __init__(
        self,
        client: KubeClient,
        *,
        stop: threading.Event,
        recorder: Recorder | None = None,
        clock: Callable[[], float] = time.time,
        grace: float = GRACE,  # Kueue's forcefulTerminationGracePeriod (tests shorten it)
    ) -> None:
        self.client = client
        self.stop = stop
        self.recorder = recorder
        self.clock = clock
        self.grace = grace
        self.store = Store()
        self.store.register(PODS, _pod)
        self.store.register(NODES, _node)
        self.wakeup = threading.Event()
        self.let_go = 0  # pods deleted by force, for the log and the tests
        self._done: set[str] = set()  # let go; the pod may linger while finalizers hold it
        self._informers = [Informer(client, self.store, r, stop=stop) for r in (PODS, NODES)]
        for resource in (PODS, NODES):
            self.store.subscribe(resource, self._changed)
        self._thread = threading.Thread(target=self._run, daemon=True, name="failure-recovery")

    def start(self) -> PodTermination:
        for informer in self._informers:
            informer.start()
        self._thread.start()
        return self

    def _changed(self, key: str, old: Any, new: Any) -> None:
        self.wakeup.set()

    def _run(self) -> None:
        while not self.stop.is_set():
            if not all(i.synced.is_set() for i in self._informers):
                self.stop.wait(0.1)
                continue
            self.wakeup.clear()
            try:
                wait = self.step()
            except NotLeaderError:
                wait = LOOK_AGAIN  # a standby: the leader lets pods go
            except Exception:  # a bug must not end the policy; it is logged and retried
                log.exception("failure recovery: unexpected error")
                wait = LOOK_AGAIN
            self.wakeup.wait(min(max(wait, 0.0), LOOK_AGAIN))

    def step(self) -> float:
        """Let go every pod due on an unreachable node; the seconds until one is next due."""
        now = self.clock()
        soonest = LOOK_AGAIN
        present = set()
        for key, view in self.store.items(PODS):
            pod = view.terminating
            if pod is None:
                continue
            present.add(key)
            if key in self._done:
                continue
            node = self.store.get(NODES, pod.node) if pod.node else None
            decision = decide(pod, None if node is None else node.unreachable, now, self.grace)
            if decision.verdict is Verdict.WAIT:
                soonest = min(soonest, decision.due - now)
            elif decision.verdict is Verdict.LET_GO:
                try:
                    self._let_go(pod, decision.message, now)
                except NotLeaderError:
                    raise
                except KubeError as err:
                    log.warning("failure recovery: pod %s: %s (retrying)", key, err)
                    soonest = min(soonest, 1.0)
        self._done &= present
        return soonest

    def _let_go(self, pod: TerminatingPod, message: str, now: float) -> None:
        namespace, name = pod.key.split("/", 1)
        try:
            current = self.client.get(PODS, name, namespace)
            status = current.get("status") or {}
            patch = status_patch(
                list(status.get("conditions") or ()),
                str(status.get("phase") or ""),
                message,
                o.rfc3339(now),
            )
            # The version the conditions were read at: a concurrent change is a 409, retried.
            patch["metadata"] = {"resourceVersion": current["metadata"]["resourceVersion"]}
            self.client.patch(PODS, name, patch, namespace, subresource="status")
            if self.recorder is not None:
                self.recorder.record(current, "Warning", REASON, message)
            self.client.delete(PODS, name, namespace, grace_period_seconds=0)
        except ApiError as err:
            if not err.not_found:
                raise
        self._done.add(pod.key)
        self.let_go += 1
        log.info("failure recovery: pod %s: %s", pod.key, message)

"""Kubernetes Events (core/v1) on Jobs and Workloads, sent in the background, best effort.

Events have their own request budget, like client-go's event broadcaster, so telling the
story never delays an admission; when the backlog is full, new events are dropped and
counted rather than queued without bound.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from extender.kube.api.client import ApiError, KubeError, NotLeaderError, RequestBudget, RestClient
from extender.kube.api.objects import rfc3339
from extender.kube.api.resources import EVENTS

log = logging.getLogger("tower.events")

COMPONENT = "tower-controller"


class Recorder:
    """`record(obj, type, reason, message)` queues an Event; a thread creates it."""

    def __init__(
        self,
        client: RestClient,
        *,
        qps: float = 10.0,
        burst: int = 50,
        backlog: int = 1000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        # Events have their own budget, as client-go's broadcaster does; fenced like every write.
        self.client = client.with_budget(RequestBudget(qps, burst), timeout=10.0)
        self.clock = clock
        self.dropped = 0
        self.sent = 0
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(backlog)
        self._thread = threading.Thread(target=self._run, daemon=True, name="events")
        self._thread.start()

    def record(self, obj: Mapping[str, Any], kind: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        stamp = rfc3339(self.clock())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": namespace,
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            self.dropped += 1

    def close(self, timeout: float = 2.0) -> None:
        """Send what is queued (for up to `timeout` seconds), then stop."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            return
        self._thread.join(timeout)

    def _run(self) -> None:
        while (event := self._queue.get()) is not None:
            try:
                self.client.create(EVENTS, event, event["metadata"]["namespace"])
                self.sent += 1
            except ApiError as err:
                self.dropped += 1
                log.debug("event %s dropped: %s", event["reason"], err)
            except (KubeError, NotLeaderError) as err:  # best effort: unreachable, or deposed
                self.dropped += 1
                log.debug("event %s dropped: %s", event["reason"], err)

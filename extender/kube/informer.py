"""Watch caches: list, then watch from the list's resourceVersion; re-list on 410 Gone."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from extender.kube.client import ApiError, KubeClient
from extender.kube.resources import Resource

log = logging.getLogger("tower.informer")

Sink = Callable[[Resource, str, Any], None]
"""Receives (resource, "SYNC", [objects]) after every list, then (resource, type, object)."""


class Informer:
    """One resource kept in sync: a SYNC with the full list, then every watch event."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        sink: Sink,
        *,
        stop: threading.Event,
        timeout_seconds: int = 300,
        backoff: float = 1.0,
    ) -> None:
        self.client = client
        self.resource = resource
        self.sink = sink
        self.stop = stop
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff
        self.synced = threading.Event()
        self.relists = 0
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"watch-{resource.plural}"
        )

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        version: str | None = None
        while not self.stop.is_set():
            try:
                if version is None:
                    items, version = self.client.list(self.resource)
                    self.relists += 1
                    self.sink(self.resource, "SYNC", items)
                    self.synced.set()
                version = self._watch(version)
            except ApiError as err:
                log.warning("watch %s: %s", self.resource.plural, err)
                if err.gone:
                    version = None
                self.stop.wait(self.backoff)
            except Exception as err:  # connection dropped, server restarted, bad chunk
                if self.stop.is_set():
                    return
                log.warning("watch %s: %s: %s", self.resource.plural, type(err).__name__, err)
                self.stop.wait(self.backoff)

    def _watch(self, version: str) -> str | None:
        """Follow one watch stream; the version to continue from, or None to re-list."""
        for kind, obj in self.client.watch(
            self.resource, version, timeout_seconds=self.timeout_seconds
        ):
            if self.stop.is_set():
                return version
            if kind == "ERROR":
                code = obj.get("code")
                log.info(
                    "watch %s ended with %s %s: %s",
                    self.resource.plural,
                    code,
                    obj.get("reason"),
                    obj.get("message"),
                )
                if code == 410:
                    return None
                raise ApiError(int(code or 500), str(obj.get("reason")), str(obj.get("message")))
            version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
            if kind != "BOOKMARK":
                self.sink(self.resource, kind, obj)
        return version

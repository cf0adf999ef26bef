"""Watch one resource into the store: list, then watch from the list's resourceVersion.

A watch that ends (its timeout, a dropped connection, an API server restart) is resumed from
the last resourceVersion seen, bookmarks included; only 410 Gone (that version is no longer
in the server's watch cache) makes it list again. Every failure waits a backoff that
doubles up to a cap and resets once a watch delivers again. Nothing here raises: a dropped
connection is normal.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from extender.kube.api.client import ApiError, KubeClient, KubeError
from extender.kube.api.resources import Resource
from extender.kube.api.store import Store
from extender.kube.api.workqueue import Backoff

log = logging.getLogger("tower.informer")


class Informer:
    """Keeps `store` in sync with one resource, on its own thread."""

    def __init__(
        self,
        client: KubeClient,
        store: Store,
        resource: Resource,
        *,
        stop: threading.Event,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        backoff: Backoff | None = None,
        after: Sequence[threading.Event] = (),
        on_error: Callable[[Resource, KubeError], None] | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.resource = resource
        self.stop = stop
        self.label_selector = label_selector
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff or Backoff(base=0.2, cap=10.0)
        self.after = tuple(after)
        self.on_error = on_error
        self.relists = 0
        self.resumes = 0
        self.version: str | None = None  # the last resourceVersion seen: a watch resumes there
        self.failures = 0
        store.register(resource)
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"watch-{resource.plural}"
        )

    @property
    def synced(self) -> threading.Event:
        return self.store.synced(self.resource)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def _run(self) -> None:
        for event in self.after:  # e.g. Jobs after Workloads: a Job's form depends on them
            while not event.wait(0.1):
                if self.stop.is_set():
                    return
        failures = 0
        while not self.stop.is_set():
            try:
                if self.version is None:
                    items, version = self.client.list(
                        self.resource,
                        label_selector=self.label_selector,
                        transform=lambda obj: self.store.transform(self.resource, obj),
                    )
                    self.relists += 1
                    self.store.replace(self.resource, items)
                    del items
                    self.version = version
                    listed = True
                else:
                    self.resumes += 1
                    listed = False
                if self._watch():
                    if failures:
                        log.info(
                            "watch %s: connected again after %d failed attempts",
                            self.resource.plural,
                            failures,
                        )
                    failures = 0
                elif listed and self.version is None:
                    # Expired at once from a version the server itself just listed: do not
                    # spin on list after list while it recovers.
                    failures += 1
                    self.stop.wait(self.backoff.delay(failures))
            except ApiError as err:
                if self.stop.is_set():
                    return
                if err.gone:
                    self.version = None  # the list's continue token or version expired
                failures = self._failed(err, failures)
            except KubeError as err:  # no answer: the server is restarting, or unreachable
                if self.stop.is_set():
                    return
                failures = self._failed(err, failures)
            except Exception as err:  # a line that is not JSON: start over from a list
                if self.stop.is_set():
                    return
                log.warning("watch %s: %s: %s", self.resource.plural, type(err).__name__, err)
                self.version = None
                failures += 1
                self.stop.wait(self.backoff.delay(failures))

    def _failed(self, err: KubeError, failures: int) -> int:
        self.failures += 1
        if self.on_error is not None:
            self.on_error(self.resource, err)
        delay = self.backoff.delay(failures)
        # The first failure is said; then only the 10th, 100th...: an API server that
        # restarts is normal, and ten watches failing together are one story.
        level = logging.WARNING if failures in (0, 10, 100, 1000) else logging.DEBUG
        log.log(level, "watch %s: %s (retrying in %.1fs)", self.resource.plural, err, delay)
        self.stop.wait(delay)
        return failures + 1

    def _watch(self) -> bool:
        """Follow one watch stream from `self.version`, moving it along with every event
        (bookmarks included), so a stream that breaks resumes where it stopped; 410 sets
        it to None (list again). Whether the stream delivered anything."""
        assert self.version is not None
        delivered = False
        for kind, obj in self.client.watch(
            self.resource,
            self.version,
            label_selector=self.label_selector,
            timeout_seconds=self.timeout_seconds,
        ):
            if self.stop.is_set():
                return delivered
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
                    self.version = None
                    return delivered
                raise ApiError(int(code or 500), str(obj.get("reason")), str(obj.get("message")))
            delivered = True
            if kind != "BOOKMARK":
                self.store.apply(self.resource, kind, obj)
            self.version = str((obj.get("metadata") or {}).get("resourceVersion") or self.version)
        return delivered

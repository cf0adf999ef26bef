"""Prometheus metrics of the webhook, shared across gunicorn workers (multiprocess mode)."""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from collections.abc import Callable

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

log = logging.getLogger("tower.webhook")

REQUESTS = Counter(
    "tower_webhook_requests_total",
    "Webhook HTTP requests by path, status code and outcome (allowed, patched, denied, "
    "converted, or rejected for a malformed request).",
    ["path", "code", "outcome"],
)
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
LATENCY = Histogram(
    "tower_webhook_request_duration_seconds",
    "Time to answer one webhook request.",
    ["path"],
    buckets=BUCKETS,
)


class Tally:
    """Per-process counts written to the shared metric files at most once per interval.

    In multiprocess mode every metric update takes a lock, checks the pid and writes a
    file-backed page: three per request cost 20-25 µs of CPU under load, a tenth of a
    request. Counting in memory and writing once a second keeps the totals exact.

    Writing happens on the flusher thread, never on an admission request's: a metrics
    directory that is missing or full must not fail an admission. What could not be
    written is kept and written by a later flush.
    """

    def __init__(self, interval: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, str, str], int] = {}
        self._latency: dict[str, list[float]] = {}  # path -> [count per bucket..., +Inf, sum]
        self._next_flush = clock() + interval
        self._flusher: threading.Thread | None = None
        self._failing = False

    def _start_flusher(self) -> None:
        # Started by the first request, so it runs in the worker process (after fork), and
        # writes the counts of a worker that went quiet.
        def loop() -> None:
            while True:
                time.sleep(self._interval)
                if self._requests:
                    try:
                        self.flush()
                    except Exception:  # the thread must outlive a bug: requests keep counting
                        log.exception("writing the webhook's metrics failed")

        self._flusher = threading.Thread(target=loop, name="metrics-flush", daemon=True)
        self._flusher.start()

    def record(self, path: str, code: str, outcome: str, seconds: float) -> None:
        """Count one answered request."""
        key = (path, code, outcome)
        if self._flusher is None and self._clock is time.monotonic:
            self._start_flusher()
        with self._lock:
            self._requests[key] = self._requests.get(key, 0) + 1
            row = self._latency.get(path)
            if row is None:
                row = self._latency[path] = [0.0] * (len(BUCKETS) + 2)
            row[bisect.bisect_left(BUCKETS, seconds)] += 1
            row[-1] += seconds
        if self._flusher is None and self._clock() >= self._next_flush:
            self.flush()  # no flusher thread (a test's clock): write here

    def flush(self) -> None:
        """Write what was counted since the last flush; keep what could not be written."""
        with self._lock:
            requests, self._requests = self._requests, {}
            latency, self._latency = self._latency, {}
            self._next_flush = self._clock() + self._interval
        try:
            _write(requests, latency)
        except OSError as err:
            # _write took out what it wrote: the rest waits for the next flush.
            with self._lock:
                for key, count in requests.items():
                    self._requests[key] = self._requests.get(key, 0) + count
                for path, left in latency.items():
                    row = self._latency.setdefault(path, [0.0] * len(left))
                    for index, value in enumerate(left):
                        row[index] += value
            if not self._failing:
                self._failing = True
                log.warning(
                    "webhook metrics not written (%s); counts are kept until they can be", err
                )
            return
        if self._failing:
            self._failing = False
            log.warning("webhook metrics written again")


def _write(requests: dict[tuple[str, str, str], int], latency: dict[str, list[float]]) -> None:
    """Add the counts to the metrics, taking out of both dicts what was written."""
    for key in list(requests):
        REQUESTS.labels(*key).inc(requests[key])
        del requests[key]
    for path in list(latency):
        row = latency[path]
        child = LATENCY.labels(path)
        # Histogram has no bulk observe: add to its bucket and sum values directly
        # (prometheus_client's own layout: one value per bucket, +Inf last, then _sum).
        for index, hits in enumerate(row[:-1]):
            if hits:
                child._buckets[index].inc(hits)
                row[index] = 0.0
        child._sum.inc(row[-1])
        del latency[path]


TALLY = Tally()


def render() -> tuple[bytes, str]:
    """The exposition text: merged from every worker when PROMETHEUS_MULTIPROC_DIR is set."""
    TALLY.flush()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    """Tell the multiprocess collector a worker is gone (gunicorn's child_exit hook)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)

"""Prometheus metrics of the webhook, shared across gunicorn workers (multiprocess mode)."""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)

REQUESTS = Counter(
    "tower_webhook_requests_total",
    "Webhook HTTP requests by path and status code.",
    ["path", "code"],
)
LATENCY = Histogram(
    "tower_webhook_request_duration_seconds",
    "Time to answer one webhook request.",
    ["path"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
DECISIONS = Counter(
    "tower_webhook_decisions_total",
    "Admission answers by path and outcome (allowed, denied, patched).",
    ["path", "outcome"],
)


def render() -> tuple[bytes, str]:
    """The exposition text: merged from every worker when PROMETHEUS_MULTIPROC_DIR is set."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    """Tell the multiprocess collector a worker is gone (gunicorn's child_exit hook)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)

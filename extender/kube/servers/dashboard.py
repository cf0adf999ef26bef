"""The live dashboard: quota against usage, who waits and why, and the last hour's admissions.

Served on `--dashboard-address` by every replica from its own watch caches (no request to
kube-apiserver): `/` is one static page (HTML, CSS and a little JavaScript, no build step, no
CDN) that polls `/api/state`. It shows what `kubectl get cq,lq,workloads` shows, nothing of
pods, templates or Secrets. The state is rebuilt from the cache at most once per interval,
however many people watch.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from extender.core.admission import multikueue
from extender.core.api.quantity import format_amount
from extender.kube.api import objects as o
from extender.kube.api.resources import CONFIG, WORKLOADS, Resource
from extender.kube.api.snapshot import Snapshot, load, queue_order
from extender.kube.api.store import Store
from extender.kube.api.trim import FinishedWorkload

PAGE = Path(__file__).with_name("dashboard.html")
HISTORY = 3600.0  # seconds of admissions, evictions and finishes shown


class _StoreLister:
    """The store read as `snapshot.load` reads an API server (list only)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def list(self, resource: Resource, *args: Any, **kwargs: Any) -> tuple[list[Any], str]:
        items = []
        for _, obj in self.store.items(resource):
            if isinstance(obj, FinishedWorkload):
                obj = dict(obj)
                obj.setdefault("status", {"conditions": [{"type": "Finished", "status": "True"}]})
            items.append(obj)
        return items, ""


class Dashboard:
    """What the page shows, from the cache; the recent history from watched changes."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        interval: float = 2.0,
    ) -> None:
        self.store = store
        self.clock = clock
        self.interval = interval
        self._lock = threading.Lock()
        self._cached: tuple[float, bytes] | None = None
        self.history: deque[dict[str, Any]] = deque()
        store.subscribe(WORKLOADS, self._on_workload)

    # ----- history from watched changes ----------------------------------------------------

    def _on_workload(self, key: str, old: Any, new: Any) -> None:
        if old is None or new is None:
            return  # the first list, or a deletion: nothing happened that the page tells
        now = self.clock()
        for kind in ("Admitted", "Evicted", "Finished"):
            if _true(new, kind) and not _true(old, kind):
                entry: dict[str, Any] = {"time": now, "event": kind, "workload": key}
                if kind == "Admitted" and isinstance(new, Mapping):
                    admission = o.admission_of(new)
                    if admission is not None:
                        entry["clusterQueue"] = admission.cluster_queue
                if kind == "Evicted":
                    entry["reason"] = _reason(new, kind)
                with self._lock:
                    self.history.append(entry)
        with self._lock:
            while self.history and self.history[0]["time"] < now - HISTORY:
                self.history.popleft()

    # ----- the state the page polls --------------------------------------------------------

    def synced(self) -> bool:
        return all(self.store.synced(r).is_set() for r in (*CONFIG, WORKLOADS))

    def state_json(self) -> bytes:
        now = self.clock()
        with self._lock:
            if self._cached is not None and now - self._cached[0] < self.interval:
                return self._cached[1]
        data = self.state(now)
        body = orjson.dumps(data)
        with self._lock:
            self._cached = (now, body)
        return body

    def state(self, now: float) -> dict[str, Any]:
        if not self.synced():
            return {"synced": False, "clusterQueues": [], "cohorts": [], "events": []}
        snapshot = load(_StoreLister(self.store), now)  # type: ignore[arg-type]
        state = snapshot.state
        queues = []
        cluster_queues = [
            (name, cq) for name in state.cluster_queue_names() if (cq := state.cluster_queue(name))
        ]
        for name, cq in cluster_queues:
            usage = state.quota_usage(name)
            resources = []
            for (flavor, resource), quota in sorted(cq.quotas.items()):
                used = usage.get((flavor, resource), 0)
                resources.append(
                    {
                        "flavor": flavor,
                        "resource": resource,
                        "nominal": quota.nominal,
                        "usage": used,
                        "borrowed": max(0, used - quota.nominal),
                        "borrowingLimit": quota.borrowing_limit,
                        "lendingLimit": quota.lending_limit,
                        "label": f"{format_amount(resource, used)} / "
                        f"{format_amount(resource, quota.nominal)}",
                    }
                )
            active, reason, message = state.cluster_queue_active(name)
            queues.append(
                {
                    "name": name,
                    "cohort": cq.cohort,
                    "active": active,
                    "inactiveReason": "" if active else f"{reason}: {message}",
                    "admitted": len(list(state.admitted_in(name))),
                    "resources": resources,
                    "pending": _pending(snapshot, name),
                    "multiCluster": _multi_cluster(snapshot, name),
                }
            )
        cohorts: dict[str, list[str]] = {}
        for name, cq in cluster_queues:
            if cq.cohort:
                cohorts.setdefault(cq.cohort, []).append(name)
        with self._lock:
            events = [e for e in self.history if e["time"] >= now - HISTORY]
        return {
            "synced": True,
            "generatedAt": now,
            "clusterQueues": queues,
            "cohorts": [{"name": c, "clusterQueues": m} for c, m in sorted(cohorts.items())],
            "events": list(reversed(events))[:200],
        }


def _pending(snapshot: Snapshot, cq_name: str) -> list[dict[str, Any]]:
    out = []
    for position, workload in enumerate(queue_order(snapshot.state, cq_name), start=1):
        written = snapshot.reason(workload.key)
        status = snapshot.state.pending_status(workload.key)
        reason, message = written if written else (status.reason, status.message)
        out.append(
            {
                "position": position,
                "workload": workload.key,
                "localQueue": workload.queue_name,
                "priority": workload.priority,
                "reason": reason,
                "message": message,
            }
        )
    return out


def _multi_cluster(snapshot: Snapshot, cq_name: str) -> list[dict[str, Any]]:
    """Its Workloads that MultiKueue sent to worker clusters: where each one is."""
    out = []
    for held in snapshot.state.admitted_in(cq_name):
        key = held.workload.key
        status = (snapshot.objects.get(key) or {}).get("status") or {}
        where = multikueue.whereabouts(cq_name, status)
        if where is not None:
            out.append({"workload": key, "where": where[0], **where[1]})
    return sorted(out, key=lambda e: e["workload"])


def _true(obj: Any, kind: str) -> bool:
    if isinstance(obj, FinishedWorkload):
        return kind == "Finished"
    return isinstance(obj, Mapping) and o.is_true(obj, kind)


def _reason(obj: Any, kind: str) -> str:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return str(condition.get("reason") or "")
    return ""


def serve(dashboard: Dashboard, address: str) -> ThreadingHTTPServer:
    """Serve the page and its state on HOST:PORT in background threads."""
    host, _, port = address.rpartition(":")
    page = PAGE.read_bytes()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in ("/", "/index.html"):
                self._send(200, page, "text/html; charset=utf-8")
            elif path == "/api/state":
                self._send(200, dashboard.state_json(), "application/json")
            else:
                self._send(404, b"not found\n", "text/plain")

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="dashboard").start()
    return server

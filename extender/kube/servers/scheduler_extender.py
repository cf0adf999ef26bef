"""The kube-scheduler extender: POST /scheduler/filter and /scheduler/prioritize, on every replica.

The wire format is kube-scheduler's own (k8s.io/kube-scheduler/extender/v1): ExtenderArgs in
(`Pod`, and `NodeNames` with nodeCacheCapable, or full `Nodes` without), ExtenderFilterResult
and HostPriorityList out, with the capitalised keys of Go structs that have no json tags.
A pod of an admitted Tower workload keeps to the nodes of its plan; another pod that uses a
checked resource may not take what a plan holds; every other pod passes untouched. Bad input
is a 400 with its reason, never a 5xx: kube-scheduler treats any non-200 as an error, and the
extender is configured `ignorable`, so scheduling goes on without it.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from extender.core.api.models import WORKLOAD_ANNOTATION
from extender.core.api.parse import ManifestError
from extender.core.jobframework.jobs import pod_requests
from extender.kube.api import objects as o
from extender.kube.api.placement import Placement

log = logging.getLogger("tower.scheduler_extender")

FILTER = "/scheduler/filter"
PRIORITIZE = "/scheduler/prioritize"
MAX_BODY = 64 << 20  # 500 full Node objects are a few MiB


class ExtenderArgsError(ValueError):
    """ExtenderArgs that cannot be read; the message names the field."""


def _pod(args: Any) -> tuple[str, str | None, str | None, dict[str, int]]:
    """(namespace, workload, podSet, requests) of ExtenderArgs.Pod."""
    if not isinstance(args, dict):
        raise ExtenderArgsError("ExtenderArgs: must be a JSON object")
    pod = args.get("Pod")
    if not isinstance(pod, dict):
        raise ExtenderArgsError("ExtenderArgs.Pod: must be an object (a v1.Pod)")
    meta = pod.get("metadata")
    spec = pod.get("spec")
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        raise ExtenderArgsError("ExtenderArgs.Pod: metadata and spec must be objects")
    namespace = str(meta.get("namespace") or "default")
    annotations = meta.get("annotations")
    labels = meta.get("labels")
    annotations = annotations if isinstance(annotations, dict) else {}
    labels = labels if isinstance(labels, dict) else {}
    try:
        requests = pod_requests(spec, "ExtenderArgs.Pod.spec")
    except ManifestError as err:
        raise ExtenderArgsError(f"{err.path}: {err.message}") from None
    workload = annotations.get(WORKLOAD_ANNOTATION)
    pod_set = labels.get(o.PODSET_LABEL)
    return (
        namespace,
        str(workload) if workload else None,
        str(pod_set) if pod_set else None,
        requests,
    )


def _candidates(args: dict[str, Any]) -> tuple[list[str], list[Any] | None]:
    """The candidate node names, and the full Node objects when they were sent."""
    names = args.get("NodeNames")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ExtenderArgsError("ExtenderArgs.NodeNames: must be a list of node names")
        return names, None
    nodes = args.get("Nodes")
    if nodes is None:
        return [], None
    items = nodes.get("items") if isinstance(nodes, dict) else None
    if not isinstance(items, list):
        raise ExtenderArgsError("ExtenderArgs.Nodes.items: must be a list of v1.Node")
    out = []
    for i, node in enumerate(items):
        name = (node.get("metadata") or {}).get("name") if isinstance(node, dict) else None
        if not isinstance(name, str):
            raise ExtenderArgsError(f"ExtenderArgs.Nodes.items[{i}].metadata.name: is required")
        out.append(name)
    return out, items


class SchedulerExtender:
    """Answers filter and prioritize from the placement inventory."""

    def __init__(self, placement: Placement, synced: Callable[[], bool]) -> None:
        self.placement = placement
        self.synced = synced  # nodes, pods and Workloads listed at least once

    def filter(self, body: bytes) -> dict[str, Any]:
        args = _decode(body)
        namespace, workload, pod_set, requests = _pod(args)
        names, items = _candidates(args)
        if not self.synced():
            # A cold cache knows no plans: let every pod through. Only a pod Tower manages is
            # told (an ignorable extender's Error lets kube-scheduler go on without it).
            error = "tower: the node cache is not synced yet" if workload else ""
            return _filter_result(names, items, {}, error)
        passed, failed = self.placement.filter(namespace, workload, pod_set, requests, names)
        return _filter_result(passed, items, failed, "")

    def prioritize(self, body: bytes) -> list[dict[str, Any]]:
        args = _decode(body)
        namespace, workload, pod_set, _ = _pod(args)
        names, _items = _candidates(args)
        if not self.synced():
            return [{"Host": n, "Score": 0} for n in names]
        scores = self.placement.prioritize(namespace, workload, pod_set, names)
        return [{"Host": host, "Score": score} for host, score in scores]


def _decode(body: bytes) -> dict[str, Any]:
    try:
        args = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise ExtenderArgsError(f"ExtenderArgs: not JSON ({err})") from None
    if not isinstance(args, dict):
        raise ExtenderArgsError("ExtenderArgs: must be a JSON object")
    return args


def _filter_result(
    names: list[str], items: list[Any] | None, failed: Mapping[str, str], error: str
) -> dict[str, Any]:
    if items is None:
        kept_nodes: Any = None
        kept_names: Any = names
    else:
        passed = set(names)
        kept = [n for n in items if n["metadata"]["name"] in passed]
        kept_nodes, kept_names = {"metadata": {}, "items": kept}, None
    return {
        "Nodes": kept_nodes,
        "NodeNames": kept_names,
        "FailedNodes": dict(failed),
        "FailedAndUnresolvableNodes": {},
        "Error": error,
    }


def serve(
    extender: SchedulerExtender,
    address: str,
    *,
    cert_file: str | None = None,
    key_file: str | None = None,
    on_request: Callable[[str, int, float], None] | None = None,
) -> ThreadingHTTPServer:
    """Serve the extender on HOST:PORT in background threads (TLS with a cert and key)."""
    host, _, port = address.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: kube-scheduler reuses its connections
        # One write per answer, sent at once: a small answer held back by Nagle's algorithm
        # waits for the client's delayed ACK (40 ms a call on Linux).
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            started = time.perf_counter()
            path = self.path.split("?", 1)[0].rstrip("/")
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self._send(400, {"Error": "request body: a Content-Length up to 64 MiB"}, path)
                self.close_connection = True
                return
            body = self.rfile.read(length)
            try:
                if path == FILTER:
                    answer: Any = extender.filter(body)
                elif path == PRIORITIZE:
                    answer = extender.prioritize(body)
                else:
                    self._send(404, {"Error": f"no such path {path}: {FILTER}, {PRIORITIZE}"}, path)
                    return
            except ExtenderArgsError as err:
                log.warning("scheduler extender %s: %s", path, err)
                self._send(400, {"Error": str(err)}, path)
                return
            except Exception:  # a bug must not take the scheduler down with a 5xx loop
                log.exception("scheduler extender %s failed; letting the pod through", path)
                self._send(400, {"Error": "tower: internal error (see the controller's log)"}, path)
                return
            self._send(200, answer, path, started)

        def do_GET(self) -> None:
            self._send(405, {"Error": "POST ExtenderArgs to /scheduler/filter or prioritize"}, "")

        def _send(self, code: int, answer: Any, path: str, started: float | None = None) -> None:
            data = orjson.dumps(answer)
            head = (
                f"HTTP/1.1 {code} {self.responses.get(code, ('',))[0]}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n"
            )
            self.wfile.write(head.encode("latin-1") + data)
            self.log_request(code)
            if on_request is not None and started is not None:
                on_request(path, code, time.perf_counter() - started)

    server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
    server.daemon_threads = True
    if cert_file and key_file:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(cert_file, key_file)
        # The handshake happens on the connection's own thread, not in the accept loop.
        server.socket = context.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    threading.Thread(target=server.serve_forever, daemon=True, name="scheduler-extender").start()
    return server

"""`python -m extender run`: the one place that builds the real client, clock and servers."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from extender.gc_tuning import tune_for_scheduling
from extender.kube.client import ConfigError, KubeClient, RequestBudget, load_api_client
from extender.kube.controller import Controller, Settings
from extender.kube.events import Recorder
from extender.kube.leader import LeaderElector
from extender.kube.metrics import Metrics

log = logging.getLogger("tower")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--kubeconfig",
        default=env("KUBECONFIG"),
        help="kubeconfig file (default: in-cluster configuration)",
    )
    parser.add_argument(
        "--kube-api-qps",
        type=_above_zero,
        default=env("TOWER_KUBE_API_QPS", "50"),
        help="average API requests per second (client-go's QPS) [TOWER_KUBE_API_QPS] (default 50)",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=_at_least_one,
        default=env("TOWER_KUBE_API_BURST", "100"),
        help="API requests allowed in a burst [TOWER_KUBE_API_BURST] (default 100)",
    )
    parser.add_argument(
        "--event-qps",
        type=_above_zero,
        default=10.0,
        help="Kubernetes Events per second, on their own budget (default 10)",
    )
    parser.add_argument(
        "--fair-sharing",
        action="store_true",
        help="order and preempt by weighted dominant resource share",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="run active/standby with a coordination.k8s.io Lease (default on)",
    )
    parser.add_argument("--leader-election-namespace", default=env("POD_NAMESPACE", "tower-system"))
    parser.add_argument("--leader-election-id", default="tower-controller")
    parser.add_argument("--lease-duration", type=_above_zero, default=15.0)
    parser.add_argument("--renew-deadline", type=_above_zero, default=10.0)
    parser.add_argument("--retry-period", type=_above_zero, default=2.0)
    parser.add_argument(
        "--health-address",
        type=_host_port,
        default="0.0.0.0:8081",
        help="host:port of /healthz, /readyz and /metrics (port 0: pick one)",
    )
    parser.add_argument(
        "--status-interval",
        type=_above_zero,
        default=1.0,
        help="seconds between ClusterQueue/LocalQueue status writes",
    )
    parser.add_argument(
        "--pending-status-qps",
        type=_above_zero,
        default=5.0,
        help="pending-reason writes per second (spare budget only)",
    )
    parser.add_argument("--log-format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=("debug", "info", "warning", "error"),
        default="info",
    )


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def _above_zero(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not 0 < number < math.inf:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{value!r} is not a number above 0")
    return number


def _at_least_one(value: str) -> int:
    if not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least 1")
    return int(value)


def check_arguments(args: argparse.Namespace) -> str | None:
    """What is wrong across flags, in one line, or None (client-go's leader-election rules)."""
    if args.leader_elect and not args.lease_duration > args.renew_deadline > args.retry_period:
        return (
            "--lease-duration must be longer than --renew-deadline, and that longer than "
            f"--retry-period (got {args.lease_duration:g}, {args.renew_deadline:g}, "
            f"{args.retry_period:g})"
        )
    return None


def _host_port(value: str) -> str:
    """--health-address: host:port, the port a number (0 picks a free one)."""
    _, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not host:port (port 0 picks a free one)")
    return value


def serve_health(
    address: str, controller: Controller, leading: threading.Event
) -> ThreadingHTTPServer:
    host, _, port = address.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            if self.path == "/healthz":
                code, body, ctype = 200, b"ok\n", "text/plain"
            elif self.path == "/readyz":
                if controller.ready.is_set():
                    code, body = 200, b"ok\n"
                elif not leading.is_set():
                    code, body = 503, b"standing by: another replica leads\n"
                else:
                    code, body = 503, b"caches not synced yet\n"
                ctype = "text/plain"
            elif self.path == "/metrics":
                code, body, ctype = (
                    200,
                    generate_latest(controller.metrics.registry),
                    CONTENT_TYPE_LATEST,
                )
            else:
                code, body, ctype = 404, b"not found\n", "text/plain"
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="health").start()
    return server


def run(args: argparse.Namespace) -> int:
    """Run the controller until SIGTERM/SIGINT (0) or until leadership is lost (1)."""
    problem = check_arguments(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    _logging(args.log_format, args.log_level)
    try:
        api_client = load_api_client(args.kubeconfig)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    budget = RequestBudget(args.kube_api_qps, args.kube_api_burst)
    client = KubeClient(api_client, budget)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    metrics = Metrics()
    recorder = Recorder(client, qps=args.event_qps)
    settings = Settings(
        fair_sharing=args.fair_sharing,
        status_interval=args.status_interval,
        pending_status_qps=args.pending_status_qps,
    )
    controller = Controller(
        client, settings=settings, metrics=metrics, recorder=recorder, clock=time.time
    )
    leading = threading.Event()
    try:
        health = serve_health(args.health_address, controller, leading)
    except OSError as err:
        recorder.close()
        print(
            f"error: cannot serve /healthz, /readyz and /metrics on {args.health_address}: "
            f"{err.strerror or err}",
            file=sys.stderr,
        )
        return 2
    print(f"health and metrics on port {health.server_address[1]}", file=sys.stderr, flush=True)
    elector = None
    lost: threading.Event | None = None
    if args.leader_elect:
        identity = f"{socket.gethostname()}_{os.getpid()}"
        elector = LeaderElector(
            client,
            identity,
            name=args.leader_election_id,
            namespace=args.leader_election_namespace,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
        )
        if not elector.acquire(stop):
            health.shutdown()
            return 0
        lost = elector.lost
    leading.set()
    tune_for_scheduling()
    controller.run(stop, lost=lost)
    stop.set()
    recorder.close()
    if elector is not None:
        elector.release()
    health.shutdown()
    writes = budget.total_writes
    log.info("stopped after %d API writes", writes)
    if lost is not None and lost.is_set():
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extender run")
    add_arguments(parser)
    return run(parser.parse_args(argv))

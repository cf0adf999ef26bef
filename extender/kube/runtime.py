"""`python -m extender run`: the one place that builds the real client, clock and servers."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from extender.core.jobframework import registry
from extender.core.placement.fit import checked_resources
from extender.gc_tuning import tune_for_scheduling
from extender.kube.api.cache import Cache, watch_for_kinds
from extender.kube.api.client import ConfigError, RequestBudget, RestClient, load_api_client
from extender.kube.api.events import Recorder
from extender.kube.api.kueue_lease import KUEUE_LEASE, KueueLease, YieldingFence, parse_lease
from extender.kube.api.lease import LeaderElector, SetupError, Unfenced
from extender.kube.api.metrics import Metrics
from extender.kube.api.placement import Placement
from extender.kube.api.preflight import preflight
from extender.kube.api.resources import NODES, PODS, WORKLOADS, resource_of, resource_of_parent
from extender.kube.config_file import ConfigFileError, settle
from extender.kube.controller.context import Settings
from extender.kube.controller.loop import Controller
from extender.kube.servers.dashboard import PAGE, Dashboard
from extender.kube.servers.scheduler_extender import SchedulerExtender
from extender.kube.servers.scheduler_extender import serve as serve_extender
from extender.kube.servers.secure import (
    CertificateError,
    DelegatedAuth,
    Request,
    Response,
    SecureServer,
    ServingCertificate,
    TrustSource,
)
from extender.kube.servers.visibility import (
    CachedPositions,
    VisibilityApi,
    VisibilityRequest,
    leader_or_cached,
)

log = logging.getLogger("tower")
DEFAULT_METRICS_ADDRESS = ":8443"  # Kueue's metrics.bindAddress default


def add_arguments(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--kubeconfig",
        default=env("KUBECONFIG"),
        help="kubeconfig file (default: in-cluster configuration)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=env("TOWER_CONFIG"),
        help="Kueue's Configuration file (config.kueue.x-k8s.io/v1beta2; v1beta1 is converted), "
        "as Kueue's manager reads it with the same flag: its clientConnection, leaderElection, "
        "integrations.frameworks and fairSharing set the flags below, with Kueue's defaults "
        "where it is silent; a flag given overrides the file; its waitForPodsReady is acted "
        "on as Kueue does (without a file it is off); each other field set is one warning "
        "line at start [TOWER_CONFIG]",
    )
    parser.add_argument(
        "--feature-gates",
        dest="feature_gates_flag",
        metavar="Name=true,Other=false",
        default=env("TOWER_FEATURE_GATES"),
        help="Kueue's feature gates by Kueue's names, as Kueue's manager takes them; each "
        "gate named here wins over the --config file's featureGates; an unknown or locked "
        "gate, or one Tower cannot honour, stops the start with one line (docs/kueue.md, "
        "Feature gates) [TOWER_FEATURE_GATES]",
    )
    parser.add_argument(
        "--kube-api-qps",
        type=_above_zero,
        default=env("TOWER_KUBE_API_QPS"),
        help="average API requests per second (client-go's QPS) [TOWER_KUBE_API_QPS] "
        "(default: the file's clientConnection.qps, else Kueue's 300)",
    )
    parser.add_argument(
        "--kube-api-burst",
        type=_at_least_one,
        default=env("TOWER_KUBE_API_BURST"),
        help="API requests allowed in a burst [TOWER_KUBE_API_BURST] "
        "(default: the file's clientConnection.burst, else Kueue's 500)",
    )
    parser.add_argument(
        "--write-concurrency",
        type=_at_least_zero,
        default=env("TOWER_WRITE_CONCURRENCY", "8"),
        help="writes sent to the API server together (besides the loop's own), each "
        "object's in order, within the budget above (0: one at a time) "
        "[TOWER_WRITE_CONCURRENCY] (default 8)",
    )
    parser.add_argument(
        "--multikueue-admission-timeout",
        type=_seconds_or_zero,
        default=env("TOWER_MULTIKUEUE_ADMISSION_TIMEOUT", "900"),
        help="seconds a Workload dispatched by a MultiKueue check may wait for a worker "
        "cluster to admit it before its quota here is given back, with each worker's answer "
        "(Kueue waits forever: 0) [TOWER_MULTIKUEUE_ADMISSION_TIMEOUT] (default 900)",
    )
    parser.add_argument(
        "--event-qps",
        type=_above_zero,
        default=10.0,
        help="Kubernetes Events per second, on their own budget (default 10)",
    )
    parser.add_argument(
        "--fair-sharing",
        action=argparse.BooleanOptionalAction,
        help="order and preempt by weighted dominant resource share (default: on when the "
        "file has fairSharing, else off)",
    )
    parser.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        help="run active/standby with a coordination.k8s.io Lease (default: the file's "
        "leaderElection.leaderElect, else on)",
    )
    parser.add_argument(
        "--leader-election-namespace",
        help="the Lease's namespace (default: the file's leaderElection.resourceNamespace, "
        "else $POD_NAMESPACE, else tower-system)",
    )
    parser.add_argument(
        "--leader-election-id",
        help="the Lease's name (default: the file's leaderElection.resourceName, Kueue's "
        "c1f6bfd2.kueue.x-k8s.io when the file is silent; without a file tower-controller)",
    )
    parser.add_argument(
        "--lease-duration",
        type=_above_zero,
        help="seconds (default: the file's leaderElection.leaseDuration, else 15)",
    )
    parser.add_argument(
        "--renew-deadline",
        type=_above_zero,
        help="seconds (default: the file's leaderElection.renewDeadline, else 10)",
    )
    parser.add_argument(
        "--retry-period",
        type=_above_zero,
        help="seconds (default: the file's leaderElection.retryPeriod, else 2)",
    )
    parser.add_argument(
        "--kueue-lease",
        type=_kueue_lease,
        default=os.environ.get("TOWER_KUEUE_LEASE"),
        help="NAMESPACE/NAME of Kueue's leader-election Lease: while another controller "
        "renews it, Tower admits nothing (default: from the file's leaderElection and "
        f"namespace, else {KUEUE_LEASE}; none: do not look)",
    )
    parser.add_argument(
        "--health-address",
        type=_host_port,
        default="0.0.0.0:8081",
        help="host:port of /healthz and /readyz, plain HTTP and open, for the kubelet's "
        "probes (port 0: pick one)",
    )
    parser.add_argument(
        "--visibility-address",
        type=_metrics_address,
        default=env("TOWER_VISIBILITY_ADDRESS"),
        help="host:port of Kueue's visibility API (visibility.kueue.x-k8s.io, the pending "
        "workloads), an aggregated API server behind kube-apiserver: the front proxy's "
        "certificate or a token, and SubjectAccessReview, as Kueue's is served; the "
        "manifests set :8083 (Kueue's 8082 is the scheduler extender's here); 0 turns it off "
        "[TOWER_VISIBILITY_ADDRESS] (default: the file's visibilityServer, Kueue's :8082 where "
        "it names one, else 0)",
    )
    parser.add_argument(
        "--metrics-address",
        type=_metrics_address,
        default=env("TOWER_METRICS_ADDRESS"),
        help="host:port of /metrics over HTTPS, served to a caller the API server "
        "authenticates (a bearer token by TokenReview, or the front proxy's or a client "
        "certificate) and allows `get` on /metrics (SubjectAccessReview), as Kueue serves "
        "it; 0 turns it off; port 0 picks one [TOWER_METRICS_ADDRESS] (default: the file's "
        "metrics.bindAddress, else Kueue's :8443)",
    )
    parser.add_argument(
        "--metrics-cert-dir",
        default=env("TOWER_METRICS_CERT_DIR"),
        help="folder of the metrics server's tls.crt and tls.key, read again when they "
        "change (Kueue's is /etc/kueue/metrics/certs); unset: a self-signed certificate "
        "made at start, as Kueue's [TOWER_METRICS_CERT_DIR]",
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
    parser.add_argument(
        "--kube-api-timeout",
        type=_above_zero,
        default=env("TOWER_KUBE_API_TIMEOUT", "10"),
        help="seconds before an API request without an answer counts as failed (it is "
        "retried with backoff) [TOWER_KUBE_API_TIMEOUT] (default 10)",
    )
    parser.add_argument(
        "--physical-resources",
        default=env("TOWER_PHYSICAL_RESOURCES"),
        help="comma-separated resources whose pods must fit on one node before admission "
        "(default: every extended resource, e.g. nvidia.com/gpu; cpu and memory stay "
        "quota-only unless listed; `none` turns physical fit off, and nodes and pods are "
        "then not watched) [TOWER_PHYSICAL_RESOURCES]",
    )
    parser.add_argument(
        "--scheduler-extender-address",
        type=_host_port,
        default=env("TOWER_SCHEDULER_EXTENDER_ADDRESS"),
        help="host:port to serve kube-scheduler's extender calls on (POST /scheduler/filter, "
        "/scheduler/prioritize); off when unset [TOWER_SCHEDULER_EXTENDER_ADDRESS]",
    )
    parser.add_argument(
        "--scheduler-name",
        default=env("TOWER_SCHEDULER_NAME"),
        help="schedulerName set on the pods of placed workloads, for a second kube-scheduler "
        "that calls the extender (deploy/scheduler/second-scheduler.yaml); unset: pods keep "
        "their own [TOWER_SCHEDULER_NAME]",
    )
    parser.add_argument(
        "--dashboard",
        action=argparse.BooleanOptionalAction,
        default=env("TOWER_DASHBOARD", "").lower() in ("1", "true"),
        help="the read-only dashboard (quota, who waits and why, the last hour) at "
        "/dashboard/ on the metrics server, from this replica's caches: its page to anyone, "
        "its data to a caller allowed `get` on /dashboard/api/state [TOWER_DASHBOARD] "
        "(default off)",
    )
    parser.add_argument(
        "--dashboard-address",
        type=_host_port,
        default=env("TOWER_DASHBOARD_ADDRESS"),
        help="before the metrics server's HTTPS, the dashboard's own plain port; now "
        "--dashboard, with a warning (the address is not listened on) "
        "[TOWER_DASHBOARD_ADDRESS]",
    )
    parser.add_argument("--scheduler-extender-tls-cert-file", default=None)
    parser.add_argument("--scheduler-extender-tls-private-key-file", default=None)
    parser.add_argument(
        "--integrations",
        type=_integrations,
        default=env("TOWER_INTEGRATIONS"),
        help="comma-separated kinds of job to manage, by Kueue's integration names "
        "(batch/job, jobset.x-k8s.io/jobset, ...; default: the file's integrations.frameworks "
        "(batch/job when it is silent), else the set in Kueue's default file, of which "
        "Tower manages " + ", ".join(a.framework for a in registry.enabled()) + ") "
        "[TOWER_INTEGRATIONS]",
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


def _seconds_or_zero(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not 0 <= number < math.inf:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds (0 or more)")
    return number


def _at_least_one(value: str) -> int:
    if not value.strip().isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least 1")
    return int(value)


def _at_least_zero(value: str) -> int:
    if not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of at least 0")
    return int(value)


def check_arguments(args: argparse.Namespace) -> str | None:
    """What is wrong across flags, in one line, or None (client-go's leader-election rules)."""
    if args.leader_elect and not args.lease_duration > args.renew_deadline > args.retry_period:
        return (
            "--lease-duration must be longer than --renew-deadline, and that longer than "
            f"--retry-period (got {args.lease_duration:g}, {args.renew_deadline:g}, "
            f"{args.retry_period:g})"
        )
    cert, key = args.scheduler_extender_tls_cert_file, args.scheduler_extender_tls_private_key_file
    if bool(cert) != bool(key):
        return (
            "--scheduler-extender-tls-cert-file and --scheduler-extender-tls-private-key-file "
            "go together (TLS needs both; plain HTTP neither)"
        )
    if args.scheduler_extender_address and _no_placement(args):
        return "--scheduler-extender-address needs physical fit: drop --physical-resources=none"
    return None


def _kueue_lease(value: str) -> str:
    try:
        parse_lease(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return value


def _no_placement(args: argparse.Namespace) -> bool:
    return str(args.physical_resources or "").strip().lower() == "none"


def _integrations(value: str | None) -> tuple[str, ...] | None:
    """--integrations: Kueue's names, comma-separated; a name no one knows is refused."""
    if value is None:
        return None
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = registry.unknown(names)
    if unknown:
        known = ", ".join(registry.KUEUE_FRAMEWORKS)
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown)}: no such integration (Kueue's are {known})"
        )
    return names


def _metrics_address(value: str) -> str:
    """--metrics-address: host:port, or 0 for no metrics server (as Kueue's bindAddress)."""
    return value if value.strip() == "0" else _host_port(value)


def _host_port(value: str) -> str:
    """--health-address: host:port, the port a number (0 picks a free one)."""
    _, colon, port = value.rpartition(":")
    if not colon or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"{value!r} is not host:port (port 0 picks a free one)")
    return value


class Readiness:
    """What /readyz says, and why.

    Ready: leading with its state rebuilt, or standing by with synced caches while another
    replica leads (a Deployment's rollout needs its standby ready, as controller-runtime's
    is). Not ready, with the reason: still checking the API server, caches not synced, or
    nobody leads (the reason says what stops this replica from taking the lease)."""

    def __init__(self) -> None:
        self.controller: Controller | None = None
        self.cache: Cache | None = None
        self.elector: LeaderElector | None = None
        self.reason = "starting"

    def check(self) -> tuple[bool, str]:
        controller = self.controller
        if controller is not None and controller.ready.is_set():
            return True, "ok: leading"
        if self.cache is not None and not self.cache.synced():
            return False, f"caches not synced yet: {', '.join(self.cache.unsynced())}"
        if self.elector is not None and controller is None:
            holder = self.elector.other_leader()
            if holder is not None:
                return True, f"ok: standing by, {holder} leads"
            problem = self.elector.problem
            if problem:
                return False, f"no replica leads the lease {self.elector.where}: {problem}"
        return False, self.reason


def serve_health(address: str, readiness: Readiness) -> ThreadingHTTPServer:
    """/healthz and /readyz in plain HTTP, open: the kubelet's probes carry no credentials."""
    host, _, port = address.rpartition(":")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            if self.path == "/healthz":
                code, body, ctype = 200, b"ok\n", "text/plain"
            elif self.path == "/readyz":
                ready, reason = readiness.check()
                code, body, ctype = (200 if ready else 503), f"{reason}\n".encode(), "text/plain"
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
    """Run the controller until SIGTERM/SIGINT (0). A lost lease, an API server that
    restarts or a dropped connection never ends it; a setup that can never work (no CRDs,
    no permission, no lease namespace) ends it at once with one line and status 2."""
    try:
        warnings = settle(args)
    except ConfigFileError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    problem = check_arguments(args)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    _logging(args.log_format, args.log_level)
    for line in warnings:
        log.warning("%s", line)
    try:
        api_client = load_api_client(args.kubeconfig)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    role = "leader" if args.leader_elect else "standalone"  # Kueue's replica_role
    metrics = Metrics(config=args.metrics_config, replica_role=role)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    readiness = Readiness()
    try:
        health = serve_health(args.health_address, readiness)
    except OSError as err:
        print(
            f"error: cannot serve /healthz and /readyz on {args.health_address}: "
            f"{err.strerror or err}",
            file=sys.stderr,
        )
        return 2
    print(f"health on port {health.server_address[1]}", file=sys.stderr, flush=True)
    secure = None
    try:
        secure = serve_metrics(args, api_client, metrics, stop)
        return _serve(args, api_client, metrics, readiness, stop, secure)
    except SetupError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return 2
    finally:
        stop.set()
        health.shutdown()
        if secure is not None:
            secure.shutdown()


def serve_metrics(
    args: argparse.Namespace, api_client: Any, metrics: Metrics, stop: threading.Event
) -> SecureServer | None:
    """/metrics over authenticated HTTPS on --metrics-address (None when it is 0): reviews
    on their own budget, never fenced (a standby's metrics are scraped too), and the
    cluster's front-proxy trust read again every minute."""
    address = args.metrics_address or DEFAULT_METRICS_ADDRESS
    if address.strip() == "0":
        return None
    # A review slower than 5 s would fail the scrape anyway (Prometheus waits 10 s).
    timeout = min(args.kube_api_timeout, 5.0)
    reviews = RestClient(api_client, RequestBudget(20, 50), timeout=timeout)
    trust = TrustSource(reviews)
    trust.refresh()  # before serving: a front proxy's first request is not refused
    auth = DelegatedAuth(reviews, trust, clock=time.monotonic)

    def scrape(_: Request) -> Response:
        return Response(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)

    try:
        certificate = (
            ServingCertificate.from_dir(args.metrics_cert_dir)
            if args.metrics_cert_dir
            else ServingCertificate.self_signed(datetime.now(UTC))
        )
        server = SecureServer(
            address, auth, {"/metrics": scrape}, certificate=certificate, name="metrics"
        ).start()
    except CertificateError as err:
        raise SetupError(f"--metrics-cert-dir: {err}") from None
    except OSError as err:
        raise SetupError(f"cannot serve /metrics on {address}: {err.strerror or err}") from None
    threading.Thread(
        target=server.keep_current, args=(stop,), daemon=True, name="metrics-trust"
    ).start()
    print(
        f"metrics over https ({certificate.source} certificate) on port {server.port}",
        file=sys.stderr,
        flush=True,
    )
    return server


def _serve(
    args: argparse.Namespace,
    api_client: Any,
    metrics: Metrics,
    readiness: Readiness,
    stop: threading.Event,
    secure: SecureServer | None,
) -> int:
    identity = f"{socket.gethostname()}_{os.getpid()}"
    on_error = _count_errors(metrics)
    base = RestClient(
        api_client,
        RequestBudget(args.kube_api_qps, args.kube_api_burst),
        timeout=args.kube_api_timeout,
        on_error=on_error,
    )
    elector = None
    fence = None
    lease_client = base.with_budget(
        RequestBudget(5, 10), timeout=max(0.5, min(5.0, args.renew_deadline / 2))
    )
    kueue = kueue_lease(args, lease_client)
    if kueue is not None:
        kueue.start(stop)
    if args.leader_elect:
        elector = LeaderElector(
            lease_client,
            identity,
            name=args.leader_election_id,
            namespace=args.leader_election_namespace,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
            yield_to=None if kueue is None else kueue.live,
        )
        fence = elector.fence
    if kueue is not None:
        fence = YieldingFence(fence or Unfenced(), kueue)
    if fence is not None:
        base.fence = fence.check
    readiness.reason = "checking the API server"
    readiness.elector = elector
    placement = (
        None if _no_placement(args) else Placement(checked_resources(args.physical_resources))
    )
    # About sixty small reviews, once per start (one per verb and kind, 60 with Kueue's default
    # set): at 5 per second past the burst they held the caches (and a standby's takeover)
    # back by seconds; a retry loop after a failure is still paced.
    adapters = registry.enabled(args.integrations)  # Settings.integrations, for the cache
    group_parents = registry.group_parents(args.integrations)
    unmanaged = registry.unmanaged(args.integrations)
    if unmanaged:
        log.info(
            "integrations Tower has no adapter for yet (their jobs are not queued): %s",
            ", ".join(unmanaged),
        )
    setup = preflight(
        base.with_budget(RequestBudget(5, 100), fenced=False),
        stop,
        placement=placement is not None,
        jobs=tuple(map(resource_of, adapters)),
        watched=tuple(map(resource_of_parent, group_parents)),
    )
    if setup is None:
        return 0
    cache = Cache(
        base,
        adapters=adapters,
        group_parents=group_parents,
        on_error=None,
        placement=placement,
    )
    cache.discover_kinds()
    cache.discover_optional()
    watch_for_kinds(cache, stop)
    if args.dashboard_address:
        log.warning(
            "--dashboard-address %s is not listened on: the dashboard is at /dashboard/ on "
            "the metrics server (--metrics-address), behind its authentication",
            args.dashboard_address,
        )
    if args.dashboard or args.dashboard_address:
        if secure is None:
            raise SetupError("--dashboard needs the metrics server: --metrics-address is 0")
        _mount_dashboard(secure, Dashboard(cache.store))
        print(f"dashboard on https port {secure.port}, /dashboard/", file=sys.stderr, flush=True)
    cache.start(stop)
    readiness.cache = cache
    visibility = serve_visibility(args, api_client, readiness, cache, stop)
    extender_server = None
    if placement is not None and args.scheduler_extender_address:
        extender_server = _serve_extender(args, placement, cache, metrics)
    recorder = Recorder(base, qps=args.event_qps)
    settings = Settings(
        fair_sharing=args.fair_sharing,
        status_interval=args.status_interval,
        pending_status_qps=args.pending_status_qps,
        scheduler_name=args.scheduler_name or None,
        integrations=args.integrations,
        write_concurrency=args.write_concurrency,
        wait_for_pods_ready=args.wait_for_pods_ready,
        resource_policy=args.resource_policy,
        admission_fair_sharing=args.admission_fair_sharing,
        managed_namespaces=args.managed_namespaces,
        multikueue=replace(args.multikueue, admission_timeout=args.multikueue_admission_timeout),
        namespace=args.namespace,
        feature_gates=args.feature_gates,
        scheduling=args.scheduling,
        label_keys_to_copy=args.label_keys_to_copy,
        workload_retention=args.workload_retention,
    )
    try:
        while not stop.is_set():
            if elector is not None:
                readiness.reason = f"waiting for the lease {elector.where}"
                if not elector.acquire(stop):
                    break
            elif kueue is not None and kueue.live() is not None:
                readiness.reason = kueue.live() or ""
                if not kueue.wait_free(stop):
                    break
            metrics.leading.set(1)
            readiness.reason = "leading: rebuilding its state from the caches"
            controller = Controller(
                base,
                cache,
                settings=settings,
                metrics=metrics,
                recorder=recorder,
                username=setup.username,
            )
            readiness.controller = controller
            tune_for_scheduling()
            controller.run(stop, fence)
            readiness.controller = None
            metrics.leading.set(0)
            if elector is None:
                if kueue is None or kueue.live() is None:
                    break
                log.warning("no longer admitting: waiting for Kueue's lease %s", kueue.where)
            elif not stop.is_set():
                log.warning("no longer leading: standing by for the lease %s", elector.where)
    finally:
        stop.set()
        recorder.close()
        if extender_server is not None:
            extender_server.shutdown()
        if visibility is not None:
            visibility.shutdown()
        if elector is not None:
            elector.release()
    log.info("stopped after %d API writes", base.budget.total_writes)
    return 0


def kueue_lease(args: argparse.Namespace, client: RestClient) -> KueueLease | None:
    """The watch on Kueue's lease, unless asked not to look or it is Tower's own lease (a
    Tower run with Kueue's Configuration in Kueue's namespace shares it: one leader)."""
    where = parse_lease(args.kueue_lease or KUEUE_LEASE)
    if where is None:
        return None
    own = (args.leader_election_namespace, args.leader_election_id)
    if args.leader_elect and where == own:
        return None
    return KueueLease(client, *where, period=args.retry_period)


def serve_visibility(
    args: argparse.Namespace,
    api_client: Any,
    readiness: Readiness,
    cache: Cache,
    stop: threading.Event,
) -> SecureServer | None:
    """Kueue's visibility API on --visibility-address (None when it is 0), behind the same
    front door as /metrics: the leader answers from its live queues, a standby from its
    caches (extender/kube/servers/visibility)."""
    address = args.visibility_address
    if not address or address.strip() == "0":
        return None
    reviews = RestClient(api_client, RequestBudget(20, 50), timeout=min(args.kube_api_timeout, 5.0))
    trust = TrustSource(reviews)
    trust.refresh()  # the aggregator's first availability check is not refused

    def live() -> Any:
        controller = readiness.controller
        return controller.positions if controller is not None else None

    api = VisibilityApi(
        leader_or_cached(live, CachedPositions(cache.store)),
        lambda key: cache.store.get(WORKLOADS, key),
    )

    def answer(request: Request) -> Response:
        asked = VisibilityRequest(
            request.method,
            request.path,
            request.query,
            request.user.name,
            request.header("Accept") or "application/json",
        )
        got = api.handle(asked)
        return Response(got.status, got.body, got.content_type, got.headers)

    try:
        server = SecureServer(
            address,
            DelegatedAuth(reviews, trust, clock=time.monotonic),
            {"/apis": answer},
            certificate=ServingCertificate.self_signed(datetime.now(UTC)),
            name="visibility",
        ).start()
    except OSError as err:
        raise SetupError(
            f"cannot serve the visibility API on {address}: {err.strerror or err}"
        ) from None
    threading.Thread(
        target=server.keep_current, args=(stop,), daemon=True, name="visibility-trust"
    ).start()
    print(f"visibility API over https on port {server.port}", file=sys.stderr, flush=True)
    return server


def _mount_dashboard(server: SecureServer, dashboard: Dashboard) -> None:
    """The page (no data in it) to anyone; its data to whom may get /dashboard/api/state."""
    page = PAGE.read_bytes()

    def show_page(_: Request) -> Response:
        return Response(200, page, "text/html; charset=utf-8")

    def to_page(_: Request) -> Response:  # the page's relative URLs need the slash
        return Response(308, b"", "text/plain", (("Location", "/dashboard/"),))

    def state(_: Request) -> Response:
        return Response(200, dashboard.state_json())

    server.mount("/dashboard/", show_page, public=True)
    server.mount("/dashboard", to_page, public=True)
    server.mount("/dashboard/api/state", state)


def _serve_extender(
    args: argparse.Namespace, placement: Placement, cache: Cache, metrics: Metrics
) -> ThreadingHTTPServer:
    """The scheduler extender, answering from this replica's caches (leader or not)."""
    needed = (NODES, PODS, WORKLOADS)

    def synced() -> bool:
        return all(cache.store.synced(r).is_set() for r in needed)

    def observe(path: str, code: int, seconds: float) -> None:
        metrics.extender_duration.labels(path.rsplit("/", 1)[-1], str(code)).observe(seconds)

    try:
        server = serve_extender(
            SchedulerExtender(placement, synced),
            args.scheduler_extender_address,
            cert_file=args.scheduler_extender_tls_cert_file,
            key_file=args.scheduler_extender_tls_private_key_file,
            on_request=observe,
        )
    except (OSError, ssl.SSLError) as err:
        raise SetupError(
            f"cannot serve the scheduler extender on {args.scheduler_extender_address}: "
            f"{getattr(err, 'strerror', None) or err}"
        ) from None
    scheme = "https" if args.scheduler_extender_tls_cert_file else "http"
    port = server.server_address[1]
    print(f"scheduler extender on {scheme} port {port}, /scheduler", file=sys.stderr, flush=True)
    return server


def _count_errors(metrics: Metrics) -> Callable[[str, str], None]:
    def observe(verb: str, code: str) -> None:
        metrics.api_errors.labels(verb, code).inc()

    return observe


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m extender run")
    add_arguments(parser)
    return run(parser.parse_args(argv))

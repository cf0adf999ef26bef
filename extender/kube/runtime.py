"""`python -m extender run`: the one place that builds the real client, clock and servers."""

from __future__ import annotations

import argparse
import json
import logging
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

from extender.core.admission.failure_recovery import GATE as FAILURE_RECOVERY
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
from extender.kube.controller.recovery.pod_termination import PodTermination
from extender.kube.flags import add_arguments, check_arguments, no_placement
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
    metrics = Metrics(
        config=args.metrics_config, replica_role=role, custom_labels=args.custom_labels
    )
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
        None if no_placement(args) else Placement(checked_resources(args.physical_resources))
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
    if args.feature_gates.get(FAILURE_RECOVERY, False):  # pods stuck on a lost node let go
        PodTermination(base, stop=stop, recorder=recorder).start()
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
        annotations_to_copy=args.annotations_to_copy,
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

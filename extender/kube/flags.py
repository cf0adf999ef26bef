"""The controller's command line: the flags of `python -m extender run`, their types and checks."""

from __future__ import annotations

import argparse
import math
import os

from extender.core.jobframework import registry
from extender.kube.api.kueue_lease import KUEUE_LEASE, parse_lease


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
    if args.scheduler_extender_address and no_placement(args):
        return "--scheduler-extender-address needs physical fit: drop --physical-resources=none"
    return None


def _kueue_lease(value: str) -> str:
    try:
        parse_lease(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return value


def no_placement(args: argparse.Namespace) -> bool:
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

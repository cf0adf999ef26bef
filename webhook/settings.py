"""The webhook's settings, from flags or environment variables (the Deployment sets the latter)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from extender.core.jobframework import registry, webhooks

DEFAULT_CONTROLLER = "system:serviceaccount:tower-system:tower-controller"
DEFAULT_MAX_BODY = 3 * 1024 * 1024  # kube-apiserver's own request body limit


@dataclass(frozen=True)
class Settings:
    """Everything the webhook decides with, besides the request itself."""

    controller_usernames: frozenset[str] = frozenset({DEFAULT_CONTROLLER})
    # Namespaces whose Jobs without a queue-name label go to their LocalQueue `default`
    # (Kueue's manageJobsWithoutQueueName); "*" means every namespace but the excluded ones.
    manage_jobs_without_queue_name: frozenset[str] = frozenset()
    unmanaged_namespaces: frozenset[str] = frozenset({"kube-system", "tower-system"})
    max_body_bytes: int = DEFAULT_MAX_BODY
    port: int = 9443
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    workers: int = 4
    threads: int = 4
    bind_address: str = "0.0.0.0"
    # The kinds of job to queue, by Kueue's integration names (None: Kueue's default set).
    integrations: tuple[str, ...] | None = None
    # Where the webhook reads LocalQueues, ClusterQueues and AdmissionChecks to hand jobs
    # of MultiKueue queues to MultiKueue (spec.managedBy): a kubeconfig, "in-cluster" for
    # its ServiceAccount, or "" to read nothing (webhook/routes.py).
    kubeconfig: str = ""
    # Kueue's feature gates as resolved from --config and --feature-gates (empty: defaults).
    feature_gates: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.integrations is not None:
            webhooks.integrations(",".join(self.integrations))  # ValueError names the unknown

    def manages(self, framework: str) -> bool:
        """Whether jobs of this integration are queued (its adapter among the enabled)."""
        return any(a.framework == framework for a in registry.enabled(self.integrations))

    def manages_unlabelled(self, namespace: str) -> bool:
        """Whether a Job without a queue-name label in this namespace is queued anyway."""
        if namespace in self.unmanaged_namespaces:
            return False
        return "*" in self.manage_jobs_without_queue_name or (
            namespace in self.manage_jobs_without_queue_name
        )


def _positive_int(flag: str, most: int | None = None) -> Callable[[str], int]:
    """An argparse type; argparse also applies it to string defaults read from the environment."""
    variable = f"TOWER_WEBHOOK_{flag.upper().replace('-', '_')}"

    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a whole number (from --{flag} or {variable})"
            ) from None
        if value <= 0:
            raise argparse.ArgumentTypeError(
                f"must be positive, got {value} (--{flag} or {variable})"
            )
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(
                f"must be at most {most}, got {value} (--{flag} or {variable})"
            )
        return value

    return convert


def _integrations(value: str) -> tuple[str, ...]:
    """--integrations: Kueue's names, comma-separated; a name no one knows is refused."""
    try:
        return webhooks.integrations(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err} (--integrations or TOWER_INTEGRATIONS)") from None


def _csv(value: str) -> frozenset[str]:
    return frozenset(v.strip() for v in value.split(",") if v.strip())


def parser() -> argparse.ArgumentParser:
    """The command line of `python -m webhook`; every flag also reads TOWER_WEBHOOK_<FLAG>,
    but --integrations reads TOWER_INTEGRATIONS, the controller's, so both manage the same."""
    env = os.environ.get

    def default(name: str, fallback: str) -> str:
        return env(f"TOWER_WEBHOOK_{name.upper().replace('-', '_')}", fallback)

    p = argparse.ArgumentParser(
        prog="python -m webhook",
        description="Tower's admission webhook: queues jobs of every kind it integrates "
        "(suspend + queue metadata), validates Kueue objects, converts v1beta1/v1beta2. "
        "Serves HTTPS with gunicorn. Each flag can also be set by the environment variable "
        "in brackets.",
    )
    p.add_argument(
        "--port",
        type=_positive_int("port", most=65535),
        default=default("port", "9443"),
        help="HTTPS port [TOWER_WEBHOOK_PORT] (default 9443, as Kueue's)",
    )
    p.add_argument(
        "--bind-address",
        default=default("bind-address", "0.0.0.0"),
        help="address to listen on [TOWER_WEBHOOK_BIND_ADDRESS]",
    )
    p.add_argument(
        "--tls-cert-file",
        default=default("tls-cert-file", ""),
        help="PEM serving certificate (chain); re-read when it changes "
        "[TOWER_WEBHOOK_TLS_CERT_FILE]",
    )
    p.add_argument(
        "--tls-private-key-file",
        default=default("tls-private-key-file", ""),
        help="PEM private key of the certificate [TOWER_WEBHOOK_TLS_PRIVATE_KEY_FILE]",
    )
    p.add_argument(
        "--workers",
        type=_positive_int("workers"),
        default=default("workers", "4"),
        help="gunicorn worker processes [TOWER_WEBHOOK_WORKERS] (default 4)",
    )
    p.add_argument(
        "--threads",
        type=_positive_int("threads"),
        default=default("threads", "4"),
        help="threads per worker [TOWER_WEBHOOK_THREADS] (default 4)",
    )
    p.add_argument(
        "--controller-username",
        action="append",
        default=None,
        help="user allowed to unsuspend queued Jobs (Tower's controller service "
        "account); repeatable [TOWER_WEBHOOK_CONTROLLER_USERNAME, comma-separated] "
        f"(default {DEFAULT_CONTROLLER})",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        default=env("TOWER_CONFIG"),
        help="Kueue's Configuration file, the controller's --config: its "
        "integrations.frameworks and manageJobsWithoutQueueName are acted on here (the "
        "namespaces come from its managedJobsNamespaceSelector, which `python -m certs "
        "bootstrap --config` writes into the webhooks' namespaceSelector); a flag given "
        "overrides the file [TOWER_CONFIG]",
    )
    p.add_argument(
        "--feature-gates",
        metavar="Name=true,Other=false",
        default=env("TOWER_FEATURE_GATES"),
        help="Kueue's feature gates, the controller's --feature-gates: checked with the "
        "--config file's featureGates as the controller checks them, so both refuse the "
        "same start [TOWER_FEATURE_GATES]",
    )
    p.add_argument(
        "--manage-jobs-without-queue-name",
        default=env("TOWER_WEBHOOK_MANAGE_JOBS_WITHOUT_QUEUE_NAME"),
        help="comma-separated namespaces (or *) whose unlabelled Jobs go to LocalQueue "
        "'default' [TOWER_WEBHOOK_MANAGE_JOBS_WITHOUT_QUEUE_NAME] (default: * when the "
        "--config file says manageJobsWithoutQueueName: true, else none)",
    )
    p.add_argument(
        "--unmanaged-namespaces",
        default=default("unmanaged-namespaces", "kube-system,tower-system"),
        help="namespaces never defaulted [TOWER_WEBHOOK_UNMANAGED_NAMESPACES]",
    )
    p.add_argument(
        "--max-body-bytes",
        type=_positive_int("max-body-bytes"),
        default=default("max-body-bytes", str(DEFAULT_MAX_BODY)),
        help="largest request body accepted [TOWER_WEBHOOK_MAX_BODY_BYTES] (3 MiB)",
    )
    p.add_argument(
        "--integrations",
        type=_integrations,
        default=env("TOWER_INTEGRATIONS"),
        help="comma-separated kinds of job to queue, by Kueue's integration names "
        "(batch/job, jobset.x-k8s.io/jobset, ...), as the controller's --integrations; "
        "default: Kueue's default set, of which Tower manages "
        + ", ".join(a.framework for a in registry.enabled())
        + " [TOWER_INTEGRATIONS]",
    )
    p.add_argument(
        "--kubeconfig",
        default=default("kubeconfig", ""),
        help="kubeconfig to read LocalQueues, ClusterQueues and AdmissionChecks with, so a "
        "Job or JobSet queued to a ClusterQueue with a MultiKueue check is handed to "
        "MultiKueue (spec.managedBy, as Kueue's webhook does); 'in-cluster' uses the "
        "webhook's ServiceAccount; empty reads nothing [TOWER_WEBHOOK_KUBECONFIG]",
    )
    return p


def from_args(argv: Sequence[str] | None = None) -> Settings:
    """Settings from the command line and environment, then the --config file; a file
    Tower cannot use exits 2 with one line naming the field."""
    p = parser()
    args = p.parse_args(argv)
    controllers = args.controller_username or sorted(
        _csv(os.environ.get("TOWER_WEBHOOK_CONTROLLER_USERNAME", DEFAULT_CONTROLLER))
    )
    integrations, unlabelled = args.integrations, args.manage_jobs_without_queue_name
    from extender.kube.config_file import ConfigFileError, feature_gates, load

    file_gates: dict[str, bool] = {}
    if args.config:
        try:
            config = load(args.config)
        except ConfigFileError as err:
            p.exit(2, f"error: {err}\n")
        file_gates = dict(config.feature_gates)
        if integrations is None:
            integrations = config.integrations
        if unlabelled is None:
            # The namespaces are the API server's to pick: the hooks' namespaceSelector is
            # the file's managedJobsNamespaceSelector (python -m certs bootstrap --config).
            unlabelled = "*" if config.manage_jobs_without_queue_name else ""
    try:
        gates = feature_gates(file_gates, args.feature_gates)
    except ConfigFileError as err:
        p.exit(2, f"error: {err}\n")
    return Settings(
        controller_usernames=frozenset(controllers),
        manage_jobs_without_queue_name=_csv(unlabelled or ""),
        unmanaged_namespaces=_csv(args.unmanaged_namespaces),
        max_body_bytes=args.max_body_bytes,
        port=args.port,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        workers=args.workers,
        threads=args.threads,
        bind_address=args.bind_address,
        integrations=integrations,
        kubeconfig=args.kubeconfig,
        feature_gates=gates,
    )

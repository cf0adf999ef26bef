"""Command line of certs: `generate` certificates, `install` webhook configurations."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m certs", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    gen = commands.add_parser("generate", help="write ca.crt, tls.crt and tls.key (and ca.key)")
    gen.add_argument("--out", required=True, help="directory to write into")
    gen.add_argument("--dns-name", action="append", default=[], help="SAN DNS name (repeatable)")
    gen.add_argument("--ip-address", action="append", default=[], help="SAN IP (repeatable)")
    gen.add_argument(
        "--reuse-ca",
        action="store_true",
        help="sign with the ca.crt/ca.key already in --out (rotation)",
    )
    inst = commands.add_parser(
        "install", help="register the webhook configurations for a webhook outside the cluster"
    )
    inst.add_argument("--kubeconfig", required=True)
    inst.add_argument("--url", required=True, help="base URL, e.g. https://127.0.0.1:9443")
    inst.add_argument(
        "--certs-dir", default="certs-out", help="where `generate` wrote ca.crt (default certs-out)"
    )
    _integrations_flag(inst)
    _config_flag(inst)
    boot = commands.add_parser(
        "bootstrap",
        help="in the cluster: keep the webhook's Secret current and inject its caBundle",
        description="Makes sure the Secret holds a serving certificate for the webhook's "
        "Service that is not within 30 days of its end (renewing it under the same CA), then "
        "puts the CA into both webhook configurations and the CRDs' conversion webhooks. "
        "Idempotent; deploy/ runs it as an init container of the controller and daily.",
    )
    boot.add_argument("--kubeconfig", help="(default: in-cluster configuration)")
    boot.add_argument("--namespace", default="tower-system")
    boot.add_argument("--service", default="tower-webhook")
    boot.add_argument("--secret", default="tower-webhook-tls")
    _config_flag(boot)
    boot.add_argument(
        "--no-certificate",
        action="store_true",
        help="leave the certificate and caBundle alone (cert-manager keeps them); with "
        "--config, only set the webhooks' hooks and namespaceSelector",
    )
    gone = commands.add_parser(
        "uninstall",
        help="after Tower is removed: CRDs convert no more, the Secret and Lease go",
        description="Sets the conversion of every CRD that converts through Tower's Service "
        "back to None (the objects kept with the CRDs stay readable at every version), and "
        "deletes the webhook's Secret and the controller's Lease. Idempotent; the Helm chart "
        "runs it as its post-delete hook.",
    )
    gone.add_argument("--kubeconfig", help="(default: in-cluster configuration)")
    gone.add_argument("--namespace", default="tower-system")
    gone.add_argument("--service", default="tower-webhook")
    gone.add_argument("--secret", default="tower-webhook-tls")
    gone.add_argument("--lease", default="tower-controller")
    manifests = commands.add_parser(
        "manifests", help="write the webhook configurations for the in-cluster Service"
    )
    manifests.add_argument("--out", required=True, help="the YAML file to write")
    manifests.add_argument(
        "--helm",
        action="store_true",
        help="write the Helm chart's template instead (templates/webhooks.yaml)",
    )
    _integrations_flag(manifests)
    _config_flag(manifests)
    return parser


def _config_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="Kueue's Configuration, the controller's --config: its integrations.frameworks "
        "pick the kinds hooked (--integrations overrides), its managedJobsNamespaceSelector "
        "the namespaces, and its manageJobsWithoutQueueName whether unlabelled jobs there "
        "are queued (else only in namespaces labelled "
        "tower.dev/manage-jobs-without-queue-name=true)",
    )


def _config(path: str | None, namespace: str = "tower-system") -> Any:
    """The --config file's Configuration (None without one); ValueError: one line."""
    if path is None:
        return None
    from extender.kube.config_file import ConfigFileError, load

    try:
        return load(path, namespace)
    except ConfigFileError as err:
        raise ValueError(str(err)) from None


def _integrations_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--integrations",
        default=None,
        help="comma-separated kinds of job whose webhooks to configure, by Kueue's "
        "integration names, as the webhook's and the controller's --integrations "
        "(default: Kueue's default set)",
    )


def _integrations(value: str | None) -> tuple[str, ...] | None:
    """--integrations as names; a ValueError (one line) names the ones no one knows."""
    if value is None:
        return None
    from extender.core.jobframework.webhooks import integrations

    try:
        return integrations(value)
    except ValueError as err:
        raise ValueError(f"--integrations {err}") from None


def _scope(args: argparse.Namespace) -> tuple[tuple[str, ...] | None, Any]:
    """The integrations (the flag, else the file's) and the namespaces' scope (the file's)."""
    from certs.kube import Scope

    config = _config(args.config)
    integrations = _integrations(args.integrations)
    if config is None:
        return integrations, None
    return integrations or config.integrations, Scope.of(config)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; exit status 2 with one line on bad input."""
    args = _parser().parse_args(argv)
    from certs import pki

    try:
        if args.command == "generate":
            out = Path(args.out)
            ca_cert = ca_key = None
            if args.reuse_ca:
                ca_cert, ca_key = (out / "ca.crt").read_bytes(), (out / "ca.key").read_bytes()
            bundle = pki.generate(
                args.dns_name,
                args.ip_address,
                now=datetime.now(UTC),
                ca_cert=ca_cert,
                ca_key=ca_key,
            )
            for name, path in pki.write(bundle, out).items():
                print(f"wrote {path}" if name != "ca.key" else f"wrote {path} (keep it secret)")
            return 0
        from certs import kube
        from extender.kube.api.client import load_api_client

        if args.command == "manifests":
            integrations, scope = _scope(args)
            text = kube.manifests(integrations, helm=args.helm, scope=scope)
            Path(args.out).write_text(text)
            print(f"wrote {args.out}")
            return 0
        if args.command == "uninstall":
            api_client = load_api_client(args.kubeconfig)
            for line in kube.uninstall(
                api_client,
                namespace=args.namespace,
                service=args.service,
                secret=args.secret,
                lease=args.lease,
            ):
                print(line)
            return 0
        if args.command == "bootstrap":
            api_client = load_api_client(args.kubeconfig)
            for line in kube.bootstrap(
                api_client,
                namespace=args.namespace,
                service=args.service,
                secret=args.secret,
                now=datetime.now(UTC),
                config=_config(args.config, args.namespace),
                certificate=not args.no_certificate,
            ):
                print(line)
            return 0

        integrations, scope = _scope(args)
        ca_path = Path(args.certs_dir) / "ca.crt"
        if not ca_path.is_file():
            raise ValueError(
                f"--certs-dir {args.certs_dir}: no ca.crt (write it with python -m certs generate)"
            )
        ca = ca_path.read_bytes()
        api_client = load_api_client(args.kubeconfig)  # a ConfigError is a ValueError
        for name in kube.install(api_client, args.url, ca, integrations, scope):
            print(f"configured {name} -> {args.url}")
        return 0
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except Exception as err:  # the API server's answer, in one line
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return 1


def _one_line(err: Exception) -> str:
    """What failed, in one line: the API server's own message when it sent a Status."""
    body = getattr(err, "body", None)
    if body:
        import json

        try:
            status = json.loads(body)
        except (TypeError, ValueError):
            status = None
        if isinstance(status, dict) and status.get("message"):
            return f"{status.get('code', '')} {status.get('reason', '')}: {status['message']}"
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text}"


if __name__ == "__main__":
    sys.exit(main())

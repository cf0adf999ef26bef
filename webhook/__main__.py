"""`python -m webhook`: serve the admission webhook over TLS with gunicorn."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from webhook.settings import Settings, from_args
from webhook.tls import server_context

CONFIG = Path(__file__).with_name("gunicorn.conf.py")


def _check_files(settings: Settings) -> str | None:
    for flag, path in (
        ("--tls-cert-file", settings.tls_cert_file),
        ("--tls-private-key-file", settings.tls_private_key_file),
    ):
        if not path:
            return f"{flag} is required (or TOWER_WEBHOOK_{flag[2:].upper().replace('-', '_')})"
        if not os.path.isfile(path):
            return f"{flag} {path}: no such file"
    try:
        # Workers build their TLS context only when a connection comes; a pair that cannot
        # load would start a server that fails every call.
        server_context(settings.tls_cert_file, settings.tls_private_key_file)
    except (OSError, ssl.SSLError) as err:
        return (
            f"--tls-cert-file {settings.tls_cert_file} and --tls-private-key-file "
            f"{settings.tls_private_key_file} are not a PEM certificate and its key: "
            f"{' '.join(str(err).split())}"
        )
    return None


def _check_address(settings: Settings) -> str | None:
    """Whether the address is free, asked before gunicorn starts.

    Workers bind their own sockets (reuse_port in gunicorn.conf.py); when the address is
    taken, each one fails and gunicorn starts another, forever. One plain bind tells first.
    """
    where = f"{settings.bind_address}:{settings.port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            settings.bind_address, settings.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
        with socket.socket(family, kind, proto) as probe:
            # As gunicorn binds: connections of an earlier run in TIME_WAIT do not count.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as err:
        return f"cannot listen on {where}: {err.strerror or err}"
    return None


def _check_metrics_dir() -> str | None:
    """Make the metrics directory named by the environment, if it is missing."""
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not path:
        return None  # main() makes its own
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        return f"PROMETHEUS_MULTIPROC_DIR {path}: {err.strerror or err}"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Parse settings, export them for gunicorn.conf.py and run gunicorn."""
    settings = from_args(argv)
    problem = _check_files(settings) or _check_address(settings) or _check_metrics_dir()
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    os.environ.update(
        {
            "TOWER_WEBHOOK_PORT": str(settings.port),
            "TOWER_WEBHOOK_BIND_ADDRESS": settings.bind_address,
            "TOWER_WEBHOOK_WORKERS": str(settings.workers),
            "TOWER_WEBHOOK_THREADS": str(settings.threads),
            "TOWER_WEBHOOK_TLS_CERT_FILE": settings.tls_cert_file,
            "TOWER_WEBHOOK_TLS_PRIVATE_KEY_FILE": settings.tls_private_key_file,
        }
    )
    # Workers share metrics through files; the directory must exist before they import
    # prometheus_client.
    own_metrics_dir = None
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        own_metrics_dir = tempfile.mkdtemp(prefix="tower-webhook-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = own_metrics_dir

    from gunicorn.app.base import Application

    from webhook.app import create_app

    class WebhookServer(Application):  # type: ignore[misc]
        def load_config(self) -> None:
            # Only our config file: gunicorn must not parse the webhook's own flags.
            self.load_config_from_file(str(CONFIG))

        def load(self) -> object:
            return create_app(settings)

    master = os.getpid()
    try:
        WebhookServer().run()
    finally:
        # Forked workers run this too when they exit; only the master removes the directory.
        if own_metrics_dir is not None and os.getpid() == master:
            shutil.rmtree(own_metrics_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

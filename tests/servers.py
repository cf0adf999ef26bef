"""Real servers for tests: certificates from `python -m certs`, the webhook under gunicorn."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from http.client import HTTPSConnection
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def generate(out: Path, *extra: str) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "certs",
            "generate",
            "--out",
            str(out),
            "--dns-name",
            "localhost",
            "--ip-address",
            "127.0.0.1",
            *extra,
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )


class Server:
    def __init__(self, certs: Path, port: int) -> None:
        self.certs, self.port = certs, port
        self.context = ssl.create_default_context(cafile=str(certs / "ca.crt"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def connect(self) -> HTTPSConnection:
        return HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=10)

    def post(self, path, body, content_type="application/json", conn=None):
        own = conn is None
        conn = conn or self.connect()
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": content_type})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            if own:
                conn.close()


def start_webhook(certs: Path, metrics_dir: Path, *extra: str, workers: int = 2) -> Server:
    """`python -m webhook` over TLS; returns once /readyz answers 200."""
    port = free_port()
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook",
            "--port",
            str(port),
            "--bind-address",
            "127.0.0.1",
            "--tls-cert-file",
            str(certs / "tls.crt"),
            "--tls-private-key-file",
            str(certs / "tls.key"),
            "--workers",
            str(workers),
            "--threads",
            "4",
            *extra,
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    server = Server(certs, port)
    deadline = time.monotonic() + 20
    while True:
        try:
            conn = server.connect()
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(proc.stdout.read().decode()) from None
            time.sleep(0.1)
    server.proc = proc
    return server

"""The controller's /metrics read as Prometheus reads Kueue's: HTTPS and credentials the API
server knows (a bearer token, or a kubeconfig's token or client certificate)."""

from __future__ import annotations

import base64
import http.client
import re
import ssl
import tempfile
from pathlib import Path
from typing import Any

import yaml

METRICS_LINE = re.compile(r"metrics over https \(.*\) on port (\d+)")


def metrics_port(proc: Any) -> int:
    """The port the controller says it serves /metrics on (reads its output up to there)."""
    while True:
        line = proc.stdout.readline().decode()
        if not line:
            raise AssertionError("the controller ended before it served /metrics")
        found = METRICS_LINE.search(line)
        if found:
            return int(found.group(1))


def _context(kubeconfig: str | None) -> tuple[ssl.SSLContext, str | None]:
    """A client context (the controller's self-signed certificate not verified, as Kueue's
    ServiceMonitor does not) and the token, from the kubeconfig's first user if one is given."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if kubeconfig is None:
        return context, None
    user = yaml.safe_load(Path(kubeconfig).read_text())["users"][0]["user"]
    if "client-certificate-data" in user:
        folder = Path(tempfile.mkdtemp(prefix="tower-scrape-"))
        for key, name in (("client-certificate-data", "c.crt"), ("client-key-data", "c.key")):
            (folder / name).write_bytes(base64.b64decode(user[key]))
        context.load_cert_chain(folder / "c.crt", folder / "c.key")
    return context, user.get("token")


def get(
    port: int,
    path: str = "/metrics",
    token: str | None = "admin",
    host: str = "127.0.0.1",
    kubeconfig: str | None = None,
) -> tuple[int, str]:
    """(status, body) of an HTTPS GET with `Authorization: Bearer TOKEN` (or the
    kubeconfig's credentials)."""
    context, configured = _context(kubeconfig)
    token = configured if kubeconfig is not None else token
    conn = http.client.HTTPSConnection(host, port, context=context, timeout=10)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        conn.request("GET", path, headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def scrape(
    port: int, token: str = "admin", host: str = "127.0.0.1", kubeconfig: str | None = None
) -> str:
    """The metrics text; AssertionError naming the status when refused."""
    status, body = get(port, "/metrics", token, host, kubeconfig)
    assert status == 200, f"GET /metrics: {status} {body}"
    return body

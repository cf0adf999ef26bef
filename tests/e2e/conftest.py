"""The real-cluster suite: runs only against a cluster you name, skipped otherwise.

`TOWER_E2E_KUBECONFIG` names the cluster. Tests that run Tower as processes on this machine
(as `make dev-up` does) also need `TOWER_E2E_WEBHOOK_URL`: an https URL at which that
cluster's API server reaches this machine (`https://127.0.0.1:9443` for a control plane on
this machine; for kind, `https://<docker bridge IP>:9443`).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from kubernetes import client, config

from tests.e2e.kubelet import Kubelet, has_no_kubelets
from tests.waiting import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

KUBECONFIG = os.environ.get("TOWER_E2E_KUBECONFIG")
WEBHOOK_URL = os.environ.get("TOWER_E2E_WEBHOOK_URL")

REASON = (
    "no Kubernetes cluster here: set TOWER_E2E_KUBECONFIG to a cluster's kubeconfig (and "
    "TOWER_E2E_WEBHOOK_URL, see tests/e2e/conftest.py), then run `make e2e`"
)
NO_URL = (
    "TOWER_E2E_WEBHOOK_URL is not set: the URL at which the cluster's API server reaches a "
    "webhook on this machine (https://127.0.0.1:9443 for a control plane here)"
)


def pytest_collection_modifyitems(config, items):
    if KUBECONFIG:
        return
    for item in items:
        if "e2e" in item.keywords:
            item.add_marker(pytest.mark.skip(reason=REASON))


def kubectl(
    *args: str, input: str | None = None, check: bool = True, kubeconfig: str | None = None
) -> str:
    """kubectl against the cluster (or the one `kubeconfig` names: a MultiKueue worker)."""
    done = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig or KUBECONFIG or "", *args],
        capture_output=True,
        text=True,
        timeout=180,
        input=input,
    )
    if check:
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout + done.stderr


def wait(check: Callable[[], Any], timeout: float = 180.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def job_manifest(
    labels: dict[str, str],
    *,
    name: str | None = None,
    cpu: str = "3",
    memory: str = "4Gi",
    seconds: float = 30,
    suspend: bool | None = None,
) -> dict[str, Any]:
    """A batch/v1 Job as the seed writes it: one busybox container that sleeps."""
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "worker",
                        "image": "busybox:1.36",
                        "command": ["sh", "-c", f"sleep {seconds:g}"],
                        "resources": {"requests": {"cpu": cpu, "memory": memory}},
                    }
                ],
            }
        },
    }
    if suspend is not None:
        spec["suspend"] = suspend
    meta: dict[str, Any] = {"labels": labels}
    meta.update({"name": name} if name else {"generateName": "sample-job-"})
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def webhook_host_port() -> tuple[str, int]:
    if not WEBHOOK_URL:
        pytest.skip(NO_URL)
    parts = urlsplit(WEBHOOK_URL)
    return parts.hostname or "127.0.0.1", parts.port or 443


@pytest.fixture(scope="session")
def api_client() -> client.ApiClient:
    return config.new_client_from_config(config_file=KUBECONFIG)


@pytest.fixture(scope="session")
def kubelet_namespaces(api_client) -> Iterator[set[str]]:
    """Namespaces whose pods are run by the stand-in kubelet (only on a cluster without
    kubelets; elsewhere real kubelets run them and the set is ignored)."""
    namespaces: set[str] = set()
    kubelet = Kubelet(api_client, namespaces) if has_no_kubelets(api_client) else None
    yield namespaces
    if kubelet is not None:
        kubelet.stop()


def controller_process(*extra: str) -> subprocess.Popen[bytes]:
    """`python -m extender run` on this machine against the cluster: no lease, its health
    endpoint on a free port, and `extra` flags."""
    command = [
        sys.executable,
        "-m",
        "extender",
        "run",
        "--kubeconfig",
        KUBECONFIG,
        "--no-leader-elect",
        "--health-address",
        "127.0.0.1:0",
        *extra,
    ]
    return subprocess.Popen(command, cwd=ROOT, env=dict(os.environ))


def serve_webhook(
    tmp: Path, webhook_flags: Sequence[str] = (), install_flags: Sequence[str] = ()
) -> subprocess.Popen[bytes]:
    """`python -m webhook` on this machine at TOWER_E2E_WEBHOOK_URL with certificates made
    for its host, registered with `python -m certs install` once it listens (a create sent
    to it before would fail). The caller terminates it."""
    host, port = webhook_host_port()
    try:
        ipaddress.ip_address(host)
        flag = "--ip-address"
    except ValueError:
        flag = "--dns-name"
    python = [sys.executable, "-m"]
    subprocess.run([*python, "certs", "generate", "--out", str(tmp), flag, host], check=True)
    tls = ["--tls-cert-file", str(tmp / "tls.crt"), "--tls-private-key-file", str(tmp / "tls.key")]
    server = subprocess.Popen(
        [*python, "webhook", "--port", str(port), *tls, *webhook_flags], cwd=ROOT
    )
    wait_until(
        lambda: (server.poll(), listening(host, port)),
        lambda seen: seen[0] is not None or seen[1],
        what=f"the webhook to listen on {host}:{port}",
        timeout=60,
        interval=0.2,
    )
    assert server.poll() is None, f"the webhook exited with {server.returncode}"
    install = [*python, "certs", "install", "--kubeconfig", KUBECONFIG or "", "--url"]
    subprocess.run(
        [*install, WEBHOOK_URL or "", "--certs-dir", str(tmp), *install_flags],
        check=True,
        cwd=ROOT,
    )
    return server


def listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False

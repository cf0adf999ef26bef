"""What the port of multikueue/sequential/e2e_test.go needs beyond multikueue.py: a cut-able
path to a worker's API server, the ClusterProfile CRD and objects, and worker tokens."""

from __future__ import annotations

import base64
import contextlib
import socket
import threading
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.kueue.multikueue import TOWER_NS, Worker
from tests.e2e.kueue.util import Cluster, eventually, kubectl

ROOT = Path(__file__).resolve().parents[3]
PROFILE_CRD = (
    ROOT / "tests" / "data" / "cluster-inventory-api" / "multicluster.x-k8s.io_clusterprofiles.yaml"
)
PROFILES = "clusterprofiles.multicluster.x-k8s.io"
PLUGIN = ROOT / "tests" / "e2e" / "kueue" / "secretreader_plugin.py"


class Cut:
    """A TCP path to a worker's API server that the test can cut and mend on the same port:
    the manager's Tower reaches the worker through it, as Kueue's reaches a kind node whose
    kube-apiserver the case rebinds to loopback (unreachable from outside) and back."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self.accepted = 0  # connections made through it so far
        self.mend()

    def mend(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def cut(self) -> None:
        """Every connection dropped, and none accepted until mended."""
        with self._lock:
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            self._conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                near, _ = listener.accept()
            except OSError:
                return
            try:
                far = socket.create_connection(self.target, timeout=5)
            except OSError:
                near.close()
                continue
            far.settimeout(None)
            with self._lock:
                self._conns += [near, far]
                self.accepted += 1
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def worker_kubeconfig(worker: Worker) -> dict[str, Any]:
    """The worker's admin kubeconfig, flattened (what its Secret on the manager holds)."""
    flat = worker.kubectl("config", "view", "--raw", "--flatten", "--minify")
    return dict(yaml.safe_load(flat))


def through(worker: Worker, cut: Cut) -> str:
    """The worker's kubeconfig with its server behind `cut` (same CA and credentials: the
    API server's certificate names 127.0.0.1), as the Secret's data."""
    config = worker_kubeconfig(worker)
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{cut.port}"
    return yaml.safe_dump(config)


def set_secret_kubeconfig(name: str, kubeconfig: str) -> None:
    kubectl("delete", "secret", name, "-n", TOWER_NS, "--ignore-not-found")
    kubectl("create", "secret", "generic", name, "-n", TOWER_NS,
            f"--from-literal=kubeconfig={kubeconfig}")  # fmt: skip


def install_profile_crd(manager: Cluster) -> None:
    """The cluster-inventory API's ClusterProfile CRD, as Kueue's e2e installs it."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(PROFILE_CRD))
    kubectl("wait", "--for=condition=Established", f"crd/{PROFILES}", "--timeout=60s")
    del manager  # installed through kubectl on the manager's kubeconfig


def profile(name: str, manager_name: str) -> dict[str, Any]:
    """utiltestingapi.MakeClusterProfile(name, kueueNS).ClusterManager(manager_name)."""
    return {
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": TOWER_NS},
        "spec": {"displayName": name, "clusterManager": {"name": manager_name}},
    }


def worker_token(worker: Worker, hours: int = 2) -> str:
    """A bearer token of a cluster-admin ServiceAccount on the worker (Kueue's kind workers'
    kubeconfigs carry one; these use client certificates)."""
    sa = "multikueue-e2e"
    worker.kubectl("create", "serviceaccount", sa, "-n", TOWER_NS, check=False)
    worker.kubectl("create", "clusterrolebinding", f"{sa}-admin", "--clusterrole=cluster-admin",
                   f"--serviceaccount={TOWER_NS}:{sa}", check=False)  # fmt: skip
    return worker.kubectl("create", "token", sa, "-n", TOWER_NS, f"--duration={hours}h").strip()


def drop_worker_token(worker: Worker) -> None:
    worker.kubectl("delete", "clusterrolebinding", "multikueue-e2e-admin", "--ignore-not-found",
                   check=False)  # fmt: skip
    worker.kubectl("delete", "serviceaccount", "multikueue-e2e", "-n", TOWER_NS,
                   "--ignore-not-found", check=False)  # fmt: skip


def access_provider(worker: Worker, secret: str) -> dict[str, Any]:
    """The ClusterProfile status entry Kueue's case writes: the secretreader provider, the
    worker's server and CA, and the plugin's per-cluster config naming the token Secret."""
    cluster = worker_kubeconfig(worker)["clusters"][0]["cluster"]
    return {
        "name": "secretreader",
        "cluster": {
            "server": cluster["server"],
            "certificate-authority-data": cluster["certificate-authority-data"],
            "extensions": [{"name": "client.authentication.k8s.io/exec",
                            "extension": {"clusterName": secret}}],
        },
    }  # fmt: skip


def token_secret(name: str, token: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": TOWER_NS},
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }


def plugin_kubeconfig(manager_kubeconfig: str, out: Path) -> Path:
    """The manager's kubeconfig with Tower's namespace as its context's: the played plugin
    reads its Secrets there, as the real one reads its pod's namespace."""
    config = yaml.safe_load(Path(manager_kubeconfig).read_text())
    for context in config.get("contexts") or []:
        context["context"]["namespace"] = TOWER_NS
    out.write_text(yaml.safe_dump(config))
    return out


def active_condition(manager: Cluster, name: str) -> tuple[str, str, str]:
    found = next(
        (c for c in ((manager.get("multikueueclusters", name) or {}).get("status") or {})
         .get("conditions") or [] if c.get("type") == "Active"),
        {},
    )  # fmt: skip
    return (found.get("status", ""), found.get("reason", ""), found.get("message", ""))


def expect_active(manager: Cluster, name: str, want: tuple[str, str, str], timeout: float) -> None:
    def seen() -> bool:
        got = active_condition(manager, name)
        assert got == want, got
        return True

    eventually(seen, timeout, f"MultiKueueCluster {name} {want}")

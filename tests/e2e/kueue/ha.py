"""Two Tower controllers with leader election, as Kueue's HA cases scale its manager to two.

Each replica is a controller process on this machine (a pod of Kueue's Deployment there); the
Lease is the one they elect on, and ForceLeaderFailover stops the process that holds it (Kueue
deletes its pod) and starts a replacement, as the Deployment would."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from kubernetes import client

from tests.e2e.conftest import KUBECONFIG
from tests.e2e.kueue.util import (
    CONFIGURATION,
    LONG_TIMEOUT,
    ROOT,
    Tower,
    _listening,
    eventually,
    free_port,
)

LEASE_NAMESPACE = "tower-system"
LEASE_NAME = "tower-e2e-ha"


class Replicas:
    """The controller replicas, each known by the identity it holds the Lease with."""

    def __init__(self, tower: Tower, api_client: client.ApiClient) -> None:
        self.tower = tower
        self.coordination = client.CoordinationV1Api(api_client)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.config = tower.tmp / "ha-config.yaml"
        self.config.write_text(CONFIGURATION)

    def start(self) -> subprocess.Popen[bytes]:
        port = free_port("127.0.0.1")
        log = open(self.tower.tmp / f"ha-controller-{len(self.procs)}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "extender", "run", "--kubeconfig", KUBECONFIG or "",
             "--config", str(self.config), "--leader-elect",
             "--leader-election-namespace", LEASE_NAMESPACE,
             "--leader-election-id", LEASE_NAME, "--health-address", "127.0.0.1:0",
             "--status-interval", "0.5", "--metrics-address", f"127.0.0.1:{port}",
             "--visibility-address", "0"],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.procs.append(proc)
        eventually(lambda: _listening("127.0.0.1", port), 30, "a controller replica")
        return proc

    def holder(self) -> str:
        try:
            lease = self.coordination.read_namespaced_lease(LEASE_NAME, LEASE_NAMESPACE)
        except client.ApiException as err:
            if err.status == 404:
                return ""
            raise
        return str(lease.spec.holder_identity or "")

    def leader(self) -> subprocess.Popen[bytes]:
        """The replica that holds the Lease (its identity is host_pid)."""
        holder = eventually(self.holder, LONG_TIMEOUT, "a leader elected")
        pid = int(holder.rsplit("_", 1)[1])
        [proc] = [p for p in self.procs if p.pid == pid and p.poll() is None]
        return proc

    def force_failover(self) -> None:
        """util.ForceLeaderFailover: the leader stopped as its pod is deleted (SIGTERM), a new
        leader elected, and a replica started in its place."""
        old = self.holder()
        assert old, "expected a current leader to be elected"
        leader = self.leader()
        leader.send_signal(signal.SIGTERM)
        leader.wait(timeout=30)
        self.procs.remove(leader)
        eventually(lambda: self.holder() not in ("", old), LONG_TIMEOUT, "a new leader")
        self.start()

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.procs.clear()


def stop_suite_controller(tower: Tower) -> Path:
    """The suite's single controller stopped (scaled to the two replicas instead)."""
    controller = tower.procs.pop()
    controller.send_signal(signal.SIGTERM)
    try:
        controller.wait(timeout=20)
    except subprocess.TimeoutExpired:
        controller.kill()
    return tower.tmp

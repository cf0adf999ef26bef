"""Never two admitters: `python -m extender run` beside a live Kueue (its Lease renewed, as
controller-runtime renews it) admits nothing, says why in one line, on /readyz and in
`kubectl tower why`; once Kueue
lets its Lease go Tower takes over; when Kueue leads again Tower stops admitting."""

from __future__ import annotations

import signal
import threading
from datetime import UTC, datetime

import pytest

from extender.kube.api import resources as r
from tests.controller.conftest import controller_process, eventually
from tests.controller.test_kubectl_tower import tower
from tests.controller.test_runtime import get
from tests.controller.test_seed import CQ, FLAVOR, LQ

KUEUE_NS, KUEUE_LEASE = "kueue-system", "c1f6bfd2.kueue.x-k8s.io"
HOLDER = "kueue-controller-manager-6c5d8f7b9-q4w2x_5b0e9d3c"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class KueueManager:
    """Kueue's manager as the API server sees it: its Lease, renewed every 0.5 s (duration
    3 s) while it runs, released (holder cleared) when it stops cleanly."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.running = threading.Event()
        self.done = threading.Event()
        cluster.admin.create(r.NAMESPACES, {"metadata": {"name": KUEUE_NS}})
        self.thread = threading.Thread(target=self._renew, daemon=True)
        self.thread.start()

    def _write(self, holder: str | None) -> None:
        spec = {"holderIdentity": holder, "leaseDurationSeconds": 3, "renewTime": now()}
        lease = self.cluster.get("leases", KUEUE_LEASE, KUEUE_NS)
        if lease is None:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": KUEUE_LEASE, "namespace": KUEUE_NS}, "spec": spec}  # fmt: skip
            self.cluster.admin.create(r.LEASES, body, KUEUE_NS)
        else:
            lease["spec"] = spec
            self.cluster.admin.update(r.LEASES, lease)

    def _renew(self) -> None:
        while not self.done.wait(0.5):
            if self.running.is_set():
                self._write(HOLDER)

    def start(self) -> None:
        self._write(HOLDER)
        self.running.set()

    def stop(self) -> None:
        self.running.clear()
        self._write(None)  # controller-runtime's ReleaseOnCancel


@pytest.fixture
def kueue(cluster):
    manager = KueueManager(cluster)
    yield manager
    manager.done.set()


def suspended(cluster, name: str) -> bool:
    return cluster.get("jobs", name, "default")["spec"]["suspend"] is True


def test_tower_admits_nothing_while_kueue_leads_and_takes_over_when_it_stops(cluster, kueue):
    cluster.apply(FLAVOR, CQ, LQ)
    kueue.start()
    proc = controller_process(
        cluster, "--lease-duration", "3", "--renew-deadline", "2", "--retry-period", "0.5"
    )
    try:
        port = int(proc.stdout.readline().decode().split()[-1])
        first = cluster.job("first", "1", duration="600s")
        code, reason = eventually(
            lambda: (answer := get(port, "/readyz"))[1].find("Kueue's controller") >= 0 and answer,
            what="/readyz to say Kueue leads",
        )
        assert code == 503, reason
        assert f"holds its lease {KUEUE_NS}/{KUEUE_LEASE} (holder {HOLDER}" in reason, reason
        said = tower(cluster, "why", "first").stdout
        assert "State:       NoWorkload" in said, said
        assert f"Admitter:    Kueue's controller holds its lease {KUEUE_NS}/{KUEUE_LEASE}" in said
        for _ in range(20):  # 3 s, a whole lease duration of Tower's: nothing admitted
            assert suspended(cluster, "first")
            assert cluster.workload_of(first) is None or not (
                cluster.workload_of(first).get("status") or {}
            ).get("admission")
            threading.Event().wait(0.15)

        kueue.stop()
        eventually(lambda: not suspended(cluster, "first"), timeout=15, what="Tower to take over")
        eventually(lambda: get(port, "/readyz")[0] == 200, what="/readyz ok once leading")

        kueue.start()  # Kueue comes back: Tower stops admitting within a poll
        eventually(
            lambda: "Kueue's controller" in get(port, "/readyz")[1], what="Tower to stand down"
        )
        second = cluster.job("second", "1", duration="600s")
        for _ in range(20):
            assert suspended(cluster, "second")
            threading.Event().wait(0.15)
        assert cluster.workload_of(second) is None or not (
            cluster.workload_of(second).get("status") or {}
        ).get("admission")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    said = proc.stdout.read().decode()
    lines = [line for line in said.splitlines() if "Kueue's controller holds its lease" in line]
    assert len(lines) == 2, said  # once when Tower started, once when Kueue came back
    assert (
        "stop it first (kubectl -n kueue-system scale deployment kueue-controller-manager"
        in (lines[0])
    )
    assert f"Kueue's lease {KUEUE_NS}/{KUEUE_LEASE} is free: Tower may lead" in said


def test_without_leader_election_tower_still_yields_to_kueue(cluster, kueue):
    cluster.apply(FLAVOR, CQ, LQ)
    kueue.start()
    proc = controller_process(cluster, "--no-leader-elect", "--retry-period", "0.5")
    try:
        port = int(proc.stdout.readline().decode().split()[-1])
        cluster.job("first", "1", duration="600s")
        eventually(lambda: "Kueue's controller" in get(port, "/readyz")[1], what="/readyz")
        threading.Event().wait(2)
        assert suspended(cluster, "first")
        kueue.stop()
        eventually(lambda: not suspended(cluster, "first"), timeout=15, what="Tower to admit")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()

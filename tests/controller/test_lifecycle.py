"""Upgrades, as docs/operations.md describes them: the webhook rolled and the controller
replaced while Jobs are created, admitted, run and finish. (Uninstalling is run from the
docs themselves, in tests/test_docs.py.)

What a user would see is checked: every create succeeds and comes back suspended and queued;
every Job finishes; at every commit the ClusterQueue is within quota, no Workload is admitted
twice, and no Job runs without an admission.
"""

from __future__ import annotations

import signal
import threading
import time

from certs import kube as certs_kube
from extender.kube.api.client import KubeError
from tests.controller.conftest import controller_process, eventually
from tests.controller.test_faults import stop
from tests.controller.test_network_faults import Invariants, describe, finished
from tests.controller.test_preemption import cluster_queue, flavor, local_queue
from tests.servers import start_webhook
from tests.waiting import wait_until

LEASE = ["--lease-duration", "4", "--renew-deadline", "3", "--retry-period", "0.5"]


def queues(cluster):
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 4), local_queue("user-queue", "cq"))
    invariants = Invariants(cluster)
    cluster.api.hooks.append(invariants)
    return invariants


class Creator:
    """Creates Jobs one after another in a thread, as users keep doing during an upgrade."""

    def __init__(self, cluster, prefix: str, every: float = 0.05) -> None:
        self.cluster = cluster
        self.prefix = prefix
        self.every = every
        self.created: list[dict] = []
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.created.append(self.cluster.job(f"{self.prefix}-{i}", "1", duration="0.2s"))
            except KubeError as err:
                self.failed.append(f"{self.prefix}-{i}: {err}")
            i += 1
            time.sleep(self.every)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(10)


def lease_holder(cluster) -> str:
    lease = cluster.get("leases", "tower-controller", "tower-system") or {}
    return (lease.get("spec") or {}).get("holderIdentity") or ""


def every_job_finishes(cluster, jobs, proc, what: str) -> None:
    """Wait for every Job's Workload to finish; a timeout names the unfinished ones, says
    how each looks, and ends with the controller's log."""
    try:
        wait_until(
            lambda: [j["metadata"]["name"] for j in jobs if not finished(cluster, j)],
            lambda unfinished: not unfinished,
            timeout=60,
            what=what,
        )
    except AssertionError as err:
        raise AssertionError(f"{err}\n{describe(cluster, jobs)}\n{stop(proc)[-6000:]}") from None


def test_rolling_the_webhook_fails_no_create(cluster, webhook, tmp_path):
    """A Deployment rollout with `maxUnavailable: 0`: the new replica is ready and receives
    the traffic (here: the configurations point at it) before the old one gets SIGTERM."""
    invariants = queues(cluster)
    ca = (webhook.certs / "ca.crt").read_bytes()
    old = start_webhook(webhook.certs, tmp_path / "old-metrics", workers=1)
    new = None
    certs_kube.install(cluster.admin.api_client, old.url, ca)
    proc = controller_process(cluster, "--no-leader-elect")
    creator = Creator(cluster, "during-roll")
    try:
        eventually(lambda: len(creator.created) >= 15, timeout=20, what="Jobs before the roll")
        new = start_webhook(webhook.certs, tmp_path / "new-metrics", workers=1)
        certs_kube.install(cluster.admin.api_client, new.url, ca)
        time.sleep(0.3)  # what the Deployment's preStop sleep covers: endpoints catching up
        old.proc.send_signal(signal.SIGTERM)
        assert old.proc.wait(timeout=20) == 0
        count = len(creator.created)
        eventually(lambda: len(creator.created) >= count + 15, timeout=20, what="Jobs after")
        creator.finish()
        assert creator.failed == []
        for job in creator.created:  # each went through a webhook: created suspended
            assert job["spec"]["suspend"] is True, job["metadata"]["name"]
        every_job_finishes(cluster, creator.created, proc, "every Job to finish")
    finally:
        creator.finish()
        log = stop(proc)
        if new is not None:
            new.proc.send_signal(signal.SIGTERM)
            new.proc.wait(timeout=20)
        if old.proc.poll() is None:
            old.proc.kill()
    assert invariants.broken == [], invariants.broken
    assert "Traceback" not in log, log


def test_upgrading_the_controller_hands_over_without_admitting_twice(cluster):
    """Two replicas as the Deployment runs them; the leader gets SIGTERM (a rollout): it
    releases its lease, the standby takes over at once, and the Jobs go on."""
    invariants = queues(cluster)
    first = controller_process(cluster, *LEASE)
    eventually(lambda: lease_holder(cluster), timeout=20, what="a leader")
    second = controller_process(cluster, *LEASE)
    old_leader = lease_holder(cluster)
    creator = Creator(cluster, "during-upgrade", every=0.1)
    procs = [first, second]
    logs = []
    try:
        eventually(
            lambda: sum(1 for j in creator.created if finished(cluster, j)) >= 5,
            timeout=30,
            what="Jobs admitted and finished by the first leader",
        )
        leader = first if old_leader.endswith(f"_{first.pid}") else second
        assert old_leader.endswith(f"_{leader.pid}"), old_leader
        standby = second if leader is first else first
        leader.send_signal(signal.SIGTERM)
        assert leader.wait(timeout=20) == 0
        logs.append(leader.stdout.read().decode())
        # Released on SIGTERM, before the process ended: the standby need not wait out the
        # old leader's 4 s lease (it may have taken it already).
        assert lease_holder(cluster) != old_leader
        eventually(
            lambda: lease_holder(cluster) not in ("", old_leader),
            timeout=10,
            what="the standby to take the lease",
        )
        count = len(creator.created)
        eventually(lambda: len(creator.created) >= count + 10, timeout=20, what="Jobs after")
        creator.finish()
        assert creator.failed == []
        every_job_finishes(
            cluster, creator.created, standby, "every Job to finish under the new leader"
        )
        assert standby.poll() is None
    finally:
        creator.finish()
        for proc in procs:
            logs.append(stop(proc))
    assert invariants.broken == [], invariants.broken
    assert all("Traceback" not in log for log in logs), logs

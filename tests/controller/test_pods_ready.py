"""WaitForPodsReady through the API double: PodsReady written, timeouts evict, requeue, deactivate."""

from __future__ import annotations

import copy
import threading
import time

from extender.core.admission.pods_ready import RequeuingStrategy, WaitForPodsReady
from extender.kube.api.resources import WORKLOADS
from tests.controller.conftest import controller_process, eventually
from tests.controller.test_seed import CQ, FLAVOR, LQ


def wait_config(timeout=1.0, limit=None, block=False):
    return WaitForPodsReady(
        timeout=timeout,
        block_admission=block,
        recovery_timeout=timeout,
        requeuing=RequeuingStrategy("Eviction", limit, 1, 10),
    )


def condition(cluster, job, kind):
    wl = cluster.workload_of(job) or {}
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return None


def said(cluster, job, kind, status, reason):
    c = condition(cluster, job, kind)
    return c is not None and (c["status"], c["reason"]) == (status, reason) and c


def running(cluster, name):
    return cluster.get("jobs", name, "default")["spec"]["suspend"] is False


def set_ready(cluster, name, ready):
    def update(status):
        status["ready"] = ready

    assert cluster.api.update_status("jobs", "default", name, update) is not None


class History:
    """Every version of a Job and of its Workload that the double commits, in order: a state
    that lasts less than one poll of a loaded machine (a 1 s backoff) is still seen, and each
    is read whole, as it was."""

    def __init__(self, cluster, job_name: str) -> None:
        self.job_name = job_name
        self.versions: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        cluster.api.hooks.append(self)

    def __call__(self, event, kind, obj):
        name = obj["metadata"].get("name", "")
        mine = (kind.plural == "jobs" and name == self.job_name) or (
            kind.plural == "workloads" and name.startswith(f"job-{self.job_name}-")
        )
        if mine and event != "DELETED":
            with self.lock:
                self.versions.append((kind.plural, copy.deepcopy(obj)))

    def first(self, plural: str, test, after: int = -1) -> tuple[int, dict] | None:
        """The first version after index `after` for which `test` holds: (index, object)."""
        with self.lock:
            versions = list(enumerate(self.versions))
        for index, (kind, obj) in versions[after + 1 :]:
            if kind == plural and test(obj):
                return index, obj
        return None

    def said(self, kind: str, status: str, reason: str, after: int = -1):
        def test(wl):
            for c in (wl.get("status") or {}).get("conditions") or []:
                if c["type"] == kind:
                    return (c["status"], c["reason"]) == (status, reason)
            return False

        return self.first("workloads", test, after)

    def job(self, suspended: bool, after: int = -1):
        return self.first("jobs", lambda job: job["spec"].get("suspend") is suspended, after)


def conditions_of(wl, kind):
    return next(c for c in wl["status"]["conditions"] if c["type"] == kind)


def test_a_job_never_ready_is_evicted_requeued_with_backoff_then_deactivated(
    cluster, start_controller
):
    cluster.apply(FLAVOR, CQ, LQ)
    history = History(cluster, "never-ready")
    start_controller(wait_for_pods_ready=wait_config(timeout=1.0, limit=1))
    job = cluster.job("never-ready", "1")
    started, _ = eventually(lambda: history.job(suspended=False), what="the job to start")
    waiting = said(cluster, job, "PodsReady", "False", "WaitForStart")
    assert waiting, "PodsReady=False WaitForStart is written with the admission"
    assert waiting["message"] == "Not all pods are ready or succeeded"

    # Not ready within 1 s: evicted with Kueue's reason, stopped, requeued with a backoff.
    # Each of these states lasts about the 1 s backoff: the history keeps them.
    at, wl = eventually(
        lambda: history.said("Evicted", "True", "PodsReadyTimeout", after=started),
        what="the eviction",
    )
    wl_name = wl["metadata"]["name"]
    evicted = conditions_of(wl, "Evicted")
    assert evicted["message"] == f"Exceeded the PodsReady timeout default/{wl_name}"
    at, wl = eventually(
        lambda: history.said("Requeued", "False", "PodsReadyTimeout", after=at - 1),
        what="the requeue",
    )
    state = wl["status"]["requeueState"]
    assert state["count"] == 1
    assert state["requeueAt"]
    assert history.job(suspended=True, after=started), "the job was stopped"

    # The backoff over (1 s), it is admitted and started again.
    at, _ = eventually(
        lambda: history.said("Requeued", "True", "BackoffFinished", after=at),
        what="the backoff to finish",
    )
    eventually(lambda: history.job(suspended=False, after=at), what="the job to start again")

    # Not ready again: one more requeue would pass backoffLimitCount 1, so it is deactivated.
    deactivated = eventually(
        lambda: said(cluster, job, "Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded"),
        timeout=15,
        what="the deactivation",
    )
    assert deactivated["message"] == (
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries"
    )
    wl = cluster.workload_of(job)
    assert wl["spec"]["active"] is False
    assert "requeueState" not in wl["status"]
    assert condition(cluster, job, "DeactivationTarget") is None
    eventually(
        lambda: cluster.get("jobs", "never-ready", "default")["spec"]["suspend"] is True,
        what="the job to stop",
    )
    eventually(
        lambda: said(
            cluster, job, "QuotaReserved", "False", "DeactivatedDueToRequeuingLimitExceeded"
        ),
        what="its quota to be given back",
    )
    time.sleep(1.5)  # and it is not admitted again
    assert cluster.get("jobs", "never-ready", "default")["spec"]["suspend"] is True

    # Set active again by hand: Requeued=True Reactivated, and it runs again.
    cluster.admin.patch(WORKLOADS, wl_name, {"spec": {"active": True}}, "default")
    at, _ = eventually(
        lambda: history.said("Requeued", "True", "Reactivated"), what="the reactivation"
    )
    eventually(lambda: history.job(suspended=False, after=at), what="the job to start once more")


def test_a_job_that_gets_ready_is_never_evicted(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    controller = start_controller(wait_for_pods_ready=wait_config(timeout=4.0))
    job = cluster.job("gets-ready", "1")
    eventually(lambda: running(cluster, "gets-ready"), what="the job to start")
    set_ready(cluster, "gets-ready", 1)
    ready = eventually(
        lambda: said(cluster, job, "PodsReady", "True", "Started"), what="PodsReady=True"
    )
    assert ready["message"] == "All pods reached readiness and the workload is running"
    time.sleep(4.5)  # past the timeout
    assert condition(cluster, job, "Evicted") is None
    assert running(cluster, "gets-ready")
    registry = controller.controller.metrics.registry
    labels = {"cluster_queue": "cluster-queue", "replica_role": "standalone"}
    for name in ("kueue_admitted_until_ready_wait_time_seconds", "kueue_ready_wait_time_seconds"):
        assert registry.get_sample_value(f"{name}_count", {**labels, "priority_class": ""}) == 1.0

    # Deactivated while its pods are ready: the time from ready to evicted is observed.
    wl_name = cluster.workload_of(job)["metadata"]["name"]
    cluster.admin.patch(WORKLOADS, wl_name, {"spec": {"active": False}}, "default")
    eventually(lambda: said(cluster, job, "Evicted", "True", "Deactivated"), what="the eviction")
    evicted = {**labels, "reason": "Deactivated", "underlying_cause": ""}
    eventually(
        lambda: (
            registry.get_sample_value("kueue_pods_ready_to_evicted_time_seconds_count", evicted)
            == 1.0
        ),
        what="kueue_pods_ready_to_evicted_time_seconds",
    )


def test_a_job_that_loses_readiness_is_evicted_after_the_recovery_timeout(
    cluster, start_controller
):
    cluster.apply(FLAVOR, CQ, LQ)
    history = History(cluster, "flaky")
    start_controller(wait_for_pods_ready=wait_config(timeout=2.0))
    job = cluster.job("flaky", "1")
    eventually(lambda: running(cluster, "flaky"), what="the job to start")
    set_ready(cluster, "flaky", 1)
    eventually(lambda: said(cluster, job, "PodsReady", "True", "Started"), what="PodsReady=True")
    set_ready(cluster, "flaky", 0)
    lost = eventually(
        lambda: said(cluster, job, "PodsReady", "False", "WaitForRecovery"), what="the loss"
    )
    assert lost["message"] == "At least one pod has failed, waiting for recovery"
    # Evicted lasts until it is admitted again (a 1 s backoff): the history keeps it.
    eventually(lambda: history.said("Evicted", "True", "PodsReadyTimeout"), what="the eviction")


def test_without_wait_for_pods_ready_a_never_ready_job_keeps_running(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    job = cluster.job("unwatched", "1")
    eventually(lambda: running(cluster, "unwatched"), what="the job to start")
    time.sleep(1.5)
    assert condition(cluster, job, "PodsReady") is None
    assert condition(cluster, job, "Evicted") is None


def test_block_admission_admits_the_next_job_once_the_first_is_ready(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)  # 4 cpu: room for both
    start_controller(wait_for_pods_ready=wait_config(timeout=30.0, block=True))
    first = cluster.job("first", "1")
    eventually(lambda: running(cluster, "first"), what="the first job to start")
    second = cluster.job("second", "1")
    blocked = eventually(
        lambda: said(cluster, second, "QuotaReserved", "False", "WaitingForPodsReady"),
        what="the second to wait for the first's pods",
    )
    assert blocked["message"] == "waiting for all admitted workloads to be in PodsReady condition"
    assert cluster.get("jobs", "second", "default")["spec"]["suspend"] is True
    set_ready(cluster, "first", 1)
    eventually(lambda: said(cluster, first, "PodsReady", "True", "Started"), what="ready")
    eventually(lambda: running(cluster, "second"), what="the second job to start")


def test_the_configuration_file_turns_it_on(cluster, tmp_path):
    """`run --config` with Kueue's waitForPodsReady: the real process acts on it."""
    config = tmp_path / "config.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\n"
        "kind: Configuration\n"
        "waitForPodsReady: {timeout: 1s, requeuingStrategy: {backoffLimitCount: 0}}\n"
    )
    cluster.apply(FLAVOR, CQ, LQ)
    history = History(cluster, "from-file")
    proc = controller_process(cluster, "--no-leader-elect", "--config", str(config))
    try:
        job = cluster.job("from-file", "1")
        # Its run lasts the 1 s timeout, shorter than one poll of a loaded machine may take:
        # the history keeps it. The wait includes the child process's start.
        eventually(lambda: history.job(suspended=False), timeout=30, what="the job to start")
        # backoffLimitCount 0: the first timeout deactivates it.
        eventually(
            lambda: said(cluster, job, "Evicted", "True", "DeactivatedDueToRequeuingLimitExceeded"),
            timeout=15,
            what="the deactivation",
        )
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert "waitForPodsReady" not in proc.stdout.read().decode()  # acted on: not warned

"""Faults: a crash between writes, conflicts, an expired watch, the webhook down, failover."""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request

from certs.kube import MUTATING_NAME
from extender.kube.api.resources import JOBS, Resource
from tests.apidouble import Fault
from tests.controller.conftest import controller_process, eventually
from tests.controller.test_seed import CQ, FLAVOR, LQ
from tests.waiting import event_reasons, wait_until


def running(cluster, name):
    job = cluster.get("jobs", name, "default")
    return job is not None and job["spec"]["suspend"] is False


def admitted(workload):
    return bool(((workload or {}).get("status") or {}).get("admission"))


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except Exception:
            proc.kill()
    return proc.stdout.read().decode()


def test_killed_between_the_status_write_and_the_job_patch(cluster):
    cluster.apply(FLAVOR, CQ, LQ)
    admissions = []
    first = controller_process(cluster, "--no-leader-elect")

    def kill_after_admission(event, kind, obj):
        if kind.plural == "workloads" and admitted(obj):
            admissions.append(obj["metadata"]["name"])
            if first.poll() is None:
                os.kill(first.pid, signal.SIGKILL)  # before the controller hears back

    cluster.api.hooks.append(kill_after_admission)
    job = cluster.job("sample-job-", "3", duration="600s", generate=True)
    name = job["metadata"]["name"]
    eventually(lambda: first.poll() is not None, what="the controller to be killed")
    assert cluster.get("jobs", name, "default")["spec"]["suspend"] is True
    assert admitted(cluster.workload_of(job))

    second = controller_process(cluster, "--no-leader-elect")
    try:
        eventually(lambda: running(cluster, name), timeout=20, what="the restart to start the Job")
        other = cluster.job("other-", "3", duration="600s", generate=True)
        # The quota held across the crash: the second 3-cpu Job is not admitted. Its pending
        # reason says the controller has looked at it (a fixed pause may end before it did).
        wait_until(
            lambda: cluster.workload_of(other),
            lambda wl: _quota_reserved(wl).get("status") == "False",
            what="the second Workload's pending reason",
        )
        assert not admitted(cluster.workload_of(other))
        assert cluster.get("jobs", other["metadata"]["name"], "default")["spec"]["suspend"]
        assert set(admissions) == {cluster.workload_of(job)["metadata"]["name"]}
    finally:
        log = stop(second)
        stop(first)
    assert "Traceback" not in log, log


def test_a_conflict_on_every_first_write(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    for method, plural, sub in (
        ("POST", "workloads", ""),
        ("PATCH", "workloads", "status"),
        ("PATCH", "jobs", ""),
    ):
        cluster.api.faults.append(Fault(method, plural, sub, first_attempt_only=True))
    start_controller()
    job1 = cluster.job("first", "3", duration="1s")
    eventually(lambda: running(cluster, "first"), what="the first job to start")
    job2 = cluster.job("second", "3", duration="0.5s")
    eventually(lambda: running(cluster, "second"), timeout=15, what="the second job to start")
    for job in (job1, job2):
        eventually(lambda job=job: _finished(cluster.workload_of(job)), what="finished")
    refused = {(method, what.split("/")[0], sub) for method, what, sub in cluster.api._faulted}
    assert refused == {
        ("POST", "workloads.kueue.x-k8s.io", ""),
        ("PATCH", "workloads.kueue.x-k8s.io", "status"),
        ("PATCH", "jobs.batch", ""),
    }


def test_a_watch_that_ends_with_410(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    running_controller = start_controller()
    cluster.job("first", "3", duration="2s")
    eventually(lambda: running(cluster, "first"), what="the first job to start")
    cluster.job("second", "3", duration="0.3s")
    by_plural = {i.resource.plural: i for i in running_controller.cache.informers}
    before = {p: by_plural[p].relists for p in ("workloads", "jobs")}
    cluster.api.expire_watches("workloads")
    cluster.api.expire_watches("jobs")
    eventually(
        lambda: all(by_plural[p].relists > before[p] for p in before),
        what="both watches to re-list after 410",
    )
    eventually(lambda: running(cluster, "second"), timeout=15, what="the second job to start")


def test_the_webhook_down_the_backstop_suspends(cluster, start_controller):
    mutating = cluster.api.get("mutatingwebhookconfigurations", MUTATING_NAME)
    for hook in mutating["webhooks"]:
        hook["failurePolicy"] = "Ignore"
        hook["clientConfig"]["url"] = "https://127.0.0.1:9/mutate-batch-v1-job"
    cluster.admin.update(_MUTATING, mutating)
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    job = cluster.job("escaped", "3", duration="1s")
    assert job["spec"]["suspend"] is False  # the webhook never saw it
    eventually(lambda: _finished(cluster.workload_of(job)), timeout=15, what="the job to finish")
    # Sent by the recorder's own thread: not ordered with the Workload's writes.
    wait_until(
        lambda: {reason for _, name, reason in event_reasons(cluster.api) if name == "escaped"},
        lambda reasons: "Suspended" in reasons,
        what="the Suspended Event on Job escaped",
    )
    wl = cluster.workload_of(job)
    assert wl["status"]["conditions"]


def test_two_replicas_the_leader_killed(cluster):
    cluster.apply(FLAVOR, CQ, LQ)
    flags = ("--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2")
    procs = [controller_process(cluster, *flags), controller_process(cluster, *flags)]
    try:
        lease = eventually(
            lambda: cluster.get("leases", "tower-controller", "tower-system"), what="a lease"
        )
        holder = lease["spec"]["holderIdentity"]
        leader = next(p for p in procs if holder.endswith(f"_{p.pid}"))
        standby = next(p for p in procs if p is not leader)
        cluster.job("before", "1", duration="600s")
        eventually(lambda: running(cluster, "before"), what="the leader to admit")
        ports = {p: int(p.stdout.readline().decode().split()[-1]) for p in procs}
        assert ready(ports[leader]) == (200, "ok: leading\n")
        # A standby with warm caches while another leads is ready (a rollout needs it).
        assert eventually(lambda: ready(ports[standby])[0] == 200, what="the standby ready")
        assert ready(ports[standby])[1] == f"ok: standing by, {holder} leads\n"
        os.kill(leader.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        cluster.job("after", "1", duration="600s")
        eventually(lambda: running(cluster, "after"), timeout=15, what="the standby to admit")
        assert time.monotonic() - killed_at < 2 + 5  # within a lease, plus sync and write
        lease = cluster.get("leases", "tower-controller", "tower-system")
        assert lease["spec"]["holderIdentity"].endswith(f"_{standby.pid}")
        assert lease["spec"]["leaseTransitions"] >= 1
    finally:
        logs = [stop(p) for p in procs]
    assert all("Traceback" not in log for log in logs), logs


def ready(port):
    """(status, body) of /readyz."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _quota_reserved(workload):
    for condition in ((workload or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "QuotaReserved":
            return condition
    return {}


def _finished(workload):
    return any(
        c["type"] == "Finished" and c["status"] == "True"
        for c in ((workload or {}).get("status") or {}).get("conditions") or []
    )


_MUTATING = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)


def test_a_job_deleted_while_the_controller_is_down_frees_its_quota(cluster):
    cluster.apply(FLAVOR, CQ, LQ)
    first = controller_process(cluster, "--no-leader-elect")
    try:
        gone = cluster.job("gone", "3", duration="600s")
        eventually(lambda: running(cluster, "gone"), timeout=20, what="the job to start")
    finally:
        stop(first)
    # Deleted without a body: batch/v1's default propagation is Orphan (see the fixtures),
    # so the Workload stays, its ownerReference removed by the garbage collector.
    cluster.admin.delete(JOBS, "gone", "default", propagation="Orphan")
    eventually(
        lambda: not (cluster.workload_of(gone) or {}).get("metadata", {}).get("ownerReferences"),
        what="the Workload to be orphaned",
    )
    second = controller_process(cluster, "--no-leader-elect")
    try:
        cluster.job("next", "3", duration="600s")
        eventually(lambda: running(cluster, "next"), timeout=20, what="the freed quota used")
        wl = cluster.workload_of(gone)
        finished = [c for c in wl["status"]["conditions"] if c["type"] == "Finished"]
        assert finished[0]["reason"] == "OwnerNotFound"
    finally:
        log = stop(second)
    assert "Traceback" not in log, log


def test_a_job_deleted_with_orphan_propagation_frees_its_quota_at_once(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    gone = cluster.job("gone", "3", duration="600s")
    eventually(lambda: running(cluster, "gone"), what="the job to start")
    # Orphan: the garbage collector will not delete the Workload, it only drops its owner.
    # The controller frees the quota at once: the Workload is deleted if the controller sees
    # the Job gone first, or kept as Finished (OwnerNotFound) if it sees the orphan first (so
    # here, where the double orphans before it answers the delete).
    cluster.admin.delete(JOBS, "gone", "default", propagation="Orphan")
    cluster.job("next", "3", duration="600s")
    eventually(lambda: running(cluster, "next"), what="the freed quota to be used")
    wl = cluster.workload_of(gone)
    if wl is not None:
        finished = [c for c in wl["status"]["conditions"] if c["type"] == "Finished"]
        assert (finished[0]["status"], finished[0]["reason"]) == ("True", "OwnerNotFound")

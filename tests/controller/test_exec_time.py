"""The maximum execution time through the API double: a job out of time is deactivated."""

from __future__ import annotations

import json
import time

from extender.kube.api.client import ApiError
from extender.kube.api.objects import seconds_at
from extender.kube.api.resources import JOBS, WORKLOADS
from tests.controller.conftest import eventually
from tests.controller.test_kubectl_tower import tower
from tests.controller.test_pods_ready import History, running, said
from tests.controller.test_seed import CQ, FLAVOR, LQ

LIMIT = "kueue.x-k8s.io/max-exec-time-seconds"


def test_a_job_past_its_max_exec_time_is_deactivated_with_kueues_reason(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    history = History(cluster, "short")
    start_controller()
    job = cluster.job("short", "1", duration="600s", labels={LIMIT: "2"})
    wl = eventually(lambda: cluster.workload_of(job), what="the Workload")
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 2, "the label becomes the field"
    eventually(lambda: running(cluster, "short"), what="the job to start")

    evicted = eventually(
        lambda: said(
            cluster, job, "Evicted", "True", "DeactivatedDueToMaximumExecutionTimeExceeded"
        ),
        what="the deactivation",
    )
    assert evicted["message"] == (
        "The workload is deactivated due to exceeding the maximum execution time"
    )
    # Kueue's mark came first, with its reason and message, and the Workload was set inactive.
    _, marked = eventually(
        lambda: history.said("DeactivationTarget", "True", "MaximumExecutionTimeExceeded"),
        what="the DeactivationTarget",
    )
    target = next(c for c in marked["status"]["conditions"] if c["type"] == "DeactivationTarget")
    assert target["message"] == "exceeding the maximum execution time"
    # Marked once 2 s of admission had passed, not before.
    admitted = next(c for c in marked["status"]["conditions"] if c["type"] == "Admitted")
    assert admitted["status"] == "True"
    ran = seconds_at(target["lastTransitionTime"]) - seconds_at(admitted["lastTransitionTime"])
    assert ran >= 2, ran
    wl = cluster.workload_of(job)
    assert wl["spec"]["active"] is False
    eventually(lambda: not running(cluster, "short"), what="the job to be stopped")
    requeued = eventually(
        lambda: said(
            cluster, job, "Requeued", "False", "DeactivatedDueToMaximumExecutionTimeExceeded"
        ),
        what="the requeue, waiting to be set active again",
    )
    assert requeued
    wl = cluster.workload_of(job)
    assert not any(c["type"] == "DeactivationTarget" for c in wl["status"]["conditions"])
    # The admission that ended is counted (Kueue clears the sum with the mark, then adds it).
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] >= 2
    reasons = [
        e["reason"]
        for e in cluster.api.list("events", "default")
        if e["involvedObject"]["name"] == wl["metadata"]["name"]
    ]
    assert "MaximumExecutionTimeExceeded" in reasons, reasons

    # `kubectl tower why` says what stopped it.
    told = tower(cluster, "why", "short", "-n", "default")
    assert told.returncode == 0, told.stderr
    assert told.stdout.splitlines()[1] == (
        "State:       Deactivated — stopped by its "
        "execution-time limit: it was admitted 2s in all (spec.maximumExecutionTimeSeconds), so "
        f"it was deactivated; `kubectl tower resume workload {wl['metadata']['name']} -n "
        f"default` queues it again ({wl['status']['accumulatedPastExecutionTimeSeconds']}s "
        "count against it)"
    ), told.stdout
    as_json = json.loads(tower(cluster, "why", "short", "-n", "default", "-o", "json").stdout)
    assert as_json["reason"] == "DeactivatedDueToMaximumExecutionTimeExceeded"


def test_an_evicted_and_readmitted_workload_keeps_its_past_seconds(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    job = cluster.job("twice", "1", duration="600s", labels={LIMIT: "600"})
    eventually(lambda: running(cluster, "twice"), what="the job to start")
    eventually(lambda: said(cluster, job, "Admitted", "True", "Admitted"), what="admission")
    wl = cluster.workload_of(job)
    name = wl["metadata"]["name"]

    # Run at least a second, then evict it (a user sets it inactive) and let it back.
    eventually(lambda: _admitted_for(cluster, job) >= 1.2, what="a second of running")
    cluster.admin.patch(WORKLOADS, name, {"spec": {"active": False}}, "default")
    stopped = eventually(
        lambda: said(cluster, job, "Requeued", "False", "Deactivated"), what="the eviction"
    )
    assert stopped
    past = cluster.workload_of(job)["status"]["accumulatedPastExecutionTimeSeconds"]
    assert past >= 1
    cluster.admin.patch(WORKLOADS, name, {"spec": {"active": True}}, "default")
    eventually(lambda: running(cluster, "twice"), what="the job to start again")
    eventually(lambda: said(cluster, job, "Admitted", "True", "Admitted"), what="readmission")
    wl = cluster.workload_of(job)
    assert wl["status"]["accumulatedPastExecutionTimeSeconds"] == past, (
        "the seconds of the first admission are kept through the second"
    )


def _admitted_for(cluster, job) -> float:
    wl = cluster.workload_of(job) or {}
    for c in (wl.get("status") or {}).get("conditions") or []:
        if c["type"] == "Admitted" and c["status"] == "True":
            return time.time() - seconds_at(c["lastTransitionTime"])
    return 0.0


def test_the_label_follows_into_a_waiting_workload_and_is_refused_on_a_running_job(
    cluster, start_controller
):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    waiting = cluster.job("waiting", "90", labels={LIMIT: "30"})  # more than the queue has
    wl = eventually(lambda: cluster.workload_of(waiting), what="the Workload")
    assert wl["spec"]["maximumExecutionTimeSeconds"] == 30
    cluster.admin.patch(JOBS, "waiting", {"metadata": {"labels": {LIMIT: "60"}}}, "default")
    eventually(
        lambda: cluster.workload_of(waiting)["spec"].get("maximumExecutionTimeSeconds") == 60,
        what="the Workload to follow the label",
    )

    cluster.job("runs", "1", duration="600s", labels={LIMIT: "600"})
    eventually(lambda: running(cluster, "runs"), what="the job to start")
    try:
        cluster.admin.patch(JOBS, "runs", {"metadata": {"labels": {LIMIT: "1200"}}}, "default")
    except ApiError as err:
        refused = str(err)
    else:
        raise AssertionError("the label changed on a running job")
    assert (
        'metadata.labels["kueue.x-k8s.io/max-exec-time-seconds"]: Invalid value: "1200": '
        "field is immutable"
    ) in refused, refused

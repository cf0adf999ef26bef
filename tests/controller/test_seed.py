"""The seed quick-start end to end over HTTP: double → real webhook → controller → Jobs."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from extender.kube.api import resources as r
from tests import yamlc
from tests.apidouble.store import now_rfc3339
from tests.controller.conftest import eventually

# The seed's own manifests (shared/seed/), applied unchanged.
FLAVOR, CQ, LQ = yamlc.safe_load_all(
    (Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "01-queues.yaml").read_text()
)


def counts(cluster, kind, name, namespace=""):
    obj = cluster.get(kind, name, namespace) or {}
    status = obj.get("status") or {}
    return status.get("pendingWorkloads"), status.get("admittedWorkloads")


def test_seed_quick_start(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    # Job 1 runs until the test has looked at the queue with job 2 waiting behind it (a
    # fixed run time would race the checks below on a loaded machine).
    job1 = cluster.job("sample-job-", "3", duration="600s", generate=True)
    # The webhook suspended it on create and recorded the original suspend value.
    assert job1["spec"]["suspend"] is True
    assert job1["metadata"]["annotations"]["tower.dev/original-suspend"] == "false"
    name1 = job1["metadata"]["name"]
    eventually(
        lambda: cluster.get("jobs", name1, "default")["spec"]["suspend"] is False,
        what="job 1 to start",
    )
    job2 = cluster.job("sample-job-", "3", duration="0.3s", generate=True)
    name2 = job2["metadata"]["name"]
    wl2 = eventually(lambda: _pending_with_reason(cluster, job2), what="job 2's reason")
    message = wl2["message"]
    assert "cpu" in message, message
    assert "default-flavor" in message, message
    assert cluster.get("jobs", name2, "default")["spec"]["suspend"] is True
    eventually(
        lambda: counts(cluster, "clusterqueues", "cluster-queue") == (1, 1),
        what="cq 1 pending 1 admitted",
    )
    eventually(lambda: counts(cluster, "localqueues", "user-queue", "default") == (1, 1))
    if shutil.which("kubectl"):
        # The seed's own commands, with the real kubectl (Tables from the printer columns).
        cq_table = kubectl(cluster, "get", "clusterqueue", "cluster-queue", "-o", "wide")
        assert cq_table[0].split() == [
            "NAME",
            "COHORT",
            "STRATEGY",
            "PENDING",
            "WORKLOADS",
            "ADMITTED",
            "WORKLOADS",
        ]
        assert cq_table[1].split() == ["cluster-queue", "BestEffortFIFO", "1", "1"]
        workloads = kubectl(cluster, "get", "workloads", "-n", "default")
        assert workloads[0].split() == [
            "NAME",
            "QUEUE",
            "RESERVED",
            "IN",
            "ADMITTED",
            "FINISHED",
            "AGE",
        ]
        running = next(line.split() for line in workloads if line.startswith(f"job-{name1}-"))
        assert running[1:4] == ["user-queue", "cluster-queue", "True"]
        waiting = next(line.split() for line in workloads if line.startswith(f"job-{name2}-"))
        assert len(waiting) == 3
        assert waiting[1] == "user-queue"
    wl1 = cluster.workload_of(job1)
    assert wl1["metadata"]["name"].startswith(f"job-{name1}-")
    assert wl1["status"]["admission"]["clusterQueue"] == "cluster-queue"
    assert wl1["status"]["admission"]["podSetAssignments"][0]["flavors"] == {
        "cpu": "default-flavor",
        "memory": "default-flavor",
    }
    assert wl1["metadata"]["ownerReferences"][0]["uid"] == job1["metadata"]["uid"]

    # Job 1 completes; its quota goes back and job 2 runs, then completes.
    complete_job(cluster, name1)
    eventually(lambda: _finished(cluster, job1), what="workload 1 finished")
    eventually(
        lambda: cluster.get("jobs", name2, "default")["spec"]["suspend"] is False,
        what="job 2 to start",
    )
    eventually(lambda: _finished(cluster, job2), what="workload 2 finished")
    eventually(lambda: counts(cluster, "clusterqueues", "cluster-queue") == (0, 0))
    eventually(lambda: counts(cluster, "localqueues", "user-queue", "default") == (0, 0))

    # `kubectl describe job` tells the story: Events on the Job itself.
    def told(name):
        return [
            e["reason"]
            for e in cluster.api.list("events", "default")
            if e["involvedObject"]["name"] == name
        ]

    story = ["CreatedWorkload", "Pending", "QuotaReserved", "Admitted", "Started", "Finished"]
    eventually(lambda: all(r in told(name2) for r in story), what=f"the story of {name2}")
    assert "Pending" not in told(name1)  # it was admitted at once
    cq = cluster.get("clusterqueues", "cluster-queue")
    active = cq["status"]["conditions"][0]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "True", "Ready")


def complete_job(cluster, name, namespace="default"):
    """Job `name` succeeds now, written as the Job controller writes it once its pods
    succeeded: for a Job that a test lets run (a long tower.dev/sim-duration) until it has
    checked what holds while the Job runs."""
    job = cluster.get("jobs", name, namespace)
    assert job is not None, f"no Job {name}"
    assert job["spec"]["suspend"] is False, f"Job {name} is not running"
    completions = int(job["spec"].get("completions") or 1)

    def succeed(status):
        stamp = now_rfc3339()
        status.pop("active", None)
        status["succeeded"] = completions
        status["completionTime"] = stamp
        conditions = status.setdefault("conditions", [])
        for kind in ("SuccessCriteriaMet", "Complete"):
            conditions.append(
                {
                    "type": kind,
                    "status": "True",
                    "lastProbeTime": stamp,
                    "lastTransitionTime": stamp,
                    "reason": "CompletionsReached",
                    "message": "Reached expected number of succeeded pods",
                }
            )

    assert cluster.api.update_status("jobs", namespace, name, succeed) is not None


def kubectl(cluster, *args):
    env = dict(os.environ, KUBECONFIG=cluster.admin_config)
    done = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)}: {done.stderr}")
    return [line for line in done.stdout.splitlines() if line.strip()]


def _pending_with_reason(cluster, job):
    wl = cluster.workload_of(job)
    for condition in ((wl or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "QuotaReserved" and condition["status"] == "False":
            return condition
    return None


def _finished(cluster, job):
    wl = cluster.workload_of(job)
    return wl is not None and any(
        c["type"] == "Finished" and c["status"] == "True"
        for c in (wl.get("status") or {}).get("conditions") or []
    )


def test_a_failed_job_finishes_its_workload_as_failed_and_frees_the_quota(
    cluster, start_controller
):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    failing = cluster.admin.create(
        r.JOBS,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "doomed",
                "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
                "annotations": {"tower.dev/sim-duration": "0.3s", "tower.dev/sim-fail": "true"},
            },
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"requests": {"cpu": "3"}}}
                        ],
                    }
                }
            },
        },
        "default",
    )
    wl = eventually(
        lambda: _finished(cluster, failing) and cluster.workload_of(failing),
        what="the Workload to finish",
    )
    finished = next(c for c in wl["status"]["conditions"] if c["type"] == "Finished")
    assert finished["reason"] == "Failed"
    cluster.job("next", "3", duration="600s")
    eventually(
        lambda: cluster.get("jobs", "next", "default")["spec"]["suspend"] is False,
        what="the freed quota to be used",
    )

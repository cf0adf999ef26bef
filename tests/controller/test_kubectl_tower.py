"""`kubectl tower why` and `queue` against the double, with the real kubectl finding the plugin
on PATH; the queue's order is checked against the order the controller then admits in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import yamlc
from tests.controller.conftest import eventually
from tests.controller.test_seed import complete_job
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
BIN = str(Path(sys.executable).parent)
FLAVOR, CQ, LQ = yamlc.safe_load_all(
    (ROOT / "examples" / "quickstart" / "01-queues.yaml").read_text()
)


def tower(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl tower ...` as a user runs it: kubectl finds kubectl-tower on PATH."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "KUBECONFIG": cluster.admin_config}  # fmt: skip
    program = ["kubectl", "tower"] if shutil.which("kubectl") else [f"{BIN}/kubectl-tower"]
    return subprocess.run([*program, *args], capture_output=True, text=True, env=env, timeout=60)


def pending(cluster: Any, job: dict[str, Any]) -> bool:
    workload = cluster.workload_of(job) or {}
    return any(
        c["type"] == "QuotaReserved" and c["status"] == "False" and c.get("message")
        for c in (workload.get("status") or {}).get("conditions") or []
    )


def test_why_says_the_reason_the_position_and_who_holds_the_quota(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    first = cluster.job("first", "3", duration="600s")
    eventually(lambda: cluster.get("jobs", "first", "default")["spec"]["suspend"] is False)
    second = cluster.job("second", "3", duration="600s")
    eventually(lambda: pending(cluster, second), what="the second job's reason")
    first_wl = cluster.workload_of(first)["metadata"]["name"]
    second_wl = cluster.workload_of(second)["metadata"]["name"]

    done = tower(cluster, "why", "second", "-n", "default")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"Job default/second  (Workload {second_wl})",
        "State:       Pending — WaitingForQuota: needs 3 cpu in flavor default-flavor; 1 of 4 free in "
        "cluster-queue",
        "Position:    1 of 1 in ClusterQueue cluster-queue; 1 of 1 in its LocalQueue",
        "Ahead:       nobody",
        "Must finish or be preempted first: ",
        f"  default/{first_wl} (priority 0): holds cpu=3 (default-flavor)",
        "Preemption:  cannot help: ClusterQueue cluster-queue preempts nothing "
        "(withinClusterQueue: Never)",
        "Borrowing:   cannot help: ClusterQueue cluster-queue is in no cohort",
    ]
    as_json = json.loads(tower(cluster, "why", "second", "-o", "json").stdout)
    assert as_json["state"] == "Pending"
    assert as_json["holding"] == [
        {"workload": f"default/{first_wl}", "priority": 0, "holds": "cpu=3 (default-flavor)"}
    ]
    admitted = json.loads(tower(cluster, "why", "first", "-o", "json").stdout)
    assert admitted["state"] == "Admitted"


def test_why_says_when_a_job_is_not_queued_at_all(cluster):
    cluster.apply(FLAVOR, CQ, LQ)
    job = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "plain"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "busybox:1.36"}]}}},
    }  # fmt: skip
    from extender.kube.api import resources as r

    cluster.admin.create(r.JOBS, job, "default")
    done = tower(cluster, "why", "plain")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1] == (
        "State:       NotQueued — not queued: it has no kueue.x-k8s.io/queue-name label, so it "
        "runs as plain Kubernetes runs it (no quota, no waiting)"
    )


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("why", "nothing-here"), "error: no Job, Pod or Workload named nothing-here in "
         "namespace default"),
        (("queue", "no-such-cq"), "error: ClusterQueue no-such-cq not found"),
        (("queue", "-n", "default", "no-such-lq"),
         "error: LocalQueue no-such-lq not found in namespace default"),
    ],
)  # fmt: skip
def test_errors_are_one_line(cluster, args, error):
    done = tower(cluster, *args)
    assert done.returncode == 1
    assert done.stderr.strip() == error
    assert "Traceback" not in done.stderr


def test_the_queue_is_the_order_the_controller_admits_in(cluster, start_controller):
    priorities = [("low", 1), ("high", 100), ("mid", 50)]
    for name, value in priorities:
        cluster.apply(
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
             "metadata": {"name": name}, "value": value}
        )  # fmt: skip
    cq = {**CQ, "spec": {**CQ["spec"], "resourceGroups": [
        {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
         "resources": [{"name": "cpu", "nominalQuota": 1}, {"name": "memory",
                       "nominalQuota": "36Gi"}]}]}]}}  # fmt: skip
    cluster.apply(FLAVOR, cq, LQ)
    start_controller()
    started: list[str] = []  # Jobs in the order their start is committed

    def record_start(event: str, kind: Any, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if kind.plural == "jobs" and obj["spec"].get("suspend") is False and name not in started:
            started.append(name)

    cluster.api.hooks.append(record_start)
    # The blocker runs until the queue has been read (a fixed run time would race the
    # creations and the plugin's start on a loaded machine).
    cluster.job("blocker", "1", duration="600s")
    eventually(lambda: cluster.get("jobs", "blocker", "default")["spec"]["suspend"] is False)
    jobs = {}
    for name, klass in [("a", "low"), ("b", "high"), ("c", "mid"), ("d", "high"), ("e", "low")]:
        jobs[name] = cluster.job(name, "1", duration="1s",
                                 labels={"kueue.x-k8s.io/priority-class": klass})  # fmt: skip
        time.sleep(1.05)  # creation timestamps have one-second resolution
    eventually(lambda: all(cluster.workload_of(j) for j in jobs.values()), what="workloads")
    listed = json.loads(tower(cluster, "queue", "cluster-queue", "-o", "json").stdout)
    by_workload = {cluster.workload_of(j)["metadata"]["name"]: n for n, j in jobs.items()}
    order = [by_workload[row["workload"]] for row in listed]
    assert [row["positionInClusterQueue"] for row in listed] == [1, 2, 3, 4, 5]
    assert order == ["b", "d", "c", "a", "e"]  # priority, then creation
    assert started == ["blocker"]
    # Now the controller admits them, one at a time as each frees the only cpu: the order of
    # the starts as the API server committed them (not as a poll happened to see them).
    complete_job(cluster, "blocker")
    admitted = wait_until(
        lambda: [name for name in started if name in jobs],
        lambda names: len(names) == len(jobs),
        what="every queued Job to start",
        timeout=60,
    )
    assert admitted == order


def test_forecast_knows_the_answer_to_the_second(cluster, start_controller):
    from datetime import UTC, datetime

    from extender.kube.api import resources as r

    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()

    def job(name: str, **extra: Any) -> dict[str, Any]:
        body = cluster.job(name, "3", duration="600s")
        if extra:
            cluster.admin.patch(r.JOBS, name, extra, "default")
        return body

    job("running", spec={"activeDeadlineSeconds": 600})
    eventually(lambda: cluster.get("jobs", "running", "default")["spec"]["suspend"] is False)
    job("next", metadata={"annotations": {"tower.dev/expected-duration": "2m"}})
    time.sleep(1.05)  # a later creation second: queued behind "next", not by uid
    job("last")
    eventually(lambda: all(cluster.workload_of(cluster.get("jobs", n, "default"))
                           for n in ("next", "last")), what="workloads")  # fmt: skip
    running = cluster.workload_of(cluster.get("jobs", "running", "default"))
    reserved = next(c for c in running["status"]["conditions"] if c["type"] == "QuotaReserved")
    admitted_at = datetime.fromisoformat(reserved["lastTransitionTime"].replace("Z", "+00:00"))

    def at(seconds: int) -> str:
        return datetime.fromtimestamp(admitted_at.timestamp() + seconds, UTC).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )

    done = tower(cluster, "forecast", "-o", "json")
    assert done.returncode == 0, done.stderr
    rows = {row["workload"].split("-")[1]: row for row in json.loads(done.stdout)}
    assert rows["next"]["start"] == at(600)  # when the running job's deadline ends it
    assert rows["next"]["atTheLatest"] is True
    assert rows["next"]["basis"] == ["activeDeadlineSeconds"]
    assert rows["next"]["durationSource"] == "tower.dev/expected-duration"
    assert rows["last"]["start"] == at(600 + 120)  # then two minutes of the next one
    assert rows["last"]["atTheLatest"] is False
    assert rows["last"]["basis"] == ["activeDeadlineSeconds", "tower.dev/expected-duration"]
    assert rows["last"]["durationSource"] == "unknown"
    one = json.loads(tower(cluster, "forecast", "last", "-o", "json").stdout)
    assert [row["start"] for row in one] == [at(720)]
    table = tower(cluster, "forecast").stdout.splitlines()
    assert table[0].split() == ["WORKLOAD", "STARTS", "BECAUSE", "OF", "ITS", "OWN", "DURATION"]
    assert f"{at(600)} (in " in table[1]
    assert table[1].split()[-3:] == [
        "latest",
        "activeDeadlineSeconds",
        "tower.dev/expected-duration",
    ]

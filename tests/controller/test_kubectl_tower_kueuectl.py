"""kueuectl's verbs in `kubectl tower` (list, stop, resume, create) against the double with
Tower's real webhook: the printed tables and lines, and the objects written."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from extender.kube.api import resources as r
from extender.kube.plugin.cli import main
from tests import yamlc
from tests.apidouble.store import now_rfc3339
from tests.controller.conftest import eventually

ROOT = Path(__file__).resolve().parents[2]
FLAVOR, CQ, LQ = yamlc.safe_load_all(
    (ROOT / "examples" / "quickstart" / "01-queues.yaml").read_text()
)
# Every object of a test is made within seconds; ten and a half days later each one's AGE
# is "10d" whichever second it was made in.
LATER = time.time() + 10 * 86400 + 12 * 3600


class Tower:
    """`kubectl tower ...` run in this process, as the admin of the double, at `LATER`."""

    def __init__(self, cluster: Any, capsys: Any) -> None:
        self.cluster = cluster
        self.capsys = capsys

    def __call__(self, *args: str, code: int = 0, config: str | None = None) -> tuple[str, str]:
        kubeconfig = config or self.cluster.admin_config
        got = main(["--kubeconfig", kubeconfig, *args], clock=lambda: LATER)
        out, err = self.capsys.readouterr()
        assert got == code, err
        return out, err


@pytest.fixture
def tower(cluster, capsys) -> Tower:
    return Tower(cluster, capsys)


def active(status: dict[str, Any], pending: int = 0, admitted: int = 0) -> None:
    """As the controller writes a ClusterQueue's or LocalQueue's status."""
    stamp = now_rfc3339()
    status.update(pendingWorkloads=pending, admittedWorkloads=admitted, reservingWorkloads=0)
    status["conditions"] = [
        {"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new "
         "workloads", "lastTransitionTime": stamp}
    ]  # fmt: skip


def team_queue() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-queue", "labels": {"tier": "gold"}},
        "spec": {"cohortName": "team", "namespaceSelector": {}},
    }


# ----- list ----------------------------------------------------------------------------------


def test_list_clusterqueue_shows_kueuectls_columns_and_filters(cluster, tower):
    cluster.apply(FLAVOR, CQ, team_queue())
    cluster.api.update_status("clusterqueues", "", "cluster-queue", lambda s: active(s, 1, 2))

    out, _ = tower("list", "clusterqueue")
    assert out.splitlines() == [
        "NAME            COHORT   PENDING WORKLOADS   ADMITTED WORKLOADS   ACTIVE   AGE",
        "cluster-queue            1                   2                    true     10d",
        "team-queue      team     0                   0                    false    10d",
    ]
    out, _ = tower("list", "cq", "--active", "false")
    assert [line.split()[0] for line in out.splitlines()] == ["NAME", "team-queue"]
    out, _ = tower("list", "cq", "-l", "tier=gold", "-o", "name")
    assert out.splitlines() == ["clusterqueue.kueue.x-k8s.io/team-queue"]
    listed = json.loads(tower("list", "cq", "--field-selector", "metadata.name=cluster-queue",
                              "-o", "json")[0])  # fmt: skip
    assert listed["kind"] == "ClusterQueueList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["cluster-queue"]
    assert listed["items"][0]["status"]["admittedWorkloads"] == 2
    out, err = tower("list", "cq", "-l", "tier=silver")
    assert (out, err) == ("", "No resources found\n")


def test_list_localqueue_in_a_namespace_or_in_all(cluster, tower):
    other = {**LQ, "metadata": {"name": "other-queue", "namespace": "kube-public"},
             "spec": {"clusterQueue": "team-queue"}}  # fmt: skip
    cluster.apply(FLAVOR, CQ, team_queue(), LQ, other)
    cluster.api.update_status("localqueues", "default", "user-queue", lambda s: active(s, 3, 1))

    out, _ = tower("list", "localqueue")  # the context's namespace: default
    assert out.splitlines() == [
        "NAME         CLUSTERQUEUE    PENDING WORKLOADS   ADMITTED WORKLOADS   AGE",
        "user-queue   cluster-queue   3                   1                    10d",
    ]
    out, _ = tower("list", "lq", "-A")
    assert out.splitlines() == [
        "NAMESPACE     NAME          CLUSTERQUEUE    PENDING WORKLOADS   ADMITTED WORKLOADS   AGE",
        "default       user-queue    cluster-queue   3                   1                    10d",
        "kube-public   other-queue   team-queue      0                   0                    10d",
    ]
    out, _ = tower("list", "lq", "-A", "--clusterqueue", "team-queue", "-o", "name")
    assert out.splitlines() == ["localqueue.kueue.x-k8s.io/other-queue"]
    out, err = tower("list", "lq", "-n", "kube-system")
    assert (out, err) == ("", "No resources found in kube-system namespace.\n")


def test_list_resourceflavor_shows_its_node_labels(cluster, tower):
    cluster.apply(FLAVOR, {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                           "metadata": {"name": "gpu"}, "spec": {"nodeLabels": {
                               "zone": "b", "accelerator": "a100"}}})  # fmt: skip
    out, _ = tower("list", "rf")
    assert out.splitlines() == [
        "NAME             NODE LABELS                AGE",
        "default-flavor                              10d",
        "gpu              accelerator=a100, zone=b   10d",
    ]


def test_list_workload_shows_status_queue_and_position(cluster, tower, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    first = cluster.job("first", "3", duration="600s")
    eventually(lambda: cluster.get("jobs", "first", "default")["spec"]["suspend"] is False)
    second = cluster.job("second", "3", duration="600s")
    eventually(lambda: (cluster.workload_of(second) or {}).get("status"), what="its reason")
    first_wl = cluster.workload_of(first)["metadata"]["name"]
    second_wl = cluster.workload_of(second)["metadata"]["name"]

    out, err = tower("list", "workload", "-v")
    head = "NAME   JOB TYPE   JOB NAME   LOCALQUEUE   CLUSTERQUEUE   STATUS   POSITION IN QUEUE"
    assert [line.split("   ") for line in out.splitlines()] == [
        line.split("   ")
        for line in _aligned(
            [[*head.split("   "), "EXEC TIME", "AGE"],
             [first_wl, "job", "first", "user-queue", "cluster-queue", "ADMITTED", "", "10d",
              "10d"],
             [second_wl, "job", "second", "user-queue", "cluster-queue", "PENDING", "0", "",
              "10d"]]
        )
    ]  # fmt: skip
    # The double serves no visibility API: the position was computed client-side.
    assert "positions computed client-side" in err
    out, _ = tower("list", "wl", "--status", "pending", "-o", "name")
    assert out.splitlines() == [f"workload.kueue.x-k8s.io/{second_wl}"]
    out, _ = tower("list", "kueueworkloads", "--for", "job/first", "-o", "name")
    assert out.splitlines() == [f"workload.kueue.x-k8s.io/{first_wl}"]
    out, _ = tower("list", "wl", "-A", "--clusterqueue", "cluster-queue")
    assert [line.split()[:2] for line in out.splitlines()] == [
        ["NAMESPACE", "NAME"],
        ["default", first_wl],
    ]
    out, err = tower("list", "wl", "--for", "job/nothing")
    assert (out, err) == ("", "No resources found in default namespace.\n")
    _, err = tower("list", "wl", "--status", "running", code=1)
    assert err == (
        'error: --status running: invalid status value. Must be "all", "pending", '
        '"quotareserved", "admitted" or "finished"\n'
    )


def _aligned(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def test_list_pods_for_a_job_finds_them_by_kueues_selector(cluster, tower):
    def pod(name: str, job: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"batch.kubernetes.io/job-name": job}},
            "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
        }  # fmt: skip

    for name, job in (("first-a", "first"), ("first-b", "first"), ("other-a", "other")):
        cluster.admin.create(r.PODS, pod(name, job), "default")

    def running(status: dict[str, Any]) -> None:
        status.update(
            phase="Running",
            podIP="10.0.0.7",
            containerStatuses=[
                {"name": "c", "ready": True, "restartCount": 0, "state": {"running": {}}}
            ],
        )

    def gated(status: dict[str, Any]) -> None:
        status.update(
            phase="Pending",
            conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}],
        )

    cluster.api.update_status("pods", "default", "first-a", running)
    cluster.api.update_status("pods", "default", "first-b", gated)
    cluster.admin.create(r.JOBS, {"metadata": {"name": "first"}, "spec": {"template": {"spec": {
        "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}}}},
        "default")  # fmt: skip

    out, _ = tower("list", "pods", "--for", "job/first")
    assert out.splitlines() == [
        "NAME      READY   STATUS            RESTARTS   AGE",
        "first-a   1/1     Running           0          10d",
        "first-b   0/1     SchedulingGated   0          10d",
    ]
    out, _ = tower("list", "po", "--for", "jobs.batch/first", "-o", "wide")
    assert out.splitlines()[1].split() == [
        "first-a",
        "1/1",
        "Running",
        "0",
        "10d",
        "10.0.0.7",
        "<none>",
        "<none>",
        "<none>",
    ]
    _, err = tower("list", "pods", "--for", "job/none")
    assert err == "No resources found in default namespace.\n"
    _, err = tower("list", "pods", "--for", "first", code=1)
    assert err.startswith("error: --for first: must be TYPE[.API-GROUP]/NAME")


# ----- stop and resume -----------------------------------------------------------------------


def test_stop_and_resume_a_clusterqueue_set_its_stop_policy(cluster, tower):
    cluster.apply(FLAVOR, CQ)

    def policy() -> str | None:
        return cluster.get("clusterqueues", "cluster-queue")["spec"].get("stopPolicy")

    out, _ = tower("stop", "clusterqueue", "cluster-queue")
    assert out == "clusterqueue.kueue.x-k8s.io/cluster-queue\n"
    assert policy() == "HoldAndDrain"
    tower("resume", "cq", "cluster-queue")
    assert policy() == "None"
    tower("stop", "cq", "cluster-queue", "--keep-already-running")
    assert policy() == "Hold"
    out, _ = tower("resume", "cq", "cluster-queue", "--dry-run", "client")
    assert out == "clusterqueue.kueue.x-k8s.io/cluster-queue (client dry run)\n"
    assert policy() == "Hold"  # nothing was sent
    shown = json.loads(tower("resume", "cq", "cluster-queue", "--dry-run", "server",
                             "-o", "json")[0])  # fmt: skip
    assert shown["spec"]["stopPolicy"] == "None"
    patch = [c for c in cluster.api.calls if c[0] == "PATCH"][-1]
    assert patch[2].get("dryRun") == "All"  # a real API server keeps nothing
    _, err = tower("stop", "cq", "nothing", code=1)
    assert err == "error: ClusterQueue nothing not found\n"


def test_stop_and_resume_a_localqueue_in_its_namespace(cluster, tower):
    cluster.apply(FLAVOR, CQ, LQ)
    tower("stop", "localqueue", "user-queue", "-n", "default", "--keep-already-running")
    assert cluster.get("localqueues", "user-queue", "default")["spec"]["stopPolicy"] == "Hold"
    out, _ = tower("resume", "lq", "user-queue", "-o", "name")
    assert out == "localqueue.kueue.x-k8s.io/user-queue\n"
    assert cluster.get("localqueues", "user-queue", "default")["spec"]["stopPolicy"] == "None"
    _, err = tower("stop", "lq", "user-queue", "-n", "kube-public", code=1)
    assert err == "error: LocalQueue user-queue not found in namespace kube-public\n"


def test_stop_a_running_workload_requeues_it_and_resume_admits_it_again(
    cluster, tower, start_controller
):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    job = cluster.job("first", "3", duration="600s")
    eventually(lambda: cluster.get("jobs", "first", "default")["spec"]["suspend"] is False)
    name = cluster.workload_of(job)["metadata"]["name"]

    out, _ = tower("stop", "workload", name)
    assert out == f"workload.kueue.x-k8s.io/{name} stopped\n"
    assert cluster.get("workloads", name, "default")["spec"]["active"] is False
    eventually(lambda: cluster.get("jobs", "first", "default")["spec"]["suspend"] is True,
               what="the job stopped")  # fmt: skip
    out, _ = tower("resume", "kwl", name)
    assert out == f"workload.kueue.x-k8s.io/{name} resumed\n"
    eventually(lambda: cluster.get("jobs", "first", "default")["spec"]["suspend"] is False,
               what="the job started again")  # fmt: skip


# ----- create --------------------------------------------------------------------------------


def test_create_makes_the_quick_start_queues_and_a_job_runs_in_them(
    cluster, tower, start_controller
):
    out, _ = tower("create", "resourceflavor", "default-flavor")
    assert out == "resourceflavor.kueue.x-k8s.io/default-flavor created\n"
    out, _ = tower("create", "clusterqueue", "cluster-queue",
                   "--nominal-quota", "default-flavor:cpu=4;memory=8192Mi")  # fmt: skip
    assert out == "clusterqueue.kueue.x-k8s.io/cluster-queue created\n"
    out, _ = tower("create", "localqueue", "user-queue", "-c", "cluster-queue", "-n", "default")
    assert out == "localqueue.kueue.x-k8s.io/user-queue created\n"

    spec = cluster.get("clusterqueues", "cluster-queue")["spec"]
    assert spec["resourceGroups"] == [
        {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
         "resources": [{"name": "cpu", "nominalQuota": "4"},
                       {"name": "memory", "nominalQuota": "8Gi"}]}]}
    ]  # fmt: skip
    assert spec["namespaceSelector"] == {}
    assert spec["queueingStrategy"] == "BestEffortFIFO"
    assert spec["preemption"] == {  # what was sent, and the API's default for the rest
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
        "borrowWithinCohort": {"policy": "Never"},
    }
    assert cluster.get("localqueues", "user-queue", "default")["spec"]["clusterQueue"] == (
        "cluster-queue"
    )
    start_controller()
    cluster.job("first", "3", duration="600s")
    eventually(lambda: cluster.get("jobs", "first", "default")["spec"]["suspend"] is False,
               what="the job admitted in the queues kubectl tower made")  # fmt: skip


def test_create_clusterqueue_with_every_flag_as_kueuectl_builds_it(cluster, tower):
    cluster.apply(FLAVOR)
    shown, _ = tower(
        "create", "cq", "research", "--cohort", "lab", "--queuing-strategy", "StrictFIFO",
        "--namespace-selector", "team=ml", "--reclaim-within-cohort", "Any",
        "--preemption-within-cluster-queue", "LowerPriority",
        "--nominal-quota", "alpha:cpu=9;memory=36Gi,beta:cpu=18;memory=72Gi",
        "--borrowing-limit", "alpha:cpu=1;memory=1Gi",
        "--lending-limit", "beta:cpu=2;memory=2Gi", "-o", "json",
    )  # fmt: skip
    stored = cluster.get("clusterqueues", "research")
    assert json.loads(shown)["spec"] == stored["spec"]
    spec = stored["spec"]
    assert (spec["cohortName"], spec["queueingStrategy"]) == ("lab", "StrictFIFO")
    assert spec["namespaceSelector"] == {"matchLabels": {"team": "ml"}}
    assert spec["preemption"] == {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
        "borrowWithinCohort": {"policy": "Never"},
    }
    assert spec["resourceGroups"] == [
        {"coveredResources": ["cpu", "memory"], "flavors": [
            {"name": "alpha", "resources": [
                {"name": "cpu", "nominalQuota": "9", "borrowingLimit": "1"},
                {"name": "memory", "nominalQuota": "36Gi", "borrowingLimit": "1Gi"}]},
            {"name": "beta", "resources": [
                {"name": "cpu", "nominalQuota": "18", "lendingLimit": "2"},
                {"name": "memory", "nominalQuota": "72Gi", "lendingLimit": "2Gi"}]}]}
    ]  # fmt: skip


def test_create_dry_runs_write_nothing(cluster, tower):
    cluster.apply(FLAVOR, CQ)
    out, _ = tower("create", "lq", "user-queue", "-c", "cluster-queue", "--dry-run", "client")
    assert out == "localqueue.kueue.x-k8s.io/user-queue created (client dry run)\n"
    out, _ = tower("create", "rf", "gpu", "--node-labels", "accelerator=a100",
                   "--node-taints", "gpu=true:NoSchedule", "--tolerations", "spot:NoExecute",
                   "--dry-run", "server", "-o", "yaml")  # fmt: skip
    shown = yamlc.safe_load(out)
    assert shown["spec"] == {
        "nodeLabels": {"accelerator": "a100"},
        "nodeTaints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
        "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoExecute"}],
    }
    assert cluster.get("localqueues", "user-queue", "default") is None
    assert cluster.get("resourceflavors", "gpu") is None


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("create", "cq", "x", "--nominal-quota", "alpha:cpu=lots"),
         "error: ClusterQueue x: --nominal-quota alpha:cpu=lots: lots is not a quantity"),
        (("create", "cq", "x", "--nominal-quota", "alpha"),
         "error: ClusterQueue x: --nominal-quota alpha: must be "
         "FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...]"),
        (("create", "cq", "x", "--nominal-quota", "alpha:cpu=1", "--borrowing-limit",
          "alpha:memory=1Gi"),
         "error: ClusterQueue x: --borrowing-limit alpha:memory=1Gi: flavor alpha must name the "
         "same resources as in --nominal-quota (cpu)"),
        (("create", "cq", "x", "--nominal-quota", "alpha:cpu=1", "--borrowing-limit",
          "alpha:cpu=1"),
         "error: ClusterQueue x: spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit: "
         "must be null when there is no cohort"),
        (("create", "cq", "x", "--queuing-strategy", "FIFO"),
         "error: ClusterQueue x: --queuing-strategy FIFO: must be StrictFIFO or BestEffortFIFO"),
        (("create", "lq", "q", "-c", "missing"),
         "error: LocalQueue default/q: --clusterqueue missing: ClusterQueue missing not found "
         "(--ignore-unknown-cq to create it anyway)"),
        (("create", "rf", "f", "--node-taints", "gpu=true:Sometimes"),
         "error: ResourceFlavor f: --node-taints gpu=true:Sometimes: invalid taint effect "
         "Sometimes, must be NoSchedule, PreferNoSchedule or NoExecute"),
        (("create", "rf", "f", "--tolerations", "=x"),
         "error: ResourceFlavor f: --tolerations =x: a value needs a key"),
        (("create", "cq", "Bad_Name"),
         "error: ClusterQueue Bad_Name: metadata.name: 'Bad_Name' must be a lowercase RFC 1123 "
         "subdomain (lowercase letters, digits, '-' and '.')"),
        (("create", "cq", "cluster-queue"),
         'error: 409 AlreadyExists: clusterqueues.kueue.x-k8s.io "cluster-queue" already exists'),
    ],
)  # fmt: skip
def test_bad_flags_are_one_line_naming_the_object_and_the_flag(cluster, tower, args, error):
    cluster.apply(CQ)
    _, err = tower(*args, code=1)
    assert err == error + "\n"
    assert cluster.get("clusterqueues", "x") is None


def test_kueues_e2e_case_create_a_local_queue_and_list_it_back(cluster):
    """Kueue's test/e2e/singlecluster/baseline/kueuectl_test.go, through the installed plugin
    as kubectl finds it (the console script, not this process)."""
    from tests.controller.test_kubectl_tower import tower as installed

    cluster.apply(FLAVOR, CQ)
    cluster.admin.create(r.NAMESPACES, {"metadata": {"name": "e2e-kueuectl"}})
    done = installed(cluster, "create", "localqueue", "e2e-lq-sanity", "--clusterqueue",
                     "cluster-queue", "--namespace", "e2e-kueuectl")  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = installed(cluster, "list", "localqueue", "--namespace", "e2e-kueuectl", "-o", "json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert listed["kind"] == "LocalQueueList"
    assert [(i["metadata"]["name"], i["spec"]["clusterQueue"]) for i in listed["items"]] == [
        ("e2e-lq-sanity", "cluster-queue")
    ]

"""The simulator on the quick-start and on one scenario per behaviour (examples/)."""

import json
from pathlib import Path

import pytest

from extender.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = [
    str(ROOT / "examples/quickstart/01-queues.yaml"),
    str(ROOT / "examples/quickstart/02-jobs.yaml"),
]


def run(capsys, *args):
    assert main(["simulate", "-o", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def scenario(capsys, name, *flags):
    return run(capsys, *flags, str(ROOT / "examples/scenarios" / name))


def timeline(result, *kinds):
    return [
        (e["time"], e["event"], e["name"])
        for e in result["events"]
        if not kinds or e["event"] in kinds
    ]


def test_quick_start_runs_one_job_then_the_other(capsys):
    result = run(capsys, *QUICKSTART)
    first, second = [e["name"] for e in result["events"] if e["event"] == "Created"]
    assert first.startswith("sample-job-")
    assert timeline(result, "Admitted", "Finished") == [
        (0.0, "Admitted", first),
        (30.0, "Finished", first),
        (30.0, "Admitted", second),
        (60.0, "Finished", second),
    ]
    pending = [e for e in result["events"] if e["event"] == "Pending"]
    assert [(p["name"], p["reason"], p["message"]) for p in pending] == [
        (
            second,
            "WaitingForQuota",
            "needs 3 cpu in flavor default-flavor; 1 of 4 free in cluster-queue",
        )
    ]
    admitted = next(e for e in result["events"] if e["event"] == "Admitted")
    assert admitted["clusterQueue"] == "cluster-queue"
    assert admitted["flavors"] == {"main": {"cpu": "default-flavor", "memory": "default-flavor"}}
    assert admitted["workload"].startswith(f"job-{first}-")
    assert result["pending"] == []


def test_seed_makes_names_repeatable_and_different(capsys):
    a = run(capsys, "--seed", "1", *QUICKSTART)
    b = run(capsys, "--seed", "1", *QUICKSTART)
    c = run(capsys, "--seed", "2", *QUICKSTART)
    assert a == b
    assert a["events"][0]["name"] != c["events"][0]["name"]


def test_quick_start_table_shows_kubectls_columns(capsys):
    assert main(["simulate", *QUICKSTART]) == 0
    out = capsys.readouterr().out
    assert "NAME            COHORT   STRATEGY         PENDING WORKLOADS   ADMITTED WORKLOADS" in out
    assert "cluster-queue            BestEffortFIFO   0                   0" in out
    assert (
        "NAME                         QUEUE        RESERVED IN     ADMITTED   FINISHED   AGE" in out
    )
    assert "user-queue   cluster-queue   True       True       60s" in out


def test_borrowing(capsys):
    result = scenario(capsys, "borrowing.yaml")
    assert timeline(result, "Admitted") == [
        (0.0, "Admitted", "a-big"),
        (1.0, "Admitted", "b-small"),
    ]


def test_lending_limit(capsys):
    result = scenario(capsys, "lending-limit.yaml")
    assert timeline(result, "Admitted") == [(0.0, "Admitted", "a-five")]
    [never] = result["pending"]
    assert never["name"] == "a-six"
    assert never["reason"] == "ExceedsMaxQuota"
    assert "more than team-a can ever use (5" in never["message"]


def test_reclaim(capsys):
    result = scenario(capsys, "reclaim.yaml")
    evicted = [e for e in result["events"] if e["event"] == "Evicted"]
    assert [(e["time"], e["name"], e["reason"], e["preemptionReason"]) for e in evicted] == [
        (10.0, "b-borrower", "Preempted", "InCohortReclamation")
    ]
    assert timeline(result, "Admitted") == [
        (0.0, "Admitted", "b-borrower"),
        (10.0, "Admitted", "a-owner"),
        (70.0, "Admitted", "b-borrower"),
    ]
    # An evicted job restarts from zero: 100s more from its readmission.
    assert (170.0, "Finished", "b-borrower") in timeline(result, "Finished")


def test_priority_preemption(capsys):
    result = scenario(capsys, "priority-preemption.yaml")
    evicted = [
        (e["time"], e["name"], e["preemptionReason"])
        for e in result["events"]
        if e["event"] == "Evicted"
    ]
    assert evicted == [(5.0, "experiment", "InClusterQueue")]
    assert timeline(result, "Admitted") == [
        (0.0, "Admitted", "experiment"),
        (5.0, "Admitted", "training"),
        (65.0, "Admitted", "experiment"),
    ]


def test_fungibility(capsys):
    result = scenario(capsys, "fungibility.yaml")
    flavors = {
        e["name"]: e["flavors"]["main"]["cpu"] for e in result["events"] if e["event"] == "Admitted"
    }
    assert flavors == {"first": "reserved", "second": "spot"}


def test_taints(capsys):
    result = scenario(capsys, "taints.yaml")
    pending = next(e for e in result["events"] if e["event"] == "Pending")
    assert pending["name"] == "intolerant"
    assert (
        "flavor spot has taint cloud.example.com/spot=true:NoSchedule that pod set main "
        "does not tolerate" in pending["message"]
    )
    assert (60.0, "Admitted", "intolerant") in timeline(result, "Admitted")


@pytest.mark.parametrize(
    ("flags", "want_reason"),
    # team-b takes back no more than its nominal quota: with fair sharing too, Kueue's
    # FairSharingPreemptWithinNominal (on) reclaims it whatever the shares.
    [((), "InCohortReclamation"), (("--fair-sharing",), "InCohortReclamation")],
    ids=["classical", "fair sharing"],
)
def test_fair_sharing(capsys, flags, want_reason):
    result = scenario(capsys, "fair-sharing.yaml", *flags)
    evicted = [e for e in result["events"] if e["event"] == "Evicted"]
    assert len(evicted) == 2
    assert {e["preemptionReason"] for e in evicted} == {want_reason}
    assert timeline(result, "Admitted")[-4:-2] == [
        (10.0, "Admitted", "b-0"),
        (10.0, "Admitted", "b-1"),
    ]


def test_strict_fifo_versus_best_effort(capsys):
    result = scenario(capsys, "strict-vs-besteffort.yaml")
    admitted = {name: t for t, _, name in timeline(result, "Admitted")}
    assert admitted["besteffort-small"] == 2.0
    assert admitted["strict-small"] == 60.0
    assert admitted["strict-big"] == 60.0


def test_jobset_is_admitted_whole(capsys):
    result = scenario(capsys, "jobset.yaml")
    first = next(e for e in result["events"] if e["event"] == "Admitted")
    assert first["kind"] == "JobSet"
    assert first["flavors"] == {
        "driver": {"cpu": "default-flavor"},
        "workers": {"cpu": "default-flavor"},
    }
    pending = next(e for e in result["events"] if e["event"] == "Pending")
    assert (
        pending["message"] == "needs 2 cpu in flavor default-flavor; 1 of 8 free in cluster-queue"
    )


def test_a_job_without_the_queue_label_is_not_queued(capsys, tmp_path):
    plain = tmp_path / "plain.yaml"
    plain.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: plain}\nspec:\n"
        "  template: {spec: {containers: [{name: c, image: x}]}}\n"
    )
    result = run(capsys, *QUICKSTART[:1], str(plain))
    assert result["events"] == [
        {
            "time": 0.0,
            "event": "Created",
            "namespace": "default",
            "name": "plain",
            "kind": "Job",
            "workload": None,
            "managed": False,
        }
    ]


def test_workload_objects_can_be_submitted_directly(capsys, tmp_path):
    wl = tmp_path / "workload.yaml"
    wl.write_text("""apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata:
  name: direct
  annotations: {tower.dev/sim-duration: 5s}
spec:
  queueName: user-queue
  priority: 7
  podSets:
  - name: main
    count: 2
    template:
      spec:
        containers:
        - {name: c, image: x, resources: {requests: {cpu: "2"}}}
""")
    result = run(capsys, QUICKSTART[0], str(wl))
    assert timeline(result) == [
        (0.0, "Created", "direct"),
        (0.0, "Admitted", "direct"),
        (5.0, "Finished", "direct"),
    ]
    assert result["events"][1]["workload"] == "direct"


def test_a_job_with_the_pre_0_15_queue_annotation_is_queued(capsys, tmp_path):
    legacy = tmp_path / "legacy.yaml"
    legacy.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: legacy\n"
        "  annotations: {kueue.x-k8s.io/queue-name: user-queue}\nspec:\n"
        "  template: {spec: {containers: [{name: c, image: x, resources: "
        "{requests: {cpu: '1'}}}]}}\n"
    )
    result = run(capsys, QUICKSTART[0], str(legacy))
    assert timeline(result, "Admitted") == [(0.0, "Admitted", "legacy")]


def test_gpu_placement_waits_for_a_node_that_holds_the_pod(capsys):
    result = scenario(capsys, "gpu-placement.yaml")
    assert timeline(result, "Admitted", "NodeJoined", "Finished") == [
        (1.0, "Admitted", "small-a"),
        (2.0, "Admitted", "small-b"),
        (600.0, "NodeJoined", "node-9"),
        (600.0, "Admitted", "big-training"),
        (1201.0, "Finished", "small-a"),
        (1802.0, "Finished", "small-b"),
        (4200.0, "Finished", "big-training"),
    ]
    first = next(e for e in result["events"] if e["event"] == "Pending")
    assert first["message"] == (
        "needs 8 nvidia.com/gpu on one node; the nodes of flavor a100 have at most 4 free "
        "(node-3: 4, node-7: 4)"
    )
    placed = {e["name"]: e["placement"] for e in result["events"] if e["event"] == "Admitted"}
    assert placed == {
        "small-a": {"main": {"node-3": 1}},
        "small-b": {"main": {"node-7": 1}},
        "big-training": {"main": {"node-9": 1}},
    }


def test_without_nodes_the_simulator_admits_on_quota_alone(capsys, tmp_path):
    text = (ROOT / "examples/scenarios/gpu-placement.yaml").read_text()
    docs = [d for d in text.split("\n---\n") if "kind: Node" not in d]
    path = tmp_path / "no-nodes.yaml"
    path.write_text("\n---\n".join(docs))
    result = run(capsys, str(path))
    admitted = [e for e in result["events"] if e["event"] == "Admitted"]
    assert admitted[0]["name"] == "big-training"
    assert admitted[0]["time"] == 0.0
    assert "placement" not in admitted[0]


def test_topology_jobs_are_placed_in_one_rack_and_wait_for_one(capsys):
    result = scenario(capsys, "topology.yaml")
    assert timeline(result, "Admitted", "Finished") == [
        (0.0, "Admitted", "rack-a"),
        (1.0, "Admitted", "rack-b"),
        (600.0, "Finished", "rack-a"),
        (600.0, "Admitted", "rack-c"),
        (900.0, "Finished", "rack-c"),
        (1201.0, "Finished", "rack-b"),
    ]
    placed = {e["name"]: e["topology"] for e in result["events"] if e["event"] == "Admitted"}
    assert placed == {
        "rack-a": {"main": {"r1-host-1": 4, "r1-host-2": 2}},
        "rack-b": {"main": {"r2-host-1": 4, "r2-host-2": 2}},
        "rack-c": {"main": {"r1-host-1": 4}},
    }
    pending = next(e for e in result["events"] if e["event"] == "Pending")
    assert pending["message"] == (
        'couldn\'t assign flavors to pod set main: topology "default" allows to fit only 2 out '
        'of 4 pod(s). Total nodes: 4; excluded: resource "cpu": 2'
    )

"""Bad input ends with exit status 2 and one line naming file, document, object and field."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import yamlc

ROOT = Path(__file__).resolve().parents[2]


def simulate(*args: object) -> subprocess.CompletedProcess[str]:
    """`python -m extender simulate ARGS`, to its end."""
    return subprocess.run(
        [sys.executable, "-m", "extender", "simulate", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=60,
    )


FLAVOR = "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\nmetadata: {name: f}\n"


def cq(resources):
    return (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: cq}\n"
        "spec:\n  resourceGroups:\n  - coveredResources: [cpu]\n    flavors:\n"
        f"    - name: f\n      resources: {resources}\n"
    )


BAD = [
    (
        "not YAML",
        "kind: Job\nmetadata: name: x\n",
        "not valid YAML at line 2, column 15: mapping values are not allowed",
    ),
    (
        "unknown kind",
        FLAVOR + "---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: web}\n",
        "document 2 (DaemonSet/web): kind: 'DaemonSet' is not a kind the simulator reads",
    ),
    (
        "a Deployment without its pod template",
        FLAVOR + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {}\n",
        "document 2 (Deployment/web): spec.template: is required",
    ),
    (
        "flavor lists other resources than coveredResources",
        FLAVOR + "---\n" + cq("[{name: memory, nominalQuota: 1}]"),
        "document 2 (ClusterQueue/cq): spec.resourceGroups[0].flavors[0].resources: must list "
        "exactly the coveredResources ['cpu'] in that order, got ['memory']",
    ),
    (
        "negative quota",
        cq("[{name: cpu, nominalQuota: -1}]"),
        "document 1 (ClusterQueue/cq): spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        "must be greater than or equal to 0, got -1",
    ),
    (
        "LocalQueue without clusterQueue",
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata: {name: q}\nspec: {}\n",
        "document 1 (LocalQueue/q): spec.clusterQueue: is required",
    ),
    (
        "a bad duration annotation",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {kueue.x-k8s.io/queue-name: q}"
        "\n  annotations: {tower.dev/sim-duration: soon}\nspec: {template: {spec: {containers: []}}}\n",
        "document 1 (Job/j): metadata.annotations[\"tower.dev/sim-duration\"]: 'soon' is not a "
        "duration",
    ),
    (
        "a missing WorkloadPriorityClass",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {kueue.x-k8s.io/queue-name: q,"
        " kueue.x-k8s.io/priority-class: urgent}\nspec: {template: {spec: {containers: []}}}\n",
        "(Job/j): metadata.labels[\"kueue.x-k8s.io/priority-class\"]: WorkloadPriorityClass 'urgent' "
        "does not exist",
    ),
    ("a document that is a list", "- a\n- b\n", "document 1 (?/?): must be a YAML mapping"),
    (
        "a Job whose spec is not an object",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {kueue.x-k8s.io/queue-name: q}"
        "\nspec: 5\n",
        "document 1 (Job/j): spec: must be an object, got int",
    ),
    (
        "a Job whose suspend is not a boolean",
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: j\n  labels: {kueue.x-k8s.io/queue-name: q}"
        "\nspec: {suspend: 'yes', template: {spec: {containers: []}}}\n",
        "document 1 (Job/j): spec.suspend: must be a boolean, got 'yes'",
    ),
]


@pytest.mark.parametrize(("text", "want"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path, text, want):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    proc = simulate(path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: {path}: ")
    assert want in lines[0]
    assert "Traceback" not in proc.stderr


def test_a_missing_file(tmp_path):
    proc = simulate(tmp_path / "no.yaml")
    assert proc.returncode == 2
    assert (
        proc.stderr.strip()
        == f"error: {tmp_path / 'no.yaml'}: cannot read: No such file or directory"
    )


def test_a_binary_file_is_one_line_not_a_traceback(tmp_path):
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"kind: Job\n\xd0\x00\xff")
    proc = simulate(path)
    assert proc.returncode == 2
    assert proc.stderr == f"error: {path}: not UTF-8 text (byte 10)\n"


NOT_ACTED_ON = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: f}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  concurrentAdmissionPolicy:
    migration: {mode: TryPreferredFlavors}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: f, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: default, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}}}]
"""


def test_the_simulator_says_which_fields_it_does_not_act_on(tmp_path):
    path = tmp_path / "checks.yaml"
    path.write_text(NOT_ACTED_ON)
    table = simulate(path)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0] == "Not acted on by Tower (docs/kueue-fields.md):"
    assert lines[1].startswith(
        "  ClusterQueue cq: spec.concurrentAdmissionPolicy (concurrent admission for flavor "
        "migration) is not acted on"
    )
    never = table.stdout.split("Never admitted:")[1]
    assert "default/job-train" in never
    assert "spec.concurrentAdmissionPolicy" in never
    as_json = json.loads(simulate(path, "-o", "json").stdout)
    assert as_json["notActedOn"] == [lines[1].strip()]
    assert as_json["pending"][0]["message"].startswith("ClusterQueue cq is inactive: it uses")


def test_kueues_kubeflow_examples_are_simulated_as_the_controller_runs_them():
    """Each Kubeflow example, unchanged, with Kueue's single ClusterQueue (9 cpu): podSets as
    Kueue names them, admitted while the quota lasts, each one after another finishes."""
    examples = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples"
    # Kubeflow's (sample-job.yaml and sample-scalable-job.yaml are batch Jobs: the MultiKueue
    # guide's and the elastic jobs' example).
    batch = {"sample-job.yaml", "sample-scalable-job.yaml"}
    jobs = sorted(p for p in (examples / "jobs").glob("sample-*job.yaml") if p.name not in batch)
    done = simulate(examples / "single-clusterqueue-setup.yaml", *jobs, "-o", "json")
    assert done.returncode == 0, done.stderr
    events = json.loads(done.stdout)["events"]
    admitted = {e["name"]: e for e in events if e["event"] == "Admitted"}
    assert {e["kind"] for e in admitted.values()} == {
        "MPIJob", "PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob"
    }  # fmt: skip
    assert sorted(admitted["pi"]["flavors"]) == ["launcher", "worker"]
    assert sorted(admitted["tensorflow-dist-mnist"]["flavors"]) == ["ps", "worker"]
    assert len([e for e in events if e["event"] == "Finished"]) == 6


def test_a_waiting_job_of_several_pod_sets_names_them_once(tmp_path):
    """Four copies of Kueue's MPIJob example (3 cpu each) in 9 cpu: the fourth waits, and its
    message names its pod sets once, before what each needs."""
    examples = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples"
    example = yamlc.safe_load((examples / "jobs" / "sample-mpijob.yaml").read_text())
    copies = []
    for i in range(4):
        copy_of = json.loads(json.dumps(example))
        copy_of["metadata"]["name"] = f"pi-{i}"
        copies.append(copy_of)
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(yaml.safe_dump_all(copies))
    done = simulate(examples / "single-clusterqueue-setup.yaml", jobs, "-o", "json")
    assert done.returncode == 0, done.stderr
    [message] = [e["message"] for e in json.loads(done.stdout)["events"] if e["event"] == "Pending"]
    assert message.startswith("pod sets launcher, worker: needs 1 cpu in flavor default-flavor")
    assert message.count("pod sets") == 1, message


def test_appwrappers_and_a_trainjob_with_its_runtime_are_simulated(tmp_path):
    """Kueue's AppWrapper samples and a TrainJob on trainer's torch runtime, read as the
    controller reads them: the runtime is taken from the files, its podSets rendered."""
    examples = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples"
    runtime = ROOT / "tests" / "data" / "trainer" / "runtimes" / "torch_distributed.yaml"
    train = tmp_path / "train.yaml"
    train.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n"
        "metadata: {name: train, labels: {kueue.x-k8s.io/queue-name: user-queue}}\n"
        "spec:\n  runtimeRef: {name: torch-distributed}\n"
        "  trainer: {numNodes: 2, resourcesPerNode: {requests: {cpu: '2'}}}\n"
    )
    wrappers = [examples / "appwrapper" / f"{s}-sample.yaml" for s in ("pytorch", "deployment")]
    args = [examples / "single-clusterqueue-setup.yaml", runtime, train, *wrappers]
    done = simulate(*args, "-o", "json")
    assert done.returncode == 0, done.stderr
    admitted = {e["name"]: e for e in json.loads(done.stdout)["events"] if e["event"] == "Admitted"}
    assert sorted(admitted["train"]["flavors"]) == ["node"]
    assert sorted(admitted["sample-appwrapper-pytorch-job"]["flavors"]) == [
        "sample-appwrapper-pytorch-job-0",
        "sample-appwrapper-pytorch-job-1",
    ]
    assert admitted["sample-appwrapper-deployment"]["kind"] == "AppWrapper"

    # Without its runtime, the TrainJob cannot be read: one line naming it.
    done = simulate(examples / "single-clusterqueue-setup.yaml", train)
    assert done.returncode == 2
    assert done.stderr.strip().endswith(
        "(TrainJob/train): spec.runtimeRef: ClusterTrainingRuntime torch-distributed does not "
        "exist: the TrainJob is queued once it is created"
    ), done.stderr


def test_kueues_pod_and_deployment_examples_are_simulated(tmp_path):
    """Kueue's plain pod (3 cpu) and its sample Deployment (3 replicas of 100m): each pod is
    its own Workload, the Deployment's named after it and numbered, as its ReplicaSet would."""
    examples = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples"
    done = simulate(
        examples / "single-clusterqueue-setup.yaml",
        examples / "pods" / "kueue-pod.yaml",
        examples / "serving" / "sample-deployment.yaml",
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    admitted = [e for e in json.loads(done.stdout)["events"] if e["event"] == "Admitted"]
    assert sorted((e["kind"], e["name"]) for e in admitted if "nginx" in e["name"]) == [
        ("Pod", f"nginx-deployment-{i}") for i in range(3)
    ]
    assert [e["kind"] for e in admitted if e["name"].startswith("kueue-sleep-")] == ["Pod"]


def test_kueues_pod_group_statefulset_and_leaderworkerset_are_simulated(tmp_path):
    """Each group is one Workload, as the controller makes them: Kueue's pod group (two pods of
    one shape: one podSet of 2), its sample StatefulSet (main × 3) and LeaderWorkerSet (one
    Workload per group: leader × 1, worker × 2). A group short of members is said, not run."""
    examples = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples"
    done = simulate(
        examples / "single-clusterqueue-setup.yaml",
        examples / "pods" / "kueue-pod-group.yaml",
        examples / "serving" / "sample-statefulset.yaml",
        examples / "serving" / "sample-leaderworkerset.yaml",
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    events = json.loads(done.stdout)["events"]
    admitted = sorted(
        (e["kind"], e["name"].rsplit("-", 1)[0]) for e in events if e["event"] == "Admitted"
    )
    assert admitted == [
        ("LeaderWorkerSet", "leaderworkerset-nginx-leaderworkerset-0"),
        ("LeaderWorkerSet", "leaderworkerset-nginx-leaderworkerset-1"),
        ("PodGroup", "sample"),
        ("StatefulSet", "statefulset-nginx-statefulset"),
    ]
    [leader] = [
        p
        for p in (examples / "pods" / "kueue-pod-group.yaml").read_text().split("---")
        if "leader" in p
    ]
    half = tmp_path / "half-group.yaml"
    half.write_text(leader)
    short = simulate(examples / "single-clusterqueue-setup.yaml", half)
    assert short.returncode == 0, short.stderr
    assert "pod group default/sample-group has 1 of its 2 pods" in short.stdout

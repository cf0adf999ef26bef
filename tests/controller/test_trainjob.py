"""Kueue's TrainJob example with its ClusterTrainingRuntime, applied unchanged with Kubeflow
Trainer's CRDs (v2.2.1): suspended at create, one podSet rendered from the runtime, started
with the flavor's nodeSelector in Kueue's runtime patch, waiting with a reason when the quota
is gone, finished from trainer's Complete condition. A TrainJob whose runtime is missing waits
until it is created; Kueue's custom-runtime example is refused with a reason. Trainer does
not run here: the test sets the status it would."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from extender.core.jobframework import registry
from extender.core.jobframework.trainer import MANAGER
from extender.kube.api import resources as r
from tests import yamlc
from tests.controller.conftest import CRDS, eventually
from tests.controller.test_kubectl_tower import tower
from tests.controller.test_kubeflow import condition, load
from tests.waiting import until_one_waits

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"
TRAINJOBS = r.resource_of(registry.ADAPTERS["trainer.kubeflow.org/trainjob"])
CLUSTER_RUNTIMES = r.Resource(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", False
)
RUNTIMES = r.Resource(
    "trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime", True
)
GPU = "nvidia.com/gpu"


def setup(cluster: Any, gpus: str = "2") -> None:
    for crd in ("trainjobs", "trainingruntimes", "clustertrainingruntimes"):
        path = DATA / "trainer" / f"trainer.kubeflow.org_{crd}.yaml"
        cluster.admin.create(CRDS, yamlc.safe_load(path.read_text()))
    flavor, queue, local_queue = load(EXAMPLES / "single-clusterqueue-setup.yaml")
    flavor["spec"] = {"nodeLabels": {"instance-type": "spot"}}
    group = queue["spec"]["resourceGroups"][0]
    group["coveredResources"].append(GPU)
    group["flavors"][0]["resources"].append({"name": GPU, "nominalQuota": gpus})
    cluster.apply(flavor, queue, local_queue)


def warning(cluster: Any, namespace: str, reason: str) -> str | None:
    """The message of the first Event of this reason in the namespace."""
    for event in cluster.api.list("events", namespace):
        if event.get("reason") == reason:
            return str(event.get("message"))
    return None


def kueues_patch(job: dict[str, Any]) -> dict[str, Any]:
    [ours] = [p for p in job["spec"].get("runtimePatches") or [] if p["manager"] == MANAGER]
    return ours


def started(cluster: Any, name: str, namespace: str = "default") -> dict[str, Any] | None:
    job = cluster.get("trainjobs", name, namespace)
    return job if job is not None and job["spec"].get("suspend") is False else None


def test_kueues_trainjob_example_runs_as_kueue_documents(cluster, start_controller):
    setup(cluster)
    [runtime] = load(EXAMPLES / "trainjob" / "clustertrainingruntime-torch-distributed.yaml")
    cluster.admin.create(CLUSTER_RUNTIMES, runtime)
    start_controller()  # Kueue's default set has trainer.kubeflow.org/trainjob
    [example] = load(EXAMPLES / "trainjob" / "trainjob-pytorch-distributed.yaml")

    # "Kueue will set suspend to true via webhook and unsuspend it when admitted."
    created = cluster.admin.create(TRAINJOBS, example, "default")
    assert created["spec"]["suspend"] is True
    workload = eventually(lambda: cluster.workload_of(created), what="its Workload")
    [node] = workload["spec"]["podSets"]
    assert (node["name"], node["count"]) == ("node", 2)
    [container] = node["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "4", "memory": "8Gi", GPU: "1"}
    running = eventually(lambda: started(cluster, "pytorch-distributed"), what="it started")
    [rjob] = kueues_patch(running)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert rjob["name"] == "node"
    pod = rjob["template"]["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {"instance-type": "spot"}
    assert pod["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "node"

    def another(i: int) -> dict[str, Any]:
        again = copy.deepcopy(example)
        again["metadata"]["name"] = f"pytorch-distributed-{i}"
        return cluster.admin.create(TRAINJOBS, again, "default")

    made, message = until_one_waits(another, cluster.workload_of)
    assert f"{GPU} in flavor default-flavor" in message, message
    waiting = made["metadata"]["name"]
    kept = cluster.admin.patch(TRAINJOBS, waiting, {"spec": {"suspend": False}}, "default")
    assert kept["spec"]["suspend"] is True
    said = tower(cluster, "why", waiting, "-n", "default", "-o", "json")
    assert said.returncode == 0, said.stderr
    answer = json.loads(said.stdout)
    assert (answer["kind"], answer["state"]) == ("TrainJob", "Pending")

    # Trainer copies its JobSet's Completed as Complete: the Workload finishes, the next runs.
    complete = {
        "type": "Complete",
        "status": "True",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
        "lastTransitionTime": "2026-12-01T00:00:00Z",
    }
    cluster.admin.patch(
        TRAINJOBS,
        "pytorch-distributed",
        {"status": {"conditions": [complete]}},
        "default",
        subresource="status",
    )
    finished = eventually(
        lambda: (
            condition(cluster.workload_of(created), "Finished").get("status") == "True"
            and cluster.workload_of(created)
        ),
        what="the Workload Finished",
    )
    assert condition(finished, "Finished")["message"] == "jobset completed successfully"
    eventually(lambda: started(cluster, waiting), what="the waiting copy started")


def test_a_trainjob_waits_for_its_runtime_then_is_admitted(cluster, start_controller):
    setup(cluster)
    running = start_controller()
    [example] = load(EXAMPLES / "trainjob" / "trainjob-pytorch-distributed.yaml")
    created = cluster.admin.create(TRAINJOBS, example, "default")
    assert created["spec"]["suspend"] is True

    message = eventually(
        lambda: warning(cluster, "default", "ReferenceMissing"),
        what="the Warning that its runtime is missing",
    )
    assert message == (
        "spec.runtimeRef: ClusterTrainingRuntime torch-distributed does not exist: the TrainJob "
        "is queued once it is created"
    )
    assert cluster.workload_of(created) is None
    [runtime] = load(EXAMPLES / "trainjob" / "clustertrainingruntime-torch-distributed.yaml")
    cluster.admin.create(CLUSTER_RUNTIMES, runtime)
    eventually(lambda: started(cluster, "pytorch-distributed"), 20, "it started")
    assert running is not None


def test_kueues_custom_runtime_example_is_refused_with_a_reason(cluster, start_controller):
    """Kueue's TrainingRuntime example names its trainer container `trainer`, not `node`:
    trainer's own webhook refuses such a runtime, and Kueue would queue the TrainJob asking
    for no resources at all. Tower keeps it suspended and says why."""
    setup(cluster)
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    [runtime] = load(EXAMPLES / "trainjob" / "trainingruntime-torch-custom.yaml")
    cluster.admin.create(RUNTIMES, runtime, "team-a")
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "team-a-queue", "namespace": "team-a"},
            "spec": {"clusterQueue": "cluster-queue"},
        }
    )
    start_controller()
    [example] = load(EXAMPLES / "trainjob" / "trainjob-pytorch-custom.yaml")
    created = cluster.admin.create(TRAINJOBS, example, "team-a")
    assert created["spec"]["suspend"] is True

    message = eventually(
        lambda: warning(cluster, "team-a", "InvalidSpec"),
        what="the Warning that says why it is not queued",
    )
    assert message.startswith("spec.trainer.image: reaches no pod: the replicatedJob 'node' of ")
    assert "TrainingRuntime team-a/torch-custom has no container named 'node'" in message
    assert cluster.workload_of(created) is None
    assert cluster.get("trainjobs", "pytorch-custom", "team-a")["spec"]["suspend"] is True

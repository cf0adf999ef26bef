"""Kueue's TrainJob and AppWrapper examples on a real kube-apiserver, with Kubeflow Trainer's
(v2.2.1) and the appwrapper's CRDs (tests/data/trainer/, tests/data/appwrapper/): each is
suspended at create by the webhook, gets Kueue's podSets, starts with the flavor's
nodeSelector where Kueue writes it (Kueue's runtime patch, the components' podSetInfos),
waits with a reason when the quota is gone, and is Finished from its status. Neither operator
runs here: the test sets the status it would."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from extender.core.jobframework.trainer import MANAGER
from tests import yamlc
from tests.e2e.conftest import (
    controller_process,
    kubectl,
    serve_webhook,
    wait,
    webhook_host_port,
)
from tests.e2e.test_kubeflow_cluster import condition, workload_of
from tests.waiting import until_one_waits

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"
GPU = "nvidia.com/gpu"
NOW = "2026-12-01T00:00:00Z"
TRAINER = ("trainer.kubeflow.org", "v1alpha1", "default", "trainjobs")
APPWRAPPERS = ("workload.codeflare.dev", "v1beta2", "default", "appwrappers")


def setup_objects() -> list[dict[str, Any]]:
    """Kueue's single ClusterQueue, its flavor with a node label, and 2 GPUs of quota (Kueue's
    TrainJob example asks for one per node)."""
    flavor, queue, local_queue = [
        d for d in yamlc.safe_load_all((EXAMPLES / "single-clusterqueue-setup.yaml").read_text())
    ]
    flavor["spec"] = {"nodeLabels": {"instance-type": "spot"}}
    group = queue["spec"]["resourceGroups"][0]
    group["coveredResources"].append(GPU)
    group["flavors"][0]["resources"].append({"name": GPU, "nominalQuota": "2"})
    return [flavor, queue, local_queue]


@pytest.fixture(scope="module")
def tower(tmp_path_factory, api_client):
    webhook_host_port()  # skips, with the reason, where no URL reaches this machine
    tmp = tmp_path_factory.mktemp("trainer-appwrapper")
    crds = [
        *sorted((DATA / "trainer").glob("*.yaml")),
        *sorted((DATA / "appwrapper").glob("*.yaml")),
    ]
    for crd in crds:
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    setup = tmp / "setup.yaml"
    setup.write_text(yaml.safe_dump_all(setup_objects()))
    kubectl("apply", "-f", str(setup))
    controller = controller_process("--physical-resources", "none")  # Kueue's default set
    yield client.CustomObjectsApi(api_client)
    controller.terminate()
    controller.wait(timeout=30)
    webhook.terminate()
    webhook.wait(timeout=20)
    for kind in ("trainjobs.trainer.kubeflow.org", "appwrappers.workload.codeflare.dev"):
        kubectl("delete", kind, "--all", "-n", "default", check=False)
    kubectl("delete", "clustertrainingruntimes.trainer.kubeflow.org", "--all", check=False)
    kubectl("delete", "-f", str(setup), check=False)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


def no_workloads_left(api: client.CustomObjectsApi) -> bool:
    listed = api.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "workloads")
    return not listed["items"]


def test_kueues_trainjob_example_on_a_real_api_server(tower):
    api = tower
    runtime = EXAMPLES / "trainjob" / "clustertrainingruntime-torch-distributed.yaml"
    # Kueue's runtime sets mlPolicy.torch.numProcPerNode, which trainer v2.2.1 removed: kubectl
    # refuses it; without client validation the field is dropped and it is stored.
    refused = kubectl("apply", "-f", str(runtime), check=False)
    assert 'unknown field "spec.mlPolicy.torch.numProcPerNode"' in refused, refused
    kubectl("apply", "--validate=false", "-f", str(runtime))

    example = EXAMPLES / "trainjob" / "trainjob-pytorch-distributed.yaml"
    kubectl("create", "-f", str(example))
    created = api.get_namespaced_custom_object(*TRAINER, "pytorch-distributed")
    assert created["spec"]["suspend"] is True  # the webhook's
    workload = wait(lambda: workload_of(api, created), what="the TrainJob's Workload")
    [node] = workload["spec"]["podSets"]
    assert (node["name"], node["count"]) == ("node", 2)
    assert node["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "4",
        "memory": "8Gi",
        GPU: "1",
    }
    running = wait(
        lambda: (
            (job := api.get_namespaced_custom_object(*TRAINER, "pytorch-distributed"))["spec"][
                "suspend"
            ]
            is False
            and job
        ),
        what="the TrainJob started",
    )
    [ours] = [p for p in running["spec"]["runtimePatches"] if p["manager"] == MANAGER]
    [rjob] = ours["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]
    assert (rjob["name"], pod["spec"]["nodeSelector"]) == ("node", {"instance-type": "spot"})

    body = yamlc.safe_load(example.read_text())

    def another(i: int) -> dict[str, Any]:
        again = copy.deepcopy(body)
        again["metadata"]["name"] = f"pytorch-distributed-{i}"
        return api.create_namespaced_custom_object(*TRAINER, again)

    made, message = until_one_waits(another, lambda job: workload_of(api, job), timeout=180)
    assert f"{GPU} in flavor default-flavor" in message, message

    complete = {
        "type": "Complete",
        "status": "True",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
        "lastTransitionTime": NOW,
    }
    kubectl(
        "patch", "trainjobs.trainer.kubeflow.org", "pytorch-distributed", "-n", "default",
        "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": {"conditions": [complete]}}),
    )  # fmt: skip
    finished = wait(
        lambda: (
            condition(workload_of(api, created), "Finished").get("status") == "True"
            and workload_of(api, created)
        ),
        what="the TrainJob's Workload Finished",
    )
    assert condition(finished, "Finished")["message"] == "jobset completed successfully"
    wait(
        lambda: (
            api.get_namespaced_custom_object(*TRAINER, made["metadata"]["name"])["spec"]["suspend"]
            is False
        ),
        what="the waiting copy started once the quota came back",
    )
    kubectl("delete", "trainjobs.trainer.kubeflow.org", "--all", "-n", "default", "--wait=true")
    wait(lambda: no_workloads_left(api), what="the Workloads gone with their TrainJobs")


def deployed(name: str, phase: str, resources: bool) -> None:
    """The status the appwrapper controller writes as it deploys or removes the components."""
    status = "True" if resources else "False"
    conditions = [
        {"type": t, "status": status, "reason": "Test", "message": "", "lastTransitionTime": NOW}
        for t in ("QuotaReserved", "ResourcesDeployed")
    ]
    kubectl(
        "patch", "appwrappers.workload.codeflare.dev", name, "-n", "default",
        "--subresource=status", "--type=merge", "-p",
        json.dumps({"status": {"phase": phase, "conditions": conditions}}),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("sample", "pod_sets"),
    [
        (
            "pytorch",
            [("sample-appwrapper-pytorch-job-0", 1), ("sample-appwrapper-pytorch-job-1", 1)],
        ),
        ("deployment", [("sample-appwrapper-deployment-0", 3)]),
    ],
)
def test_kueues_appwrapper_sample_on_a_real_api_server(tower, sample, pod_sets):
    api = tower
    path = EXAMPLES / "appwrapper" / f"{sample}-sample.yaml"
    body = yamlc.safe_load(path.read_text())
    name = body["metadata"]["name"]
    kubectl("create", "-f", str(path))
    created = api.get_namespaced_custom_object(*APPWRAPPERS, name)
    assert created["spec"]["suspend"] is True  # the webhook's
    workload = wait(lambda: workload_of(api, created), what="the AppWrapper's Workload")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == pod_sets
    running = wait(
        lambda: (
            (aw := api.get_namespaced_custom_object(*APPWRAPPERS, name))["spec"]["suspend"] is False
            and aw
        ),
        what="the AppWrapper started",
    )
    [component] = running["spec"]["components"]
    assert [i["nodeSelector"] for i in component["podSetInfos"]] == [
        {"instance-type": "spot"}
    ] * len(pod_sets)
    deployed(name, "Running", True)

    def another(i: int) -> dict[str, Any]:
        again = copy.deepcopy(body)
        again["metadata"]["name"] = f"{name}-{i}"
        return api.create_namespaced_custom_object(*APPWRAPPERS, again)

    made, message = until_one_waits(
        another, lambda job: workload_of(api, job), most=40, timeout=180
    )
    assert "free in cluster-queue" in message, message

    deployed(name, "Succeeded", False)
    finished = wait(
        lambda: (
            condition(workload_of(api, created), "Finished").get("status") == "True"
            and workload_of(api, created)
        ),
        what="the AppWrapper's Workload Finished",
    )
    assert condition(finished, "Finished")["message"] == "AppWrapper finished successfully"
    wait(
        lambda: (
            api.get_namespaced_custom_object(*APPWRAPPERS, made["metadata"]["name"])["spec"][
                "suspend"
            ]
            is False
        ),
        what="the waiting copy started once the quota came back",
    )
    kubectl("delete", "appwrappers.workload.codeflare.dev", "--all", "-n", "default", "--wait=true")
    wait(lambda: no_workloads_left(api), what="the Workloads gone with their AppWrappers")

"""Kueue's Ray examples on a real kube-apiserver, with KubeRay's CRDs (tests/data/kuberay/): each
kind is suspended at create by the webhook, gets Kueue's podSets, starts with the flavor's
nodeSelector, waits with a reason when the quota is gone; a RayJob is Finished from its status, a
RayCluster and a RayService hold their quota until deleted. KubeRay does not run here: the test
sets the status it would."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

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

# example, plural, Kueue's podSets
KINDS = [
    ("ray-job-sample", "rayjobs", [("head", 1), ("small-group", 1), ("submitter", 1)]),
    ("ray-cluster-sample", "rayclusters", [("head", 1), ("small-group", 1)]),
    ("ray-service-sample", "rayservices", [("head", 1), ("small-group", 1)]),
]


def suspended(obj: dict[str, Any]) -> bool:
    spec = obj["spec"]
    if "rayClusterConfig" in spec:
        return spec["rayClusterConfig"].get("suspend") is True
    return spec.get("suspend") is True


def cluster_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    return spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or spec


@pytest.fixture(scope="module")
def tower(tmp_path_factory, api_client):
    webhook_host_port()  # skips, with the reason, where no URL reaches this machine
    tmp = tmp_path_factory.mktemp("ray")
    for crd in sorted((DATA / "kuberay").glob("*.yaml")):
        # Server-side: the CRDs are larger than client-side apply's annotation allows.
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    kubectl("apply", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"))
    kubectl(
        "patch",
        "resourceflavor",
        "default-flavor",
        "--type=merge",
        "-p",
        '{"spec":{"nodeLabels":{"instance-type":"spot"}}}',
    )
    controller = controller_process("--physical-resources", "none")  # Kueue's default set
    yield client.CustomObjectsApi(api_client)
    controller.terminate()
    controller.wait(timeout=30)
    webhook.terminate()
    webhook.wait(timeout=20)
    for _, plural, _ in KINDS:
        kubectl("delete", f"{plural}.ray.io", "--all", "-n", "default", check=False)
    kubectl("delete", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"), check=False)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


@pytest.mark.parametrize(("sample", "plural", "pod_sets"), KINDS)
def test_kueues_example_on_a_real_api_server(tower, sample, plural, pod_sets):
    api = tower
    example = yamlc.safe_load((EXAMPLES / "ray" / f"{sample}.yaml").read_text())
    name, kind = example["metadata"]["name"], example["kind"]
    args = ("ray.io", "v1", "default", plural)

    created = api.create_namespaced_custom_object(*args, example)
    assert suspended(created)  # the webhook's
    workload = wait(lambda: workload_of(api, created), what=f"the {kind}'s Workload")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == pod_sets
    running = wait(
        lambda: (
            (job := api.get_namespaced_custom_object(*args, name)) and not suspended(job) and job
        ),
        what=f"the {kind} started",
    )
    spec = cluster_spec(running)
    templates = [spec["headGroupSpec"]["template"]] + [
        g["template"] for g in spec["workerGroupSpecs"]
    ]
    if "submitterPodTemplate" in running["spec"]:
        templates.append(running["spec"]["submitterPodTemplate"])
    assert len(templates) == len(pod_sets)
    for template in templates:
        assert template["spec"]["nodeSelector"] == {"instance-type": "spot"}

    def another(i: int) -> dict[str, Any]:
        again = copy.deepcopy(example)
        again["metadata"]["name"] = f"{name}-{i}"
        return api.create_namespaced_custom_object(*args, again)

    made, message = until_one_waits(another, lambda job: workload_of(api, job), timeout=180)
    assert "free in cluster-queue" in message, message

    if kind == "RayJob":
        status = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "done"}
        kubectl(
            "patch", f"{plural}.ray.io", name, "-n", "default", "--subresource=status",
            "--type=merge", "-p", json.dumps({"status": status}),
        )  # fmt: skip
        finished = wait(
            lambda: (
                condition(workload_of(api, created), "Finished").get("status") == "True"
                and workload_of(api, created)
            ),
            what="the RayJob's Workload Finished",
        )
        assert condition(finished, "Finished")["message"] == "done"
    else:
        kubectl("delete", f"{plural}.ray.io", name, "-n", "default")
    wait(
        lambda: not suspended(api.get_namespaced_custom_object(*args, made["metadata"]["name"])),
        what="the waiting copy started once the quota came back",
    )
    kubectl("delete", f"{plural}.ray.io", "--all", "-n", "default", "--wait=true")
    wait(
        lambda: (
            not api.list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", "default", "workloads"
            )["items"]
        ),
        what="the Workloads gone with their jobs",
    )

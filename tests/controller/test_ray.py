"""Kueue's Ray examples (RayJob, RayCluster, RayService), each applied unchanged with KubeRay's
CRD and Kueue's single-ClusterQueue setup: suspended at create, Kueue's podSets, started on the
flavor's nodes, waiting with a reason when the quota is gone; a RayJob finishes from its status,
a RayCluster and a RayService hold their quota until deleted. KubeRay does not run here: the
test sets the status it would."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from extender.core.jobframework import registry
from extender.kube.api import resources as r
from tests import yamlc
from tests.controller.conftest import CRDS, eventually
from tests.controller.test_kubeflow import condition, load
from tests.waiting import until_one_waits

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"

# example, CRD, framework, Kueue's podSets, how its templates are found
KINDS = [
    (
        "ray-job-sample",
        "rayjobs",
        "ray.io/rayjob",
        [("head", 1), ("small-group", 1), ("submitter", 1)],
    ),
    ("ray-cluster-sample", "rayclusters", "ray.io/raycluster", [("head", 1), ("small-group", 1)]),
    ("ray-service-sample", "rayservices", "ray.io/rayservice", [("head", 1), ("small-group", 1)]),
]


def cluster_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec = obj["spec"]
    return spec.get("rayClusterSpec") or spec.get("rayClusterConfig") or spec


def suspended(obj: dict[str, Any]) -> bool:
    spec = obj["spec"]
    if "rayClusterConfig" in spec:
        return spec["rayClusterConfig"].get("suspend") is True
    return spec.get("suspend") is True


@pytest.mark.parametrize(("sample", "crd", "framework", "pod_sets"), KINDS)
def test_kueues_example_runs_as_kueue_documents(
    cluster, start_controller, sample, crd, framework, pod_sets
):
    cluster.admin.create(
        CRDS, yamlc.safe_load((DATA / "kuberay" / f"ray.io_{crd}.yaml").read_text())
    )
    cluster.apply(*load(EXAMPLES / "single-clusterqueue-setup.yaml"))
    cluster.admin.patch(
        r.RESOURCE_FLAVORS, "default-flavor", {"spec": {"nodeLabels": {"instance-type": "spot"}}}
    )
    start_controller()  # Kueue's default set: the three Ray kinds are on
    adapter = registry.ADAPTERS[framework]
    resource = r.resource_of(adapter)
    [example] = load(EXAMPLES / "ray" / f"{sample}.yaml")
    name = example["metadata"]["name"]

    # "Kueue controls the suspend field": set at create, cleared when admitted.
    created = cluster.admin.create(resource, example, "default")
    assert suspended(created)
    workload = eventually(lambda: cluster.workload_of(created), what="its Workload")
    assert [(p["name"], p["count"]) for p in workload["spec"]["podSets"]] == pod_sets
    running = eventually(
        lambda: (
            (job := cluster.get(resource.plural, name, "default")) and not suspended(job) and job
        ),
        what=f"the {adapter.kind} started",
    )
    spec = cluster_spec(running)
    templates = [spec["headGroupSpec"]["template"]] + [
        g["template"] for g in spec["workerGroupSpecs"]
    ]
    if "submitterPodTemplate" in running["spec"]:
        templates.append(running["spec"]["submitterPodTemplate"])  # written, as Kueue writes it
    assert len(templates) == len(pod_sets)
    for template in templates:
        assert template["spec"]["nodeSelector"] == {"instance-type": "spot"}

    # Copies until one finds the quota gone: it waits, and says why.
    def another(i: int) -> dict[str, Any]:
        again = copy.deepcopy(example)
        again["metadata"]["name"] = f"{name}-{i}"
        return cluster.admin.create(resource, again, "default")

    made, message = until_one_waits(another, cluster.workload_of)
    assert "free in cluster-queue" in message, message
    assert suspended(cluster.get(resource.plural, made["metadata"]["name"], "default"))

    if adapter.kind == "RayJob":
        # KubeRay says the job succeeded: the Workload is Finished with its message.
        status = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "done"}
        cluster.admin.patch(resource, name, {"status": status}, "default", subresource="status")
        finished = eventually(
            lambda: (
                condition(cluster.workload_of(created), "Finished").get("status") == "True"
                and cluster.workload_of(created)
            ),
            what="the RayJob's Workload Finished",
        )
        assert condition(finished, "Finished")["message"] == "done"
    else:
        # A cluster or a service holds its quota while it exists: deleting it gives it back.
        cluster.admin.delete(resource, name, "default", propagation="Background")
    eventually(
        lambda: not suspended(cluster.get(resource.plural, made["metadata"]["name"], "default")),
        what="the waiting copy started once the quota came back",
    )


def test_the_cluster_a_rayjob_makes_is_not_queued_again(cluster, start_controller):
    """KubeRay makes a RayJob's RayCluster, owned by it: the RayJob holds the quota, so the
    cluster is neither suspended nor given a Workload of its own."""
    for crd in ("rayjobs", "rayclusters"):
        cluster.admin.create(
            CRDS, yamlc.safe_load((DATA / "kuberay" / f"ray.io_{crd}.yaml").read_text())
        )
    cluster.apply(*load(EXAMPLES / "single-clusterqueue-setup.yaml"))
    start_controller()
    [job] = load(EXAMPLES / "ray" / "ray-job-sample.yaml")
    rayjobs = r.resource_of(registry.ADAPTERS["ray.io/rayjob"])
    created = cluster.admin.create(rayjobs, job, "default")
    eventually(
        lambda: cluster.get("rayjobs", "rayjob-sample", "default")["spec"]["suspend"] is False
    )
    made = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": "rayjob-sample-raycluster",
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": "RayJob",
                    "name": "rayjob-sample",
                    "uid": created["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": copy.deepcopy(job["spec"]["rayClusterSpec"]),
    }
    rayclusters = r.resource_of(registry.ADAPTERS["ray.io/raycluster"])
    child = cluster.admin.create(rayclusters, made, "default")
    assert child["spec"].get("suspend") in (None, False)
    later = cluster.job("later", "1")
    eventually(lambda: cluster.get("jobs", "later", "default")["spec"]["suspend"] is False)
    assert cluster.workload_of(child) is None
    assert cluster.workload_of(later) is not None

"""An autoscaling RayJob or RayService follows the RayCluster KubeRay's autoscaler scales, as
Kueue v0.19.2 does (raycluster.UpdatePodSets, GetWorkloadslicingRayClusterCustomAnnotations):
its slices take the cluster's worker counts, the job carries Kueue's replica-sizes and
cluster-generation annotations, and each scale-up's slice is named with the cluster's
generation. KubeRay does not run on the API double: the test makes the cluster and scales it.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from extender.core.jobframework import registry
from extender.kube.api import resources as r
from tests.controller.conftest import eventually
from tests.controller.test_elastic import EXAMPLES, counts, ray_crd, slices_of, status_of
from tests.controller.test_kubeflow import load
from tests.controller.test_preemption import cluster_queue, flavor, local_queue

SIZES = "kueue.x-k8s.io/raycluster-podset-replica-sizes"
GENERATION = "kueue.x-k8s.io/raycluster-generation"


def played_cluster(cluster: Any, job: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """The RayCluster KubeRay makes for a started job: its spec, owned by it."""
    rayclusters = r.resource_of(registry.ADAPTERS["ray.io/raycluster"])
    meta = job["metadata"]
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": f"{meta['name']}-abcde",
            "labels": {**meta["labels"], "ray.io/originated-from-crd": job["kind"]},
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "ray.io/v1",
                    "kind": job["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": copy.deepcopy(spec),
    }
    return dict(cluster.admin.create(rayclusters, body, "default"))


def test_an_autoscaling_rayjob_takes_its_clusters_counts_in_named_slices(cluster, start_controller):
    for plural in ("rayjobs", "rayclusters"):
        ray_crd(cluster, plural)
    cluster.apply(flavor("pool-a"), cluster_queue("cq", "8"), local_queue("user-queue", "cq"))
    cluster.admin.patch(r.CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": "pool-a", "resources": [
            {"name": "cpu", "nominalQuota": "16"}, {"name": "memory", "nominalQuota": "64Gi"}]}],
    }]}})  # fmt: skip
    start_controller()
    [sample] = load(EXAMPLES / "ray" / "ray-job-autoscaling-sample.yaml")
    rayjobs = r.resource_of(registry.ADAPTERS["ray.io/rayjob"])
    job = cluster.admin.create(rayjobs, sample, "default")
    name = job["metadata"]["name"]
    first = eventually(
        lambda: [w for w in slices_of(cluster, job) if status_of(w, "Admitted") == "True"],
        what="the RayJob's first slice admitted",
    )[0]
    started = eventually(
        lambda: (
            (j := cluster.get("rayjobs", name, "default"))["spec"].get("suspend") is False and j
        ),
        what="the RayJob started",
    )
    group = started["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    pod_set = group["groupName"].lower()
    was = counts(first)[pod_set]
    made = played_cluster(cluster, started, started["spec"]["rayClusterSpec"])
    cluster.admin.patch(rayjobs, name, {"status": {"rayClusterName": made["metadata"]["name"],
                        "jobDeploymentStatus": "Running"}}, "default", subresource="status")  # fmt: skip

    rayclusters = r.resource_of(registry.ADAPTERS["ray.io/raycluster"])
    groups = copy.deepcopy(made["spec"]["workerGroupSpecs"])
    groups[0]["replicas"] = was + 2  # Ray's autoscaler asks for two more workers
    scaled = cluster.admin.patch(
        rayclusters, made["metadata"]["name"], {"spec": {"workerGroupSpecs": groups}}, "default"
    )
    eventually(
        lambda: status_of(cluster.get("workloads", first["metadata"]["name"], "default"),
                          "Finished") == "True",
        timeout=30, what="the first slice replaced by one at the cluster's size",
    )  # fmt: skip
    [now] = [w for w in slices_of(cluster, job) if status_of(w, "Finished") != "True"]
    assert counts(now)[pod_set] == was + 2
    assert status_of(now, "Admitted") == "True"
    assert now["metadata"]["name"] != first["metadata"]["name"]
    annotations = cluster.get("rayjobs", name, "default")["metadata"]["annotations"]
    assert annotations[GENERATION] == str(scaled["metadata"]["generation"])
    sizes = {e["name"]: e["count"] for e in json.loads(annotations[SIZES])}
    assert sizes == {**counts(first), pod_set: was + 2}

    groups[0]["replicas"] = was  # idle workers go: the same slice, in place
    cluster.admin.patch(
        rayclusters, made["metadata"]["name"], {"spec": {"workerGroupSpecs": groups}}, "default"
    )
    eventually(lambda: counts(cluster.get("workloads", now["metadata"]["name"], "default"))[
        pod_set] == was, timeout=30, what="scaled down in place")  # fmt: skip

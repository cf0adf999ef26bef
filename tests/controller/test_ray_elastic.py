"""An autoscaling RayJob or RayService follows the RayCluster KubeRay's autoscaler scales, as
Kueue v0.19.2 does (raycluster.UpdatePodSets, GetWorkloadslicingRayClusterCustomAnnotations):
its slices take the cluster's worker counts, the job carries Kueue's replica-sizes and
cluster-generation annotations, and each scale-up's slice is named with the cluster's
generation. KubeRay does not run on the API double: the test makes the cluster and scales it.
"""

from __future__ import annotations

import copy
import json
import time
from typing import Any

import pytest

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


def autoscaling_service() -> dict[str, Any]:
    """Kueue's RayService example, elastic and autoscaling (Kueue v0.19.2 accepts it)."""
    [sample] = load(EXAMPLES / "ray" / "ray-service-sample.yaml")
    sample["metadata"].setdefault("annotations", {})["kueue.x-k8s.io/elastic-job"] = "true"
    sample["spec"]["rayClusterConfig"]["enableInTreeAutoscaling"] = True
    return dict(sample)


def autoscaling_job() -> dict[str, Any]:
    [sample] = load(EXAMPLES / "ray" / "ray-job-autoscaling-sample.yaml")
    return dict(sample)


# kind, its plural, its example, where its cluster's spec is, its status naming the cluster
KINDS = [
    pytest.param("ray.io/rayjob", "rayjobs", autoscaling_job, "rayClusterSpec",
                 lambda name: {"rayClusterName": name, "jobDeploymentStatus": "Running"},
                 id="RayJob"),
    pytest.param("ray.io/rayservice", "rayservices", autoscaling_service, "rayClusterConfig",
                 lambda name: {"activeServiceStatus": {"rayClusterName": name}},
                 id="RayService"),
]  # fmt: skip


@pytest.mark.parametrize(("framework", "plural", "example", "spec_field", "status"), KINDS)
def test_an_autoscaling_ray_job_takes_its_clusters_counts_in_named_slices(
    cluster, start_controller, framework, plural, example, spec_field, status
):
    for crd in (plural, "rayclusters"):
        ray_crd(cluster, crd)
    cluster.apply(flavor("pool-a"), cluster_queue("cq", "8"), local_queue("user-queue", "cq"))
    cluster.admin.patch(r.CLUSTER_QUEUES, "cq", {"spec": {"resourceGroups": [{
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": "pool-a", "resources": [
            {"name": "cpu", "nominalQuota": "16"}, {"name": "memory", "nominalQuota": "64Gi"}]}],
    }]}})  # fmt: skip
    start_controller()
    resource = r.resource_of(registry.ADAPTERS[framework])
    job = cluster.admin.create(resource, example(), "default")
    name = job["metadata"]["name"]
    first = eventually(
        lambda: [w for w in slices_of(cluster, job) if status_of(w, "Admitted") == "True"],
        what="the first slice admitted",
    )[0]

    def started() -> dict[str, Any] | None:
        live = cluster.get(plural, name, "default")
        suspended = live["spec"].get("suspend") or live["spec"][spec_field].get("suspend")
        return None if suspended else live

    live = eventually(started, what="the job started")
    # Before KubeRay made its cluster: Kueue's annotations of the job's own counts, no generation.
    before = live["metadata"]["annotations"]
    assert json.loads(before[SIZES]) == [{"name": n, "count": c} for n, c in counts(first).items()]
    assert before[GENERATION] == ""
    group = live["spec"][spec_field]["workerGroupSpecs"][0]
    pod_set = group["groupName"].lower()
    was = counts(first)[pod_set]
    made = played_cluster(cluster, live, live["spec"][spec_field])
    cluster.admin.patch(resource, name, {"status": status(made["metadata"]["name"])}, "default",
                        subresource="status")  # fmt: skip

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
    annotations = cluster.get(plural, name, "default")["metadata"]["annotations"]
    assert annotations[GENERATION] == str(scaled["metadata"]["generation"])
    sizes = {e["name"]: e["count"] for e in json.loads(annotations[SIZES])}
    assert sizes == {**counts(first), pod_set: was + 2}

    # Every pod the slice grants is there, so nothing looks at the job on a clock: the
    # scale-down below reaches it because a change of its cluster enqueues it (the cluster's
    # view names the job as its parent).
    kind = job["kind"]
    for i in range(sum(counts(now).values())):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{name}-pod-{i}", "labels": {
                   "ray.io/originated-from-crd": kind, "ray.io/originated-from-cr-name": name}},
               "spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.9.0"}]}}  # fmt: skip
        cluster.admin.create(r.PODS, pod, "default")
    path = f"/apis/ray.io/v1/namespaces/default/{plural}/{name}"

    def reads() -> int:
        return sum(1 for m, p, _ in list(cluster.api.requests) if m == "GET" and p == path)

    time.sleep(2.5)  # a look already on its way when the pods came
    before = reads()
    time.sleep(4.5)  # more than two of the 2 s looks of a job that polls its cluster
    assert reads() == before, "the job was read again with nothing changed"

    groups[0]["replicas"] = was  # idle workers go: the same slice, in place
    cluster.admin.patch(
        rayclusters, made["metadata"]["name"], {"spec": {"workerGroupSpecs": groups}}, "default"
    )
    eventually(lambda: counts(cluster.get("workloads", now["metadata"]["name"], "default"))[
        pod_set] == was, timeout=5, what="scaled down in place")  # fmt: skip

"""Physical fit for kinds of several podSets: a RayCluster's GPU head and workers, and an
MPIJob's launcher and GPU workers, are planned per podSet before admission, and kube-scheduler
is sent each pod to its own podSet's nodes."""

from __future__ import annotations

import copy
import json
import signal
from pathlib import Path
from typing import Any

from extender.core.jobframework import registry
from extender.kube.api import resources as r
from tests import yamlc
from tests.controller.conftest import CRDS, controller_process, eventually
from tests.controller.test_placement import (
    FLAVOR,
    GPU,
    LOCAL_QUEUE,
    node,
    pending_message,
    scheduler_filter,
)
from tests.controller.test_placement import QUEUE as PLACEMENT_QUEUE
from tests.servers import free_port

DATA = Path(__file__).resolve().parents[1] / "data"
QUEUE = copy.deepcopy(PLACEMENT_QUEUE)  # test_placement's, with room for 16 GPUs
QUEUE["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = "16"


def pod_template(gpus: int) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": "1"}}
    if gpus:
        resources = {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    return {
        "spec": {
            "containers": [
                {"name": "main", "image": "rayproject/ray:2.41.0", "resources": resources}
            ]
        }
    }


def ray_cluster(name: str, head_gpus: int, workers: int, worker_gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "gpus"}},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": pod_template(head_gpus)},
            "workerGroupSpecs": [
                {
                    "groupName": "gpu-workers",
                    "replicas": workers,
                    "minReplicas": workers,
                    "maxReplicas": workers,
                    "rayStartParams": {},
                    "template": pod_template(worker_gpus),
                }
            ],
        },
    }


def pod_from(owner: dict[str, Any], template: dict[str, Any], name: str) -> dict[str, Any]:
    """A pod as the kind's operator makes it from a started template (labels and all)."""
    meta = template.get("metadata") or {}
    return {
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": owner["apiVersion"],
                    "kind": owner["kind"],
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": template["spec"],
    }


def plan_of(cluster: Any, job: dict[str, Any]) -> dict[str, Any] | None:
    workload = cluster.workload_of(job) or {}
    raw = (workload.get("metadata", {}).get("annotations") or {}).get("tower.dev/placement")
    return json.loads(raw) if raw else None


def started(cluster: Any, plural: str, name: str, path: tuple[str, ...]) -> Any:
    def check() -> Any:
        obj = cluster.get(plural, name, "default")
        value: Any = obj
        for part in path:
            value = (value or {}).get(part)
        return obj if value is False else None

    return eventually(check, 20, f"{plural}/{name} to start")


def test_a_ray_clusters_gpu_head_and_workers_are_planned_per_pod_set(cluster: Any) -> None:
    cluster.admin.create(
        CRDS, yamlc.safe_load((DATA / "kuberay" / "ray.io_rayclusters.yaml").read_text())
    )
    for name, gpus in (("gpu-node-1", 4), ("gpu-node-2", 4), ("gpu-node-3", 2), ("cpu-node", None)):
        cluster.admin.create(r.NODES, node(name, gpus))
    cluster.apply(FLAVOR, QUEUE, LOCAL_QUEUE)
    rayclusters = r.resource_of(registry.ADAPTERS["ray.io/raycluster"])
    port = free_port()
    proc = controller_process(cluster, "--scheduler-extender-address", f"127.0.0.1:{port}")
    try:
        # Quota for 9 GPUs is there, but the workers need 4 on one node each: three workers
        # cannot be placed beside a head of 2 on these nodes, so the cluster waits and says why.
        too_wide = cluster.admin.create(rayclusters, ray_cluster("too-wide", 2, 3, 4), "default")
        message = eventually(lambda: pending_message(cluster, too_wide), 20, "its reason")
        assert message.startswith("pod set gpu-workers: needs 3 pods of 4 nvidia.com/gpu"), message
        cluster.admin.delete(rayclusters, "too-wide", "default")

        # A head of 1 GPU and two workers of 4: each worker gets a node of 4, the head the
        # node of 2.
        made = cluster.admin.create(rayclusters, ray_cluster("train", 1, 2, 4), "default")
        running = started(cluster, "rayclusters", "train", ("spec", "suspend"))
        plan = plan_of(cluster, made)
        assert plan == {
            "head": {"gpu-node-3": 1},
            "gpu-workers": {"gpu-node-1": 1, "gpu-node-2": 1},
        }
        candidates = ["gpu-node-1", "gpu-node-2", "gpu-node-3", "cpu-node"]
        head = pod_from(running, running["spec"]["headGroupSpec"]["template"], "train-head")
        assert scheduler_filter(port, head, candidates)["NodeNames"] == ["gpu-node-3"]
        worker_template = running["spec"]["workerGroupSpecs"][0]["template"]
        worker = pod_from(running, worker_template, "train-gpu-workers-a")
        answer = scheduler_filter(port, worker, candidates)
        assert answer["NodeNames"] == ["gpu-node-1", "gpu-node-2"]
        assert answer["FailedNodes"]["gpu-node-3"] == "planned for other pods of this workload"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def test_an_mpijobs_gpu_workers_are_planned_and_its_launcher_goes_anywhere(cluster: Any) -> None:
    crd = DATA / "kubeflow" / "kubeflow.org_mpijobs.v2beta1.yaml"
    cluster.admin.create(CRDS, yamlc.safe_load(crd.read_text()))
    for name, gpus in (("gpu-node-1", 4), ("gpu-node-2", 4), ("cpu-node", None)):
        cluster.admin.create(r.NODES, node(name, gpus))
    cluster.apply(FLAVOR, QUEUE, LOCAL_QUEUE)
    mpijobs = r.resource_of(registry.ADAPTERS["kubeflow.org/mpijob"])
    port = free_port()
    proc = controller_process(cluster, "--scheduler-extender-address", f"127.0.0.1:{port}")
    try:
        body = {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "allreduce", "labels": {"kueue.x-k8s.io/queue-name": "gpus"}},
            "spec": {
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": pod_template(0)},
                    "Worker": {"replicas": 2, "template": pod_template(4)},
                }
            },
        }
        made = cluster.admin.create(mpijobs, body, "default")
        running = started(cluster, "mpijobs", "allreduce", ("spec", "runPolicy", "suspend"))
        plan = plan_of(cluster, made)
        # Only the podSets that use GPUs are planned: the launcher's CPU is not checked.
        assert plan == {"worker": {"gpu-node-1": 1, "gpu-node-2": 1}}
        specs = running["spec"]["mpiReplicaSpecs"]
        candidates = ["gpu-node-1", "gpu-node-2", "cpu-node"]
        worker = pod_from(running, specs["Worker"]["template"], "allreduce-worker-0")
        assert scheduler_filter(port, worker, candidates)["NodeNames"] == [
            "gpu-node-1",
            "gpu-node-2",
        ]
        launcher = pod_from(running, specs["Launcher"]["template"], "allreduce-launcher")
        assert scheduler_filter(port, launcher, candidates)["NodeNames"] == candidates
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)

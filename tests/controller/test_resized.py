"""A running job patched to more pods than its admission holds is stopped and queued again as
it now is (Kueue's NoMatchingWorkload), for each kind whose counts a user can change; a
waiting job's Workload follows its job in place. On the API double with the real webhook.

Each kind: admitted at its size, running; then patched (a Job's parallelism, a JobSet's
replicas, a RayCluster's workers, an MPIJob's workers); the job is suspended again (by the
webhook, in the patch itself), its
Workload deleted once it stopped and made again with the new count, which the ClusterQueue
(4 cpu) cannot hold: it waits, suspended, and says why. An Event names the podSet and counts.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest

from extender.core.jobframework import registry
from extender.kube.api import resources as r
from extender.kube.api.client import JSON_PATCH
from tests import yamlc
from tests.controller.conftest import CRDS, eventually
from tests.controller.test_jobset import JOBSET_CRD, replicated
from tests.controller.test_kubeflow import condition, load
from tests.controller.test_preemption import cluster_queue, flavor, local_queue
from tests.controller.test_ray import suspended as ray_suspended

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"


def events(cluster: Any, reason: str) -> list[str]:
    return [
        e.get("message", "")
        for e in cluster.api.list("events", "default")
        if e.get("reason") == reason
    ]


def job(parallelism: int) -> dict[str, Any]:
    pod = {
        "restartPolicy": "Never",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "grows", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
                     "annotations": {"tower.dev/sim-duration": "1h"}},
        "spec": {"parallelism": parallelism, "completions": 10, "template": {"spec": pod}},
    }  # fmt: skip


def jobset() -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "grows", "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"replicatedJobs": [replicated("workers", 1, "1")]},
    }  # fmt: skip


def ray_cluster() -> dict[str, Any]:
    [example] = load(EXAMPLES / "ray" / "ray-cluster-sample.yaml")
    example["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue"
    return example


def mpijob() -> dict[str, Any]:
    [example] = load(EXAMPLES / "jobs" / "sample-mpijob.yaml")
    example["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "user-queue"
    for spec in example["spec"]["mpiReplicaSpecs"].values():
        for c in spec["template"]["spec"]["containers"]:
            c["resources"] = {"requests": {"cpu": "500m"}}
    return example


# kind: (CRD file, object, the JSON patch that grows it, the podSet and its new count,
# whether the job is suspended)
KINDS = {
    "Job": (None, lambda: job(2),
            [{"op": "replace", "path": "/spec/parallelism", "value": 6}], ("main", 6)),
    "JobSet": ("jobset", jobset,
               [{"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": 3}],
               ("workers", 6)),
    "RayCluster": (DATA / "kuberay" / "ray.io_rayclusters.yaml", ray_cluster,
                   [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 9},
                    {"op": "replace", "path": "/spec/workerGroupSpecs/0/maxReplicas", "value": 9}],
                   ("small-group", 9)),
    "MPIJob": (DATA / "kubeflow" / "kubeflow.org_mpijobs.v2beta1.yaml", mpijob,
               [{"op": "replace", "path": "/spec/mpiReplicaSpecs/Worker/replicas", "value": 9}],
               ("worker", 9)),
}  # fmt: skip


def resource_of(kind: str) -> r.Resource:
    return next(r.resource_of(a) for a in registry.ADAPTERS.values() if a.kind == kind)


def is_suspended(kind: str, obj: dict[str, Any]) -> bool:
    if kind == "RayCluster":
        return ray_suspended(obj)
    if kind == "MPIJob":
        return obj["spec"].get("runPolicy", {}).get("suspend") is True
    return obj["spec"].get("suspend") is True


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_running_job_grown_past_its_admission_is_stopped_and_queued_again(
    cluster, start_controller, kind
):
    crd, make, grow, (pod_set, count) = KINDS[kind]
    if crd == "jobset":
        cluster.admin.create(CRDS, JOBSET_CRD)
    elif crd is not None:
        cluster.admin.create(CRDS, yamlc.safe_load(Path(crd).read_text()))
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 4), local_queue("user-queue", "cq"))
    start_controller()
    resource = resource_of(kind)
    created = cluster.admin.create(resource, make(), "default")
    name = created["metadata"]["name"]
    eventually(lambda: not is_suspended(kind, cluster.get(resource.plural, name, "default")),
               what=f"the {kind} admitted and started")  # fmt: skip
    first = cluster.workload_of(created)
    assert condition(first, "Admitted").get("status") == "True"

    patched = cluster.admin.patch(
        resource, name, copy.deepcopy(grow), "default", content_type=JSON_PATCH
    )
    # The webhook suspends it in the patch itself: its own controller never sees the new
    # size running, so no pod beyond the admission starts.
    assert is_suspended(kind, patched), patched["spec"]
    grown = time.monotonic()
    eventually(lambda: is_suspended(kind, cluster.get(resource.plural, name, "default")),
               what=f"the grown {kind} stopped")  # fmt: skip
    stopped_after = time.monotonic() - grown

    def queued_again() -> dict[str, Any] | None:
        wl = cluster.workload_of(created)
        if wl is None or wl["metadata"]["uid"] == first["metadata"]["uid"]:
            return None
        return wl if condition(wl, "QuotaReserved").get("status") == "False" else None

    again = eventually(queued_again, what="a new Workload of the new size, waiting")
    assert {p["name"]: p["count"] for p in again["spec"]["podSets"]}[pod_set] == count
    assert "cpu in flavor pool-a" in condition(again, "QuotaReserved")["message"]
    assert is_suspended(kind, cluster.get(resource.plural, name, "default"))
    [changed] = events(cluster, "PodSetsChanged")
    assert f"podSet {pod_set}" in changed, changed
    assert f"now has {count} pods" in changed, changed
    assert "suspend a job before you change its size, or mark it elastic" in changed
    assert events(cluster, "Stopped") == [
        "No matching Workload; restoring pod templates according to existent Workload"
    ]
    assert events(cluster, "DeletedWorkload") == [
        f"Deleted not matching Workload: default/{first['metadata']['name']}"
    ]
    assert stopped_after < 5, f"the grown {kind} ran on for {stopped_after:.1f} s"


def test_a_waiting_jobs_workload_follows_its_job_in_place(cluster, start_controller):
    """A Job resized while it waits: its Workload's podSets are updated, not made again (it
    keeps its place in line), and it is admitted at the new size once that fits."""
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 4), local_queue("user-queue", "cq"))
    start_controller()
    created = cluster.admin.create(r.JOBS, job(6), "default")  # more than 4 cpu: it waits
    waiting = eventually(
        lambda: (
            (wl := cluster.workload_of(created))
            and condition(wl, "QuotaReserved").get("status") == "False"
            and wl
        ),
        what="the Job waiting",
    )
    cluster.admin.patch(r.JOBS, "grows", {"spec": {"parallelism": 3}}, "default")
    eventually(lambda: not cluster.get("jobs", "grows", "default")["spec"]["suspend"],
               what="the Job admitted at its new size")  # fmt: skip
    admitted = cluster.workload_of(created)
    assert admitted["metadata"]["uid"] == waiting["metadata"]["uid"]
    assert admitted["spec"]["podSets"][0]["count"] == 3
    assert events(cluster, "UpdatedWorkload") == [
        f"Updated not matching Workload for suspended job: default/{waiting['metadata']['name']}"
    ]
    assert events(cluster, "PodSetsChanged") == []

"""A running job's size changed past its admission, for every kind Tower queues, on the API
double with the real webhook; a waiting job's Workload follows its job in place.

Each kind whose counts live in the object (Job, JobSet, the Kubeflow jobs, the Ray kinds,
AppWrapper): admitted at its size, running, then patched as a user would (parallelism,
replicas, a worker group, a component's podSets); the webhook suspends it in the patch itself,
its Workload is deleted once it stopped and made again at the new count, which the
ClusterQueue (4 cpu) cannot hold: it waits, suspended, and says why; an Event names the podSet
and counts. A TrainJob's new size is refused; a Deployment's new pods queue one by one. The
walk at the end names, for every kind of the registry, its test and the outcome.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from extender.core.jobframework import registry
from extender.core.jobframework.adapter import JobAdapter
from extender.kube.api import resources as r
from extender.kube.api.client import JSON_PATCH, ApiError
from tests import yamlc
from tests.controller.conftest import CRDS, eventually
from tests.controller.test_jobset import JOBSET_CRD, replicated
from tests.controller.test_kubeflow import (  # the fixtures serve the Kubeflow v1 kinds
    condition,
    kubeflow_webhook,  # noqa: F401
    load,
    webhook_with,  # noqa: F401
)
from tests.controller.test_pods import DEPLOYMENTS
from tests.controller.test_pods import ungated as pod_ungated
from tests.controller.test_preemption import cluster_queue, flavor, local_queue
from tests.controller.test_trainjob import CLUSTER_RUNTIMES, TRAINJOBS
from tests.controller.test_trainjob import setup as trainjob_setup
from tests.controller.test_trainjob import started as trainjob_started

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


def example(folder: str, name: str, cpu: str | None = None) -> dict[str, Any]:
    """One of Kueue's examples on the test's LocalQueue (every container at `cpu`, when given:
    MPIJob's asks for none, XGBoostJob's for a number the CRD refuses)."""
    [obj] = load(EXAMPLES / folder / name)
    obj["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "user-queue"
    obj["metadata"].pop("namespace", None)
    if cpu is not None:
        _set_cpu(obj, cpu)
    return obj


def _set_cpu(value: Any, cpu: str) -> None:
    if isinstance(value, dict):
        for container in value.get("containers") or []:
            container["resources"] = {"requests": {"cpu": cpu}}
        for item in value.values():
            _set_cpu(item, cpu)
    elif isinstance(value, list):
        for item in value:
            _set_cpu(item, cpu)


def replace(path: str, value: Any) -> dict[str, Any]:
    return {"op": "replace", "path": path, "value": value}


def workers(path: str, count: int) -> list[dict[str, Any]]:
    """A Ray worker group grown to `count` (its maxReplicas too: KubeRay caps replicas)."""
    return [replace(f"{path}/replicas", count), replace(f"{path}/maxReplicas", count)]


@dataclass(frozen=True)
class Grown:
    """A kind, and the change a user makes to a running one of it."""

    crd: str | None  # a CRD file under tests/data, "jobset" for the test's own
    make: Callable[[], dict[str, Any]]
    grow: list[dict[str, Any]]  # the JSON patch a user sends
    pod_set: str  # the podSet it grows, and its count after
    count: int
    framework: str
    default_set: bool = True  # served by the session's webhook (Kueue's default frameworks)


KUBEFLOW_REPLICAS = "/spec/{}/Worker/replicas"

# Kind: how it is made and grown. Each grows past the ClusterQueue's 4 cpu.
KINDS: dict[str, Grown] = {
    "Job": Grown(None, lambda: job(2), [replace("/spec/parallelism", 6)], "main", 6,
                 "batch/job"),
    "JobSet": Grown("jobset", jobset, [replace("/spec/replicatedJobs/0/replicas", 3)],
                    "workers", 6, "jobset.x-k8s.io/jobset"),
    "MPIJob": Grown("kubeflow/kubeflow.org_mpijobs.v2beta1.yaml",
                    lambda: example("jobs", "sample-mpijob.yaml", "500m"),
                    [replace("/spec/mpiReplicaSpecs/Worker/replicas", 9)], "worker", 9,
                    "kubeflow.org/mpijob"),
    "PyTorchJob": Grown("kubeflow/kubeflow.org_pytorchjobs.yaml",
                        lambda: example("jobs", "sample-pytorchjob.yaml"),
                        [replace(KUBEFLOW_REPLICAS.format("pytorchReplicaSpecs"), 9)], "worker",
                        9, "kubeflow.org/pytorchjob", default_set=False),
    "TFJob": Grown("kubeflow/kubeflow.org_tfjobs.yaml",
                   lambda: example("jobs", "sample-tfjob.yaml"),
                   [replace(KUBEFLOW_REPLICAS.format("tfReplicaSpecs"), 9)], "worker", 9,
                   "kubeflow.org/tfjob", default_set=False),
    "XGBoostJob": Grown("kubeflow/kubeflow.org_xgboostjobs.yaml",
                        lambda: example("jobs", "sample-xgboostjob.yaml", "500m"),
                        [replace(KUBEFLOW_REPLICAS.format("xgbReplicaSpecs"), 9)], "worker", 9,
                        "kubeflow.org/xgboostjob", default_set=False),
    "PaddleJob": Grown("kubeflow/kubeflow.org_paddlejobs.yaml",
                       lambda: example("jobs", "sample-paddlejob.yaml"),
                       [replace(KUBEFLOW_REPLICAS.format("paddleReplicaSpecs"), 9)], "worker",
                       9, "kubeflow.org/paddlejob", default_set=False),
    "JAXJob": Grown("kubeflow/kubeflow.org_jaxjobs.yaml",
                    lambda: example("jobs", "sample-jaxjob.yaml"),
                    [replace(KUBEFLOW_REPLICAS.format("jaxReplicaSpecs"), 9)], "worker", 9,
                    "kubeflow.org/jaxjob", default_set=False),
    "RayJob": Grown("kuberay/ray.io_rayjobs.yaml",
                    lambda: example("ray", "ray-job-sample.yaml"),
                    workers("/spec/rayClusterSpec/workerGroupSpecs/0", 9), "small-group", 9,
                    "ray.io/rayjob"),
    "RayCluster": Grown("kuberay/ray.io_rayclusters.yaml",
                        lambda: example("ray", "ray-cluster-sample.yaml"),
                        workers("/spec/workerGroupSpecs/0", 9), "small-group", 9,
                        "ray.io/raycluster"),
    "RayService": Grown("kuberay/ray.io_rayservices.yaml",
                        lambda: example("ray", "ray-service-sample.yaml"),
                        workers("/spec/rayClusterConfig/workerGroupSpecs/0", 9), "small-group",
                        9, "ray.io/rayservice"),
    "AppWrapper": Grown("appwrapper/workload.codeflare.dev_appwrappers.yaml",
                        lambda: example("appwrapper", "deployment-sample.yaml"),
                        [replace("/spec/components/0/podSets/0/replicas", 50),
                         replace("/spec/components/0/template/spec/replicas", 50)],
                        "sample-appwrapper-deployment-0", 50,
                        "workload.codeflare.dev/appwrapper"),
}  # fmt: skip


def adapter_of(kind: str) -> JobAdapter:
    return next(a for a in registry.ADAPTERS.values() if a.kind == kind)


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_running_job_grown_past_its_admission_is_stopped_and_queued_again(
    cluster, start_controller, request, kind
):
    grown = KINDS[kind]
    if grown.crd == "jobset":
        cluster.admin.create(CRDS, JOBSET_CRD)
    elif grown.crd is not None:
        cluster.admin.create(CRDS, yamlc.safe_load((DATA / grown.crd).read_text()))
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 4), local_queue("user-queue", "cq"))
    if grown.default_set:
        start_controller()
    else:  # a Kubeflow v1 kind: off in Kueue's default set, so turned on
        request.getfixturevalue("webhook_with")("batch/job", grown.framework)
        start_controller(integrations=("batch/job", grown.framework))
    adapter = adapter_of(kind)
    resource = r.resource_of(adapter)
    created = cluster.admin.create(resource, grown.make(), "default")
    name = created["metadata"]["name"]
    eventually(lambda: not adapter.is_suspended(cluster.get(resource.plural, name, "default")),
               what=f"the {kind} admitted and started")  # fmt: skip
    first = cluster.workload_of(created)
    assert condition(first, "Admitted").get("status") == "True"

    patched = cluster.admin.patch(
        resource, name, copy.deepcopy(grown.grow), "default", content_type=JSON_PATCH
    )
    # The webhook suspends it in the patch itself: its own controller never sees the new
    # size running, so no pod beyond the admission starts.
    assert adapter.is_suspended(patched), patched["spec"]

    def queued_again() -> dict[str, Any] | None:
        wl = cluster.workload_of(created)
        if wl is None or wl["metadata"]["uid"] == first["metadata"]["uid"]:
            return None
        return wl if condition(wl, "QuotaReserved").get("status") == "False" else None

    again = eventually(queued_again, what="a new Workload of the new size, waiting")
    assert {p["name"]: p["count"] for p in again["spec"]["podSets"]}[grown.pod_set] == grown.count
    assert "cpu in flavor pool-a" in condition(again, "QuotaReserved")["message"]
    assert adapter.is_suspended(cluster.get(resource.plural, name, "default"))
    # The Events are sent apart from the writes: looked for until they are there.
    [changed] = eventually(lambda: events(cluster, "PodSetsChanged"), what="PodSetsChanged")
    assert f"podSet {grown.pod_set}" in changed, changed
    assert f"now has {grown.count} pods" in changed, changed
    assert "suspend a job before you change its size, or mark it elastic" in changed
    assert eventually(lambda: events(cluster, "Stopped"), what="Stopped") == [
        "No matching Workload; restoring pod templates according to existent Workload"
    ]
    assert eventually(lambda: events(cluster, "DeletedWorkload"), what="DeletedWorkload") == [
        f"Deleted not matching Workload: default/{first['metadata']['name']}"
    ]


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


def test_a_queued_trainjobs_size_change_is_refused(cluster, start_controller):
    """A TrainJob's podSets are rendered from its runtime, which the webhook does not read:
    a new numNodes is refused, running or not, and the job runs on at its admitted size."""
    trainjob_setup(cluster)
    [runtime] = load(EXAMPLES / "trainjob" / "clustertrainingruntime-torch-distributed.yaml")
    cluster.admin.create(CLUSTER_RUNTIMES, runtime)
    start_controller()
    [sample] = load(EXAMPLES / "trainjob" / "trainjob-pytorch-distributed.yaml")
    created = cluster.admin.create(TRAINJOBS, sample, "default")
    name = created["metadata"]["name"]
    eventually(lambda: trainjob_started(cluster, name), what="the TrainJob started")
    admitted = cluster.workload_of(created)

    with pytest.raises(ApiError) as refused:
        cluster.admin.patch(TRAINJOBS, name, {"spec": {"trainer": {"numNodes": 4}}}, "default")
    said = str(refused.value)
    assert (
        f"TrainJob default/{name}: spec.trainer.numNodes: cannot change from 2 to 4 on a "
        "queued TrainJob" in said
    ), said
    assert "delete it and create it again at the new size" in said
    running = cluster.get("trainjobs", name, "default")
    assert running["spec"]["trainer"]["numNodes"] == 2
    assert running["spec"]["suspend"] is False
    now = cluster.workload_of(created)
    assert now["metadata"]["uid"] == admitted["metadata"]["uid"]
    assert [(p["name"], p["count"]) for p in now["spec"]["podSets"]] == [("node", 2)]
    assert events(cluster, "PodSetsChanged") == []


def replica_set_pod(deployment: dict[str, Any], i: int) -> dict[str, Any]:
    """A pod as the Deployment's ReplicaSet controller makes it from the marked template."""
    template = deployment["spec"]["template"]
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "grows-rs", "uid": "rs-uid",
             "controller": True}  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**copy.deepcopy(template["metadata"]), "name": f"grows-{i}",
                     "ownerReferences": [owner]},
        "spec": copy.deepcopy(template["spec"]),
    }  # fmt: skip


def test_a_deployment_scaled_up_queues_each_new_pod(cluster, start_controller):
    """A Deployment's pods are queued one by one: scaled past the quota, its new pods are
    each a Workload, and those the ClusterQueue cannot hold stay gated and say why."""
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 4), local_queue("user-queue", "cq"))
    start_controller()
    deployment = example("serving", "sample-deployment.yaml", "1")
    deployment["metadata"]["name"] = "grows"
    created = cluster.admin.create(DEPLOYMENTS, deployment, "default")
    first = [cluster.admin.create(r.PODS, replica_set_pod(created, i), "default") for i in range(3)]
    for each in first:
        eventually(lambda p=each: pod_ungated(cluster, p), what="each pod admitted")

    scaled = cluster.admin.patch(DEPLOYMENTS, "grows", {"spec": {"replicas": 6}}, "default")
    assert scaled["spec"]["replicas"] == 6  # a Deployment scales freely: its pods queue
    more = [cluster.admin.create(r.PODS, replica_set_pod(created, i), "default") for i in (3, 4, 5)]
    workloads = [eventually(lambda p=p: cluster.workload_of(p), what="a Workload") for p in more]

    def settled() -> list[dict[str, Any]] | None:
        gated = [p for p in more if pod_ungated(cluster, p) is None]
        return gated if len(gated) == 2 else None

    waiting = eventually(settled, what="one new pod admitted, two waiting")
    # The first in line says why (the one behind it, of the same shape, waits with it).
    said = eventually(
        lambda: next(
            (
                m
                for p in waiting
                if (m := condition(cluster.workload_of(p), "QuotaReserved").get("message"))
            ),
            None,
        ),
        what="why they wait",
    )
    assert "cpu in flavor pool-a" in said, said
    assert len({w["metadata"]["name"] for w in workloads}) == 3
    running = [p for p in first + more if pod_ungated(cluster, p) is not None]
    assert len(running) == 4  # never more than the 4 cpu the ClusterQueue holds


HERE = "tests/controller/test_resized.py"
GROW = f"{HERE}::test_a_running_job_grown_past_its_admission_is_stopped_and_queued_again"
GROUPS = "tests/controller/test_pod_groups.py"
STOPPED = "stopped in the update and queued again at the new size"

# Every kind Tower queues: the test that shows what a change of its size while it runs does,
# and that outcome (docs/kueue.md "Changed while it runs" says why for each).
OUTCOMES: dict[str, tuple[str, str]] = {
    **{kind: (f"{GROW}[{kind}]", STOPPED) for kind in KINDS},
    "TrainJob": (f"{HERE}::test_a_queued_trainjobs_size_change_is_refused", "refused"),
    "SparkApplication": ("tests/controller/test_spark.py::test_a_running_application_grown_"
                         "past_its_admission_is_put_back_to_its_admitted_size",
                         "suspended in the update, its executors put back to the admitted count"),
    "Pod": (f"{GROUPS}::test_a_group_of_two_shapes_is_two_pod_sets_and_a_third_member_is_excess",
            "a pod group's excess member deleted"),
    "Deployment": (f"{HERE}::test_a_deployment_scaled_up_queues_each_new_pod",
                   "each new pod queued on its own"),
    "StatefulSet": (f"{GROUPS}::test_kueues_sample_statefulset_is_one_workload_admitted_whole",
                    "refused (Kueue's rule); a pod beyond the admission stays gated"),
    "LeaderWorkerSet": (f"{GROUPS}::test_kueues_sample_leaderworkerset_is_one_workload_per_group",
                        "size refused (Kueue's rule); replicas add or remove whole groups"),
}  # fmt: skip


def _test_exists(node_id: str) -> bool:
    path, _, name = node_id.partition("::")
    name, _, param = name.partition("[")
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    test = getattr(module, name, None)
    if not callable(test):
        return False
    if not param:
        return True
    ids = {
        str(value)
        for mark in getattr(test, "pytestmark", [])
        if mark.name == "parametrize"
        for value in mark.args[1]
    }
    return param.removesuffix("]") in ids


def test_every_kind_has_a_test_of_its_size_changed_while_it_runs():
    kinds = {a.kind for a in registry.ADAPTERS.values()} | {
        p.kind for p in registry.PARENTS.values()
    }
    assert sorted(kinds - set(OUTCOMES)) == [], "a kind without a test of its resize"
    missing = [node for node, _ in OUTCOMES.values() if not _test_exists(node)]
    assert missing == []

"""The operators of tas/extended's kinds, played by the tests (none of them runs here).

Each function does what its operator does once Tower starts the job: the JobSet controller
makes one indexed Job per replica of each replicatedJob (the real Job controller then makes
the pods), the trainer makes a JobSet from its runtime and Kueue's runtime patch, the
AppWrapper controller makes its component with the podSetInfos applied, and the Kubeflow,
MPI, KubeRay and LeaderWorkerSet operators make their pods with their index labels. Their
status is written as the operators write it. What Tower adds to the templates (gates,
nodeSelector, labels, annotations) reaches the pods as the operators copy it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from tests.e2e.kueue.tas_extended import COMPLETION_INDEX, GPU, pods
from tests.e2e.kueue.util import (
    AGNHOST,
    BEHAVIOR_EXIT_FAST,
    MEDIUM_TIMEOUT,
    QUEUE_LABEL,
    Cluster,
    eventually,
)

Obj = dict[str, Any]

JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
LWS = ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
MPIJOB = ("kubeflow.org", "v2beta1", "mpijobs")
PYTORCHJOB = ("kubeflow.org", "v1", "pytorchjobs")
RAYJOB = ("ray.io", "v1", "rayjobs")
TRAINJOB = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
RUNTIME = ("trainer.kubeflow.org", "v1alpha1", "trainingruntimes")
APPWRAPPER = ("workload.codeflare.dev", "v1beta2", "appwrappers")

JOBSET_PREFIX = "jobset.sigs.k8s.io/"
JOB_INDEX = JOBSET_PREFIX + "job-index"
KUBEFLOW = "training.kubeflow.org/"
REPLICA_INDEX = KUBEFLOW + "replica-index"
REPLICA_TYPE = KUBEFLOW + "replica-type"
JOB_ROLE = KUBEFLOW + "job-role"
LWS_PREFIX = "leaderworkerset.sigs.k8s.io/"
GROUP_INDEX = LWS_PREFIX + "group-index"
WORKER_INDEX = LWS_PREFIX + "worker-index"
KUEUE_MANAGER = "kueue.x-k8s.io/manager"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def get(cluster: Cluster, kind: tuple[str, str, str], name: str, namespace: str) -> Obj:
    group, version, plural = kind
    return dict(
        cluster.custom.get_namespaced_custom_object(group, version, namespace, plural, name)
    )


def create(cluster: Cluster, kind: tuple[str, str, str], body: Obj) -> Obj:
    group, version, plural = kind
    namespace = body["metadata"]["namespace"]
    return dict(
        cluster.custom.create_namespaced_custom_object(group, version, namespace, plural, body)
    )


def patch_status(
    cluster: Cluster, kind: tuple[str, str, str], name: str, namespace: str, status: Obj
) -> None:
    group, version, plural = kind
    cluster.custom.patch_namespaced_custom_object_status(
        group, version, namespace, plural, name, {"status": status}
    )


def owner(obj: Mapping[str, Any]) -> Obj:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def wait_started(
    cluster: Cluster, kind: tuple[str, str, str], name: str, namespace: str, *path: str
) -> Obj:
    """The object once its suspend field (at `path`) is false: Tower admitted it."""

    def started() -> Obj | None:
        obj = get(cluster, kind, name, namespace)
        value: Any = obj
        for part in path:
            value = (value or {}).get(part)
        assert value is False, f"{kind[2]}/{name}: {'.'.join(path)} is {value!r}"
        return obj

    return dict(eventually(started, MEDIUM_TIMEOUT, f"{kind[2]}/{name} started"))


def with_info(template: Mapping[str, Any], info: Mapping[str, Any]) -> Obj:
    """A pod template with a podSetInfo (or a runtime patch's pod template) applied, as the
    AppWrapper controller and the trainer apply them: labels, annotations and nodeSelector
    set, tolerations and scheduling gates appended."""
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    spec = out.setdefault("spec", {})
    info_meta = info.get("metadata") or info
    info_spec = info.get("spec") or info
    for part in ("labels", "annotations"):
        if info_meta.get(part):
            meta[part] = {**(meta.get(part) or {}), **info_meta[part]}
    if info_spec.get("nodeSelector"):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **info_spec["nodeSelector"]}
    for part in ("tolerations", "schedulingGates"):
        if info_spec.get(part):
            spec[part] = [*(spec.get(part) or []), *info_spec[part]]
    return out


def _pod(name: str, namespace: str, template: Mapping[str, Any], labels: Mapping[str, str],
         parent: Mapping[str, Any], annotations: Mapping[str, str] | None = None) -> Obj:  # fmt: skip
    meta = copy.deepcopy(dict(template.get("metadata") or {}))
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    spec = copy.deepcopy(dict(template["spec"]))
    for container in spec.get("containers") or ():
        container.setdefault("image", AGNHOST)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {**meta, "name": name, "namespace": namespace,
                     "ownerReferences": [owner(parent)]},
        "spec": spec,
    }  # fmt: skip


# ----- JobSet, and the trainer's JobSet --------------------------------------------------


def make_jobset(name: str, namespace: str, queue: str, *rjobs: dict[str, Any]) -> dict[str, Any]:
    """testingjobset.MakeJobSet(...).ReplicatedJobs(...).RequestAndLimit(rj, gpu, "1"): a
    suspended JobSet, each replicatedJob's pods agnhost asking for one gpu."""
    replicated = []
    for rjob in rjobs:
        container = {"name": "c", "image": AGNHOST, "args": BEHAVIOR_EXIT_FAST,
                     "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}  # fmt: skip
        job = {
            "parallelism": rjob["parallelism"],
            "completions": rjob["parallelism"],
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": rjob["annotations"]},
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                         "containers": [container]},
            },
        }  # fmt: skip
        replicated.append(
            {"name": rjob["name"], "replicas": rjob["replicas"], "template": {"spec": job}}
        )
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue}},
        "spec": {"suspend": True, "replicatedJobs": replicated},
    }


def rank_assignments(cluster: Cluster, ns: str) -> dict[str, str]:
    """readRankAssignmentsFromJobSetPods: "<job index>/<completion index>" -> its node."""
    return {
        f"{p.metadata.labels.get(JOB_INDEX)}/{p.metadata.labels.get(COMPLETION_INDEX)}": (
            p.spec.node_name
        )
        for p in pods(cluster, ns)
    }


def play_jobset(cluster: Cluster, name: str, namespace: str) -> None:
    """The JobSet controller: Job `<jobset>-<replicatedJob>-<i>` for each replica, with the
    JobSet's labels on the Job and its pods (the job index among them)."""
    jobset = wait_started(cluster, JOBSET, name, namespace, "spec", "suspend")
    for rjob in jobset["spec"]["replicatedJobs"]:
        replicas = int(rjob.get("replicas", 1))
        for i in range(replicas):
            labels = {
                JOBSET_PREFIX + "jobset-name": name,
                JOBSET_PREFIX + "replicatedjob-name": rjob["name"],
                JOBSET_PREFIX + "replicatedjob-replicas": str(replicas),
                JOB_INDEX: str(i),
            }
            template = copy.deepcopy(rjob["template"])
            job_meta = template.get("metadata") or {}
            pod = template["spec"]["template"]
            pod_meta = pod.setdefault("metadata", {})
            pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
            job = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": f"{name}-{rjob['name']}-{i}",
                    "namespace": namespace,
                    "labels": {**(job_meta.get("labels") or {}), **labels},
                    "annotations": job_meta.get("annotations") or {},
                    "ownerReferences": [owner(jobset)],
                },
                # The JobSet webhook's default: its Jobs' pods are numbered.
                "spec": {"completionMode": "Indexed", **template["spec"], "suspend": False},
            }
            cluster.batch.create_namespaced_job(namespace, job)


def complete_jobset(cluster: Cluster, name: str, namespace: str) -> None:
    """Once every Job of the JobSet completed, its Completed condition, as the JobSet
    controller writes it."""

    def complete() -> bool:
        jobs = cluster.batch.list_namespaced_job(
            namespace, label_selector=f"{JOBSET_PREFIX}jobset-name={name}"
        ).items
        assert jobs, "no Jobs"
        for job in jobs:
            done = job.status.succeeded or 0
            assert done >= (job.spec.completions or 1), f"{job.metadata.name}: {done} done"
        return True

    eventually(complete, MEDIUM_TIMEOUT, f"the Jobs of JobSet {name} completed")
    condition = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted",
                 "message": "jobset completed successfully", "lastTransitionTime": now()}  # fmt: skip
    patch_status(cluster, JOBSET, name, namespace, {"conditions": [condition]})


def play_trainjob(cluster: Cluster, name: str, namespace: str) -> None:
    """The trainer: a JobSet of the TrainJob's name from its TrainingRuntime's template, each
    replicatedJob's pod template with Kueue's runtime patch applied; then that JobSet's
    controller."""
    trainjob = wait_started(cluster, TRAINJOB, name, namespace, "spec", "suspend")
    runtime = get(cluster, RUNTIME, trainjob["spec"]["runtimeRef"]["name"], namespace)
    (ours,) = [p for p in trainjob["spec"].get("runtimePatches") or ()
               if p.get("manager") == KUEUE_MANAGER]  # fmt: skip
    patched = {
        r["name"]: r["template"]["spec"]["template"]
        for r in ours["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    }
    spec = {**copy.deepcopy(runtime["spec"]["template"]["spec"]), "suspend": False}
    for rjob in spec["replicatedJobs"]:
        job = rjob["template"]["spec"]
        job["template"] = with_info(job["template"], patched.get(rjob["name"], {}))
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace,
                     "ownerReferences": [owner(trainjob)]},
        "spec": spec,
    }  # fmt: skip
    create(cluster, JOBSET, jobset)
    play_jobset(cluster, name, namespace)


# ----- AppWrapper ------------------------------------------------------------------------


def play_appwrapper(cluster: Cluster, name: str, namespace: str) -> None:
    """The AppWrapper controller: its one component (a Job) created with the podSetInfo
    applied to its pod template, and the phase Running."""
    wrapper = wait_started(cluster, APPWRAPPER, name, namespace, "spec", "suspend")
    (component,) = wrapper["spec"]["components"]
    job = copy.deepcopy(component["template"])
    (info,) = component.get("podSetInfos") or [{}]
    job["spec"]["template"] = with_info(job["spec"]["template"], info)
    job["metadata"] = {**job.get("metadata", {}), "namespace": namespace,
                       "labels": {"workload.codeflare.dev/appwrapper": name},
                       "ownerReferences": [owner(wrapper)]}  # fmt: skip
    cluster.batch.create_namespaced_job(namespace, job)
    conditions = [
        {"type": t, "status": "True", "reason": "Test", "message": "", "lastTransitionTime": now()}
        for t in ("QuotaReserved", "ResourcesDeployed")
    ]
    patch_status(
        cluster, APPWRAPPER, name, namespace, {"phase": "Running", "conditions": conditions}
    )


# ----- Kubeflow: MPIJob, PyTorchJob ------------------------------------------------------


def play_mpijob(cluster: Cluster, name: str, namespace: str) -> None:
    """mpi-operator: the launcher (replica index 0) and the workers, numbered from 1 when the
    launcher runs as a worker."""
    mpijob = wait_started(cluster, MPIJOB, name, namespace, "spec", "runPolicy", "suspend")
    specs = mpijob["spec"]["mpiReplicaSpecs"]
    first = 1 if mpijob["spec"].get("runLauncherAsWorker") else 0
    base = {KUBEFLOW + "job-name": name, KUBEFLOW + "operator-name": "mpi-operator"}
    made = []
    if "Launcher" in specs:
        labels = {**base, JOB_ROLE: "launcher", REPLICA_INDEX: "0"}
        made.append(_pod(f"{name}-launcher", namespace, specs["Launcher"]["template"], labels,
                         mpijob))  # fmt: skip
    worker = specs.get("Worker") or {}
    for i in range(int(worker.get("replicas", 0))):
        labels = {**base, JOB_ROLE: "worker", REPLICA_INDEX: str(first + i)}
        made.append(_pod(f"{name}-worker-{i}", namespace, worker["template"], labels, mpijob))
    for pod in made:
        cluster.core.create_namespaced_pod(namespace, pod)


def play_pytorchjob(cluster: Cluster, name: str, namespace: str) -> None:
    """training-operator: a pod per replica of each type, labelled with its type and index."""
    job = wait_started(cluster, PYTORCHJOB, name, namespace, "spec", "runPolicy", "suspend")
    for kind, spec in job["spec"]["pytorchReplicaSpecs"].items():
        role = kind.lower()
        for i in range(int(spec.get("replicas", 1))):
            labels = {KUBEFLOW + "job-name": name, KUBEFLOW + "operator-name":
                      "pytorchjob-controller", REPLICA_TYPE: role, REPLICA_INDEX: str(i)}  # fmt: skip
            if role == "master":
                labels[JOB_ROLE] = "master"
            pod = _pod(f"{name}-{role}-{i}", namespace, spec["template"], labels, job)
            cluster.core.create_namespaced_pod(namespace, pod)


# ----- RayJob ----------------------------------------------------------------------------


def play_rayjob(cluster: Cluster, name: str, namespace: str) -> str:
    """KubeRay: the RayCluster's head and worker pods and the submitter's pod, and
    status.rayClusterName. Returns the cluster's name."""
    rayjob = wait_started(cluster, RAYJOB, name, namespace, "spec", "suspend")
    ray_cluster = f"{name}-raycluster"
    spec = rayjob["spec"]["rayClusterSpec"]
    base = {"ray.io/cluster": ray_cluster}
    head = spec["headGroupSpec"]["template"]
    labels = {**base, "ray.io/node-type": "head", "ray.io/group": "headgroup"}
    made = [_pod(f"{ray_cluster}-head", namespace, head, labels, rayjob)]
    for group in spec.get("workerGroupSpecs") or ():
        for i in range(int(group.get("replicas", 1))):
            labels = {**base, "ray.io/node-type": "worker", "ray.io/group": group["groupName"]}
            made.append(_pod(f"{ray_cluster}-{group['groupName']}-worker-{i}", namespace,
                             group["template"], labels, rayjob))  # fmt: skip
    submitter = rayjob["spec"]["submitterPodTemplate"]
    made.append(_pod(f"{name}-submitter", namespace, submitter, {"batch.kubernetes.io/job-name": name},
                     rayjob))  # fmt: skip
    for pod in made:
        cluster.core.create_namespaced_pod(namespace, pod)
    patch_status(cluster, RAYJOB, name, namespace, {"rayClusterName": ray_cluster})
    return ray_cluster


# ----- LeaderWorkerSet -------------------------------------------------------------------


def play_leaderworkerset(cluster: Cluster, name: str, namespace: str) -> None:
    """The LeaderWorkerSet controller (and its pod webhook): for each group, its leader
    `<lws>-<g>` (worker index 0) and workers `<lws>-<g>-<w>`, labelled with the group and
    worker index, the workers annotated with their leader's name."""
    lws = get(cluster, LWS, name, namespace)
    template = lws["spec"]["leaderWorkerTemplate"]
    size = int(template.get("size", 1))
    for group in range(int(lws["spec"].get("replicas", 1))):
        for worker in range(size):
            pod_template = (
                template["leaderTemplate"]
                if worker == 0 and template.get("leaderTemplate")
                else template["workerTemplate"]
            )
            labels = {LWS_PREFIX + "name": name, GROUP_INDEX: str(group),
                      WORKER_INDEX: str(worker)}  # fmt: skip
            leader = f"{name}-{group}"
            pod_name = leader if worker == 0 else f"{leader}-{worker}"
            annotations = {LWS_PREFIX + "leader-name": leader} if worker else None
            pod = _pod(pod_name, namespace, pod_template, labels, lws, annotations)
            cluster.core.create_namespaced_pod(namespace, pod)


def expect_leaderworkerset_ready(cluster: Cluster, name: str, namespace: str) -> None:
    """Once every pod of every group runs Ready, the status the LeaderWorkerSet controller
    writes (readyReplicas, Available: AllGroupsReady); then Kueue's case reads it."""
    lws = get(cluster, LWS, name, namespace)
    replicas = int(lws["spec"].get("replicas", 1))
    size = int(lws["spec"]["leaderWorkerTemplate"].get("size", 1))

    def all_ready() -> bool:
        listed = cluster.core.list_namespaced_pod(
            namespace, label_selector=f"{LWS_PREFIX}name={name}"
        ).items
        ready = [p for p in listed if _ready(p)]
        assert len(ready) == replicas * size, sorted(
            (p.metadata.name, p.spec.node_name, p.status.phase) for p in listed
        )
        return True

    eventually(all_ready, MEDIUM_TIMEOUT, f"the pods of LeaderWorkerSet {name} ready")
    available = {"type": "Available", "status": "True", "reason": "AllGroupsReady",
                 "message": "All replicas are ready", "lastTransitionTime": now()}  # fmt: skip
    status = {"replicas": replicas, "readyReplicas": replicas, "conditions": [available]}
    patch_status(cluster, LWS, name, namespace, status)
    got = get(cluster, LWS, name, namespace)["status"]
    assert got["readyReplicas"] == replicas, json.dumps(got)


def _ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or ())

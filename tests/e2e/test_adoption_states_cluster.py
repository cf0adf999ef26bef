"""Tower adopts the rest of what Kueue v0.19.2 leaves, on the real control plane: a running
JobSet, RayJob and StatefulSet (their pods really running on the real node), a topology
assignment, admission-check states and a backoff; then takeover, Tower's controller, and a
burst of new Jobs. The shapes are those of tests/controller/test_adoption_states.py, each
named there by the Kueue function that writes it. Counted per guarantee: jobs restarted,
double admissions, order changes, pods touched."""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from extender.core.jobframework import registry
from extender.core.jobframework.adapter import workload_name
from tests.e2e.conftest import (
    WEBHOOK_URL,
    controller_process,
    job_manifest,
    kubectl,
    measured,
    serve_webhook,
    wait,
    webhook_host_port,
)
from tests.e2e.test_adoption_cluster import kueues_plumbing
from tests.e2e.test_takeover_cluster import CONVERTED, KUEUE_NS, KUEUE_WEBHOOKS, apply, conversion
from tests.e2e.test_takeover_cluster import tower as kubectl_tower

pytestmark = pytest.mark.e2e
SUFFIX = uuid.uuid4().hex[:6]
NS = f"adopt2-{SUFFIX}"
FLAVOR, TAS_FLAVOR = f"on-demand-{SUFFIX}", f"tas-{SUFFIX}"
NODE_LABELS = {"instance-type": "on-demand"}  # the real node's
HOSTNAME = "kubernetes.io/hostname"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
PRIORITIES = {"low": 10, "high": 100, "urgent": 1000}
CHECK = f"check-{SUFFIX}"
PODSET_LABEL, WORKLOAD_ANNOTATION = "kueue.x-k8s.io/podset", "kueue.x-k8s.io/workload"
ADMISSION_GATE, TOPOLOGY_GATE = "kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology"
QUEUE = "kueue.x-k8s.io/queue-name"
SMALL = {"cpu": "50m", "memory": "16Mi"}


def cq_name(which: str) -> str:
    return f"cq-{which}-{SUFFIX}"


def level(name: str) -> str:
    return f"{name}-{SUFFIX}"


def cluster_queue(which: str, cpu: str, flavor: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue",
            "metadata": {"name": cq_name(which)},
            "spec": {"namespaceSelector": {}, "resourceGroups": [{
                "coveredResources": ["cpu", "memory"],
                "flavors": [{"name": flavor, "resources": [
                    {"name": "cpu", "nominalQuota": cpu},
                    {"name": "memory", "nominalQuota": "2Gi"}]}]}], **spec}}  # fmt: skip


def setup_objects() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
         "metadata": {"name": FLAVOR}, "spec": {"nodeLabels": NODE_LABELS}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Topology",
         "metadata": {"name": f"hosts-{SUFFIX}"}, "spec": {"levels": [{"nodeLabel": HOSTNAME}]}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
         "metadata": {"name": TAS_FLAVOR},
         "spec": {"nodeLabels": NODE_LABELS, "topologyName": f"hosts-{SUFFIX}"}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AdmissionCheck",
         "metadata": {"name": CHECK}, "spec": {"controllerName": "example.com/checker"}},
        cluster_queue("k", "900m", FLAVOR),
        cluster_queue("c", "500m", FLAVOR,
                      admissionChecksStrategy={"admissionChecks": [{"name": CHECK}]}),
        cluster_queue("b", "500m", FLAVOR),
        cluster_queue("t", "500m", TAS_FLAVOR),
    ]  # fmt: skip
    for name, value in PRIORITIES.items():
        objs.append({"apiVersion": f"{GROUP}/{VERSION}", "kind": "WorkloadPriorityClass",
                     "metadata": {"name": level(name)}, "value": value})  # fmt: skip
    for which in "kcbt":
        objs.append({"apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
                     "metadata": {"name": f"lq-{which}", "namespace": NS},
                     "spec": {"clusterQueue": cq_name(which)}})  # fmt: skip
    return objs


def now(ahead: float = 0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=ahead)).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "observedGeneration": 1, "lastTransitionTime": now()}  # fmt: skip


def sleeper(name: str = "c", seconds: int = 3600, cpu: str = "50m") -> dict[str, Any]:
    return {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [{
        "name": name, "image": "busybox:1.36", "command": ["sh", "-c", f"sleep {seconds}"],
        "resources": {"requests": {"cpu": cpu, "memory": SMALL["memory"]}}}]}  # fmt: skip


def millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def usage(pod_sets: list[dict[str, Any]]) -> dict[str, Any]:
    """Per podSet: its count times its containers' requests (Kueue's resourceUsage)."""
    out = {}
    for ps in pod_sets:
        cpu = sum(millis(c["resources"]["requests"]["cpu"])
                  for c in ps["template"]["spec"]["containers"])  # fmt: skip
        mem = sum(int(c["resources"]["requests"]["memory"].rstrip("Mi"))
                  for c in ps["template"]["spec"]["containers"])  # fmt: skip
        out[ps["name"]] = {"cpu": f"{cpu * ps['count']}m", "memory": f"{mem * ps['count']}Mi"}
    return out


def admitted(cq: str, pod_sets: list[dict[str, Any]], flavor: str = FLAVOR) -> dict[str, Any]:
    """SetQuotaReservation, then SyncAdmittedCondition (no checks)."""
    used = usage(pod_sets)
    return {
        "admission": {"clusterQueue": cq, "podSetAssignments": [
            {"name": ps["name"], "flavors": {"cpu": flavor, "memory": flavor},
             "resourceUsage": used[ps["name"]], "count": ps["count"]} for ps in pod_sets]},
        "conditions": [
            condition("QuotaReserved", "True", "QuotaReserved",
                      f"Quota reserved in ClusterQueue {cq}"),
            condition("Admitted", "True", "Admitted", "The workload is admitted"),
        ],
    }  # fmt: skip


def kueue_started(template: dict[str, Any], pod_set: str, wl_name: str) -> None:
    """podset.Merge of getPodSetsInfoFromStatus's info (flavor nodeLabels, podset label, the
    workload annotation with TopologyAwareScheduling on) into a template."""
    meta = template.setdefault("metadata", {})
    meta.setdefault("labels", {})[PODSET_LABEL] = pod_set
    meta.setdefault("annotations", {})[WORKLOAD_ANNOTATION] = wl_name
    template["spec"].setdefault("nodeSelector", {}).update(NODE_LABELS)


class Kueue:
    """Kueue's controllers, played through the API server."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.batch = client.BatchV1Api(api)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.names: dict[str, str] = {}  # job -> Workload

    def workload(
        self,
        owner: dict[str, Any],
        pod_sets: list[dict[str, Any]],
        status: dict[str, Any],
        *,
        queue: str,
        prio: str = "low",
        controller: bool = True,
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """ConstructWorkload's Workload (or the StatefulSet reconciler's constructWorkload),
        then its status as written."""
        meta = owner["metadata"]
        kind, group = owner["kind"], owner["apiVersion"].rpartition("/")[0]
        name = workload_name(kind, group, meta["name"], meta["uid"])
        ref = {"apiVersion": owner["apiVersion"], "kind": kind, "name": meta["name"],
               "uid": meta["uid"]}  # fmt: skip
        if controller:
            ref |= {"controller": True, "blockOwnerDeletion": True}
        body = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                         "annotations": annotations or {}, "finalizers": [FINALIZER],
                         "ownerReferences": [ref]},
            "spec": {"queueName": queue, "priority": PRIORITIES[prio],
                     "priorityClassRef": {"group": GROUP, "kind": "WorkloadPriorityClass",
                                          "name": level(prio)},
                     "podSets": pod_sets},
        }  # fmt: skip
        self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, "workloads", body)
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, "workloads", name, {"status": status}
        )
        self.names[meta["name"]] = name
        return self.get(meta["name"])

    def get(self, job: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(
            GROUP, VERSION, NS, "workloads", self.names[job]
        )

    def job(self, name: str, queue: str, prio: str, seconds: float, cpu: str = "50m") -> Any:
        """Created suspended, as JobWebhook.Default leaves it."""
        labels = {QUEUE: queue, "kueue.x-k8s.io/priority-class": level(prio)}
        body = job_manifest(labels, name=name, cpu=cpu, memory=SMALL["memory"], seconds=seconds,
                            suspend=True)  # fmt: skip
        made = self.batch.create_namespaced_job(NS, body)
        return self.api.sanitize_for_serialization(made)

    def job_workload(self, job: dict[str, Any], queue: str, prio: str, status: dict[str, Any]):
        """Job.PodSets: the template without the Job controller's labels but job-name
        (cleanLabels), and, TopologyAwareScheduling on, an implicit topology request."""
        template = copy.deepcopy(job["spec"]["template"])
        meta = template.setdefault("metadata", {})
        meta.pop("creationTimestamp", None)
        for label in ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid"):
            (meta.get("labels") or {}).pop(label, None)
        pod_sets = [{"name": "main", "count": job["spec"].get("parallelism", 1),
                     "template": template,
                     "topologyRequest": {"podIndexLabel": INDEX_LABEL}}]  # fmt: skip
        return self.workload(job, pod_sets, status, queue=queue, prio=prio)

    def start(self, name: str, patch: dict[str, Any] | None = None) -> None:
        """JobReconciler.startJob: suspend false, the flavor's nodeLabels merged."""
        body = patch or {"spec": {"suspend": False,
                                  "template": {"spec": {"nodeSelector": NODE_LABELS}}}}  # fmt: skip
        self.batch.patch_namespaced_job(name, NS, body)


def custom(kueue: Kueue, group: str, version: str, plural: str, body: dict[str, Any]):
    return kueue.custom.create_namespaced_custom_object(group, version, NS, plural, body)


def replace_custom(kueue: Kueue, group: str, version: str, plural: str, body: dict[str, Any]):
    return kueue.custom.replace_namespaced_custom_object(
        group, version, NS, plural, body["metadata"]["name"], body
    )


def pod_sets_of(framework: str, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's podSets as Kueue's PodSets() reads them."""
    return [
        {"name": ps.name, "count": ps.count, "template": copy.deepcopy(dict(ps.template))}
        for ps in registry.ADAPTERS[framework].pod_sets(obj)
    ]


def pod_view(pod: Any) -> tuple[Any, ...]:
    """What adoption must not change on a pod: its uid, labels, annotations, finalizers, node
    selector, gates and node."""
    return (pod.metadata.uid, pod.metadata.labels, pod.metadata.annotations,
            pod.metadata.finalizers, pod.spec.node_selector, pod.spec.scheduling_gates,
            pod.spec.node_name)  # fmt: skip


class Starts:
    """Every object of the watched kinds seen running (not suspended), in order, and any
    seen suspended again after running; polled."""

    def __init__(self, kueue: Kueue, ran: list[str]) -> None:
        self.kueue = kueue
        self.order: list[str] = list(ran)
        self.ran: set[str] = set(ran)
        self.stopped: list[str] = []
        self.times: dict[str, float] = {}
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _seen(self, name: str, suspended: bool) -> None:
        if not suspended and name not in self.ran:
            self.ran.add(name)
            self.order.append(name)
            self.times[name] = time.time()
        elif suspended and name in self.ran and name not in self.stopped:
            self.stopped.append(name)

    def _poll(self) -> None:
        while not self.halt.wait(0.3):
            try:
                for job in self.kueue.batch.list_namespaced_job(NS).items:
                    if not job.metadata.owner_references:
                        self._seen(job.metadata.name, bool(job.spec.suspend))
                for plural, group, version in (("jobsets", "jobset.x-k8s.io", "v1alpha2"),
                                               ("rayjobs", "ray.io", "v1")):  # fmt: skip
                    items = self.kueue.custom.list_namespaced_custom_object(
                        group, version, NS, plural)["items"]  # fmt: skip
                    for obj in items:
                        self._seen(obj["metadata"]["name"], bool(obj["spec"].get("suspend")))
            except client.ApiException:
                continue


@pytest.fixture
def kueue_left(api_client, tmp_path):
    webhook_host_port()
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    before = {name: conversion(name) for name in CONVERTED}
    apply(*setup_objects())
    yield tmp_path
    for kind, name in KUEUE_WEBHOOKS:
        kubectl("delete", kind, name, "--ignore-not-found", check=False)
    for name, stanza in before.items():
        patch = json.dumps([{"op": "replace", "path": "/spec/conversion", "value": stanza}])
        kubectl(
            "patch", "crd", f"{name}.kueue.x-k8s.io", "--type", "json", "-p", patch, check=False
        )
    patch = json.dumps({"metadata": {"finalizers": None}})
    for plural in ("pods", "workloads.kueue.x-k8s.io"):
        names = kubectl("get", plural, "-n", NS, "-o", "jsonpath={.items[*].metadata.name}")
        for name in names.split():
            kubectl("patch", plural, name, "-n", NS, "--type", "merge", "-p", patch, check=False)
    kubectl("delete", "ns", NS, KUEUE_NS, "--wait=false", check=False)
    kubectl("wait", "--for=delete", f"namespace/{NS}", "--timeout=120s", check=False)
    for obj in setup_objects()[1:]:
        if not obj["metadata"].get("namespace"):
            kind = obj["kind"].lower()
            kubectl("delete", kind, obj["metadata"]["name"], "--wait=false", check=False)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


def left_jobset(kueue: Kueue) -> dict[str, Any]:
    """A JobSet admitted and started (RunWithPodSetsInfo), its Jobs made as JobSet's
    controller makes them (played: no JobSet controller here), their pods really running."""
    rjs = [{"name": rj, "replicas": n, "template": {"spec": {
        "parallelism": 1, "completions": 1, "backoffLimit": 0,
        "template": {"spec": sleeper()}}}} for rj, n in (("workers", 2), ("driver", 1))]  # fmt: skip
    made = custom(kueue, "jobset.x-k8s.io", "v1alpha2", "jobsets", {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "js", "labels": {QUEUE: "lq-k"}},
        "spec": {"suspend": True, "replicatedJobs": rjs}})  # fmt: skip
    sets = pod_sets_of("jobset.x-k8s.io/jobset", made)
    wl = kueue.workload(made, sets, admitted(cq_name("k"), sets), queue="lq-k")
    made["spec"]["suspend"] = False
    for rj in made["spec"]["replicatedJobs"]:
        kueue_started(rj["template"]["spec"]["template"], rj["name"], wl["metadata"]["name"])
    made = replace_custom(kueue, "jobset.x-k8s.io", "v1alpha2", "jobsets", made)
    for rj in made["spec"]["replicatedJobs"]:
        for i in range(rj["replicas"]):
            spec = copy.deepcopy(rj["template"]["spec"])
            kueue.batch.create_namespaced_job(NS, {
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": f"js-{rj['name']}-{i}",
                             "labels": {"jobset.sigs.k8s.io/jobset-name": "js",
                                        "jobset.sigs.k8s.io/replicatedjob-name": rj["name"]},
                             "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2",
                                                  "kind": "JobSet", "name": "js",
                                                  "uid": made["metadata"]["uid"],
                                                  "controller": True,
                                                  "blockOwnerDeletion": True}]},
                "spec": spec})  # fmt: skip
    return wl


def left_rayjob(kueue: Kueue) -> dict[str, Any]:
    """A RayJob admitted and started (RunWithPodSetsInfo: the cluster's groups and its
    submitterPodTemplate merged); KubeRay played: its head and worker pods, running."""
    made = custom(kueue, "ray.io", "v1", "rayjobs", {
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "ray", "labels": {QUEUE: "lq-k"}},
        "spec": {"suspend": True, "entrypoint": "python -c 'print(1)'",
                 "shutdownAfterJobFinishes": True,
                 "submitterPodTemplate": {"spec": sleeper("submitter")},
                 "rayClusterSpec": {
                     "headGroupSpec": {"rayStartParams": {},
                                       "template": {"spec": sleeper("ray-head")}},
                     "workerGroupSpecs": [{"groupName": "small-group", "replicas": 1,
                                           "minReplicas": 1, "maxReplicas": 1,
                                           "rayStartParams": {},
                                           "template": {"spec": sleeper("ray-worker")}}]}}})  # fmt: skip
    sets = pod_sets_of("ray.io/rayjob", made)
    assert [p["name"] for p in sets] == ["head", "small-group", "submitter"]
    wl = kueue.workload(made, sets, admitted(cq_name("k"), sets), queue="lq-k")
    name = wl["metadata"]["name"]
    made["spec"]["suspend"] = False
    spec = made["spec"]["rayClusterSpec"]
    kueue_started(spec["headGroupSpec"]["template"], "head", name)
    kueue_started(spec["workerGroupSpecs"][0]["template"], "small-group", name)
    kueue_started(made["spec"]["submitterPodTemplate"], "submitter", name)
    made = replace_custom(kueue, "ray.io", "v1", "rayjobs", made)
    kueue.custom.patch_namespaced_custom_object_status(
        "ray.io", "v1", NS, "rayjobs", "ray",
        {"status": {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
                    "rayClusterName": "ray-raycluster"}},
    )  # fmt: skip
    spec = made["spec"]["rayClusterSpec"]
    for pod, template, kind in (("ray-head", spec["headGroupSpec"]["template"], "head"),
                                ("ray-worker", spec["workerGroupSpecs"][0]["template"], "worker")):  # fmt: skip
        meta = copy.deepcopy(template.get("metadata") or {})
        meta["labels"] |= {"ray.io/cluster": "ray-raycluster", "ray.io/node-type": kind}
        kueue.core.create_namespaced_pod(NS, {"metadata": {**meta, "name": pod},
                                              "spec": template["spec"]})  # fmt: skip
    return wl


def left_statefulset(kueue: Kueue) -> dict[str, Any]:
    """A StatefulSet as its webhook marks it (pod-suspending-parent), its Workload from the
    StatefulSet reconciler's constructWorkload, its pods made by the real StatefulSet
    controller, stamped by the StatefulSet pod reconciler's setDefault and let through by the
    pod reconciler's Run (gate off, podset.Merge). Kueue's pod webhook is not there to gate
    the pods, so the template carries its gate for it."""
    spec = sleeper("web")
    app = f"web-{SUFFIX}"
    template = {"metadata": {"labels": {QUEUE: "lq-k", "app": app},
                             "annotations": {"kueue.x-k8s.io/pod-suspending-parent": "statefulset"}},
                "spec": {**copy.deepcopy(spec), "restartPolicy": "Always",
                         "schedulingGates": [{"name": ADMISSION_GATE}]}}  # fmt: skip
    sts = kueue.apps.create_namespaced_stateful_set(NS, {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "labels": {QUEUE: "lq-k"}},
        "spec": {"replicas": 2, "serviceName": "web", "podManagementPolicy": "Parallel",
                 "selector": {"matchLabels": {"app": app}}, "template": template}})  # fmt: skip
    sts = kueue.api.sanitize_for_serialization(sts)
    sts["apiVersion"], sts["kind"] = "apps/v1", "StatefulSet"
    pod_spec = {**copy.deepcopy(spec), "restartPolicy": "Always"}
    sets = [{"name": "main", "count": 2, "template": {"spec": pod_spec},
             "topologyRequest": {"podIndexLabel": "apps.kubernetes.io/pod-index"}}]  # fmt: skip
    wl = kueue.workload(sts, sets, admitted(cq_name("k"), sets), queue="lq-k", controller=False,
                        annotations={"kueue.x-k8s.io/is-group-workload": "true",
                                     "kueue.x-k8s.io/job-owner-gvk": "apps/v1, Kind=StatefulSet",
                                     "kueue.x-k8s.io/job-owner-name": "web"})  # fmt: skip
    name = wl["metadata"]["name"]
    wait(lambda: len(kueue.core.list_namespaced_pod(NS, label_selector=f"app={app}").items) == 2,
         60, "the StatefulSet's two pods")  # fmt: skip
    for pod in kueue.core.list_namespaced_pod(NS, label_selector=f"app={app}").items:
        index = pod.metadata.labels["apps.kubernetes.io/pod-index"]
        ops = [
            {"op": "remove", "path": "/spec/schedulingGates"},
            {"op": "add", "path": "/spec/nodeSelector", "value": NODE_LABELS},
        ]
        labels = {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/pod-group-name": name,
                  PODSET_LABEL: "main"}  # fmt: skip
        annotations = {
            "kueue.x-k8s.io/prebuilt-workload-name": name,
            "kueue.x-k8s.io/pod-group-total-count": "2",
            "kueue.x-k8s.io/pod-group-fast-admission": "true",
            "kueue.x-k8s.io/pod-group-serving": "true",
            "kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index",
            "kueue.x-k8s.io/role-hash": "main",
            WORKLOAD_ANNOTATION: name,
        }
        for key, value in labels.items():
            ops.append({"op": "add", "path": f"/metadata/labels/{key.replace('/', '~1')}",
                        "value": value})  # fmt: skip
        for key, value in annotations.items():
            ops.append({"op": "add", "path": f"/metadata/annotations/{key.replace('/', '~1')}",
                        "value": value})  # fmt: skip
        assert index in ("0", "1")
        kubectl("patch", "pod", pod.metadata.name, "-n", NS, "--type", "json", "-p",
                json.dumps(ops))  # fmt: skip
    return wl


def checks_status(state: str) -> dict[str, Any]:
    """Quota reserved, the check as its controller set it, and SyncAdmittedCondition."""
    cq = cq_name("c")
    sets = [{"name": "main", "count": 1, "template": {"spec": sleeper()}}]
    status = admitted(cq, sets)
    entry: dict[str, Any] = {"name": CHECK, "state": state, "message": "",
                             "lastTransitionTime": now()}  # fmt: skip
    if state == "Ready":
        entry["podSetUpdates"] = [{"name": "main", "labels": {"example.com/provisioned": "yes"}}]
    else:
        status["conditions"][1] = condition(
            "Admitted", "False", "UnsatisfiedChecks", "The workload has not all checks ready"
        )
    status["admissionChecks"] = [entry]
    return status


def left_tas(kueue: Kueue, node: str) -> dict[str, Any]:
    """An Indexed Job of 2 pods requiring one host, admitted with its topologyAssignment,
    started (FromAssignment adds the topology gate), its pods let through by Kueue's
    topologyUngater (gate off, the host's label added to the nodeSelector)."""
    body = job_manifest({QUEUE: "lq-t", "kueue.x-k8s.io/priority-class": level("low")},
                        name="tas-kueue", cpu="50m", memory="16Mi", seconds=3600, suspend=True)  # fmt: skip
    body["spec"] |= {
        "parallelism": 2,
        "completions": 2,
        "completionMode": "Indexed",
        "backoffLimit": 2,
    }  # a pod deleted below is replaced, not the Job failed
    body["spec"]["template"]["metadata"] = {
        "annotations": {"kueue.x-k8s.io/podset-required-topology": HOSTNAME}
    }
    job = kueue.api.sanitize_for_serialization(kueue.batch.create_namespaced_job(NS, body))
    template = copy.deepcopy(job["spec"]["template"])
    template["metadata"].pop("creationTimestamp", None)
    sets = [{"name": "main", "count": 2, "template": template,
             "topologyRequest": {"required": HOSTNAME,
                                 "podIndexLabel": INDEX_LABEL}}]  # fmt: skip
    status = admitted(cq_name("t"), sets, TAS_FLAVOR)
    status["admission"]["podSetAssignments"][0]["topologyAssignment"] = {
        "levels": [HOSTNAME],
        "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": node}],
                    "podCounts": {"universal": 2}}],
    }  # fmt: skip
    wl = kueue.workload(job, sets, status, queue="lq-t")
    started = {"spec": {"suspend": False, "template": {
        "metadata": {"labels": {PODSET_LABEL: "main"},
                     "annotations": {WORKLOAD_ANNOTATION: wl["metadata"]["name"]}},
        "spec": {"nodeSelector": NODE_LABELS, "schedulingGates": [{"name": TOPOLOGY_GATE}]}}}}  # fmt: skip
    kueue.start("tas-kueue", started)
    selector = "batch.kubernetes.io/job-name=tas-kueue"
    wait(lambda: len(kueue.core.list_namespaced_pod(NS, label_selector=selector).items) == 2,
         60, "the TAS Job's pods")  # fmt: skip
    for pod in kueue.core.list_namespaced_pod(NS, label_selector=selector).items:
        ops = [{"op": "remove", "path": "/spec/schedulingGates"},
               {"op": "add", "path": f"/spec/nodeSelector/{HOSTNAME.replace('/', '~1')}",
                "value": node}]  # fmt: skip
        kubectl("patch", "pod", pod.metadata.name, "-n", NS, "--type", "json", "-p",
                json.dumps(ops))  # fmt: skip
    return wl


def evicted_backing_off(name: str, requeue_at: str) -> dict[str, Any]:
    """PodsReady timeout: SetEvictedCondition, UpdateRequeueState, quota unset, Requeued
    False."""
    timeout = f"Exceeded the PodsReady timeout {NS}/{name}"
    return {
        "conditions": [
            condition("QuotaReserved", "False", "Pending", timeout),
            condition("Admitted", "False", "NoReservation", "The workload has no reservation"),
            condition("Evicted", "True", "PodsReadyTimeout", timeout),
            condition("Requeued", "False", "PodsReadyTimeout", timeout),
        ],
        "requeueState": {"count": 1, "requeueAt": requeue_at},
    }


def pending_status(cq: str) -> dict[str, Any]:
    message = (f"couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
               f"flavor {FLAVOR}, 400m more needed")  # fmt: skip
    return {"conditions": [condition("QuotaReserved", "False", "Pending", message)]}


def test_tower_adopts_kinds_tas_checks_and_backoff_on_the_plane(api_client, kueue_left, real_node):
    tmp = kueue_left
    kueue = Kueue(api_client)
    batch, core = kueue.batch, kueue.core
    cq_k = cq_name("k")
    kinds = {"JobSet": left_jobset(kueue), "RayJob": left_rayjob(kueue),
             "StatefulSet": left_statefulset(kueue)}  # fmt: skip
    left_tas(kueue, real_node)
    # Admission checks: one Ready (its Job started with the check's podSetUpdates), one
    # Pending (its Job suspended, its quota reserved).
    checked = kueue.job("checked", "lq-c", "low", 3600)
    kueue.job_workload(checked, "lq-c", "low", checks_status("Ready"))
    kueue.start("checked", {"spec": {"suspend": False, "template": {
        "metadata": {"labels": {PODSET_LABEL: "main", "example.com/provisioned": "yes"}},
        "spec": {"nodeSelector": NODE_LABELS}}}})  # fmt: skip
    checking = kueue.job("checking", "lq-c", "low", 5)
    kueue.job_workload(checking, "lq-c", "low", checks_status("Pending"))
    # cq-k (900m): 400m used by the three kinds, 450m by "hold" (ends in 90s); two of 450m
    # waiting.
    hold = kueue.job("hold", "lq-k", "low", 90, cpu="450m")
    sets = [{"name": "main", "count": 1, "template": {"spec": sleeper(cpu="450m")}}]
    kueue.job_workload(hold, "lq-k", "low", admitted(cq_k, sets))
    kueue.start("hold")
    for name, prio in (("wait-low", "low"), ("wait-high", "high")):
        kueue.job_workload(kueue.job(name, "lq-k", prio, 15, cpu="450m"), "lq-k", prio,
                           pending_status(cq_k))  # fmt: skip
        time.sleep(1.1)  # creationTimestamp has seconds
    long_running = {"js-", "ray-", "web-", "tas-kueue-", "checked-"}
    wait(lambda: sum(p.status.phase == "Running" and any(p.metadata.name.startswith(x)
                                                          for x in long_running)
                     for p in core.list_namespaced_pod(NS).items) == 10, 180,
         "the ten long-running pods Kueue let through to run")  # fmt: skip
    pods = {p.metadata.name: pod_view(p) for p in core.list_namespaced_pod(NS).items
            if any(p.metadata.name.startswith(x) for x in long_running)}  # fmt: skip
    backoff = kueue.job("backoff", "lq-b", "urgent", 4)
    requeue_at = now(75)
    kueue.job_workload(backoff, "lq-b", "urgent", evicted_backing_off("backoff", requeue_at))
    before = {job: kueue.get(job) for job in kueue.names}
    states = {"admitted and running": 6, "reserved, check Pending": 1, "pending": 2,
              "evicted, backing off": 1}  # fmt: skip
    measured(f"adoption (kinds, TAS, checks): Kueue left {sum(states.values())} Workloads: "
             f"{states}; {len(pods)} pods running")  # fmt: skip

    kueues_plumbing()
    starts = Starts(kueue, ["js", "ray", "hold", "checked", "tas-kueue"])
    starts.thread.start()
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    controller = None
    try:
        over = kubectl_tower("takeover", "--from", "kueue", "--webhook-url", WEBHOOK_URL or "",
                             "--certs-dir", str(tmp), "--yes")  # fmt: skip
        assert over.returncode == 0, over.stderr + over.stdout
        controller = controller_process()
        began = time.time()
        time.sleep(8)
        kept = {}
        for job in [*list(kinds), "tas"]:
            owner = {"JobSet": "js", "RayJob": "ray", "StatefulSet": "web", "tas": "tas-kueue"}[job]
            wl = kueue.get(owner)
            same = (wl["metadata"]["uid"] == before[owner]["metadata"]["uid"]
                    and wl["status"]["admission"] == before[owner]["status"]["admission"]
                    and wl["metadata"]["finalizers"] == [FINALIZER])  # fmt: skip
            kept[job] = same
        assert all(kept.values()), kept
        for plural, group, version, name in (("jobsets", "jobset.x-k8s.io", "v1alpha2", "js"),
                                             ("rayjobs", "ray.io", "v1", "ray")):  # fmt: skip
            obj = kueue.custom.get_namespaced_custom_object(group, version, NS, plural, name)
            assert obj["spec"]["suspend"] is False, name
        checks_kept = 0
        for job in ("checked", "checking"):
            wl = kueue.get(job)
            assert wl["status"]["admission"] == before[job]["status"]["admission"]
            assert wl["status"]["admissionChecks"] == before[job]["status"]["admissionChecks"]
            checks_kept += 1
        assert batch.read_namespaced_job("checking", NS).spec.suspend is True
        # The check's controller says Ready: admitted on Kueue's reservation.
        ready = kueue.get("checking")["status"]["admissionChecks"]
        ready[0] |= {"state": "Ready", "lastTransitionTime": now()}
        kueue.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, "workloads", kueue.names["checking"],
            {"status": {"admissionChecks": ready}})  # fmt: skip
        wait(lambda: "checking" in starts.ran, 60, "the checked Job started once Ready")
        assert (
            kueue.get("checking")["status"]["admission"]
            == before["checking"]["status"]["admission"]
        )

        # cq-k frees as "hold" ends: high before low, then a burst by priority.
        wait(lambda: "wait-high" in starts.ran, 120, "wait-high admitted after hold")
        labels = {QUEUE: "lq-k"}
        for name, prio in (("n-low", "low"), ("n-urgent", "urgent"), ("n-high", "high")):
            body = job_manifest(labels | {"kueue.x-k8s.io/priority-class": level(prio)},
                                name=name, cpu="450m", memory="16Mi", seconds=4)  # fmt: skip
            batch.create_namespaced_job(NS, body)
        wait(lambda: {"wait-low", "n-low", "n-urgent", "n-high", "backoff"} <= starts.ran, 240,
             "every waiting Job admitted in turn")  # fmt: skip
        order = [n for n in starts.order if n.startswith(("wait-", "n-"))]
        expected = ["wait-high", "n-urgent", "n-high", "wait-low", "n-low"]
        changes = int(order != expected)
        back_at = starts.times["backoff"] - datetime.fromisoformat(requeue_at).timestamp()
        back = kueue.get("backoff")
        assert back["status"]["requeueState"]["count"] == 1
        assert began < datetime.fromisoformat(requeue_at).timestamp(), "requeueAt already past"

        now_pods = {p.metadata.name: pod_view(p) for p in core.list_namespaced_pod(NS).items
                    if p.metadata.name in pods}  # fmt: skip
        touched = sorted(n for n in pods if now_pods.get(n) != pods[n])
        per_owner: dict[str, int] = {}
        for wl in kueue.custom.list_namespaced_custom_object(GROUP, VERSION, NS, "workloads")[
            "items"
        ]:
            owner = wl["metadata"]["ownerReferences"][0]["name"]
            per_owner[owner] = per_owner.get(owner, 0) + 1
        doubles = sum(count - 1 for count in per_owner.values())
        measured(f"adoption (kinds): JobSet, RayJob, StatefulSet kept admitted "
                 f"{sum(kept[k] for k in kinds)} of 3, TAS assignment kept {int(kept['tas'])} "
                 f"of 1, {len(pods) - len(touched)} of {len(pods)} running pods untouched "
                 f"(labels, annotations, finalizers, nodeSelector, gates, node)")  # fmt: skip
        measured(f"adoption (checks): {checks_kept} of 2 admission-check states kept; the "
                 f"Pending one admitted on Kueue's reservation once Ready")  # fmt: skip
        measured(f"adoption (backoff): admitted {back_at:.1f}s after Kueue's requeueAt "
                 f"(Tower running {datetime.fromisoformat(requeue_at).timestamp() - began:.0f}s "
                 f"before it), requeueState.count kept")  # fmt: skip
        measured(f"adoption (kinds, TAS, checks): {len(starts.stopped)} restarted, {doubles} "
                 f"double admissions, {changes} order changes (order {order})")  # fmt: skip
        assert touched == [], touched
        assert back_at >= 0, back_at

        # A StatefulSet pod lost (its controller makes it again, gated) and a pod of Kueue's
        # TAS Job replaced by the Job controller (gated by its template): each let through
        # under Kueue's admission, the TAS one to its host in Kueue's assignment.
        core.delete_namespaced_pod("web-1", NS, grace_period_seconds=0)
        tas_pod = core.list_namespaced_pod(
            NS, label_selector="batch.kubernetes.io/job-completion-index=1,"
            "batch.kubernetes.io/job-name=tas-kueue").items[0].metadata.name  # fmt: skip
        core.delete_namespaced_pod(tas_pod, NS, grace_period_seconds=0)

        known = {view[0] for view in pods.values()}

        def let_through(selector: str) -> Any:
            """A pod of `selector` made after takeover, ungated and running."""
            for pod in core.list_namespaced_pod(NS, label_selector=selector).items:
                fresh = pod.metadata.uid not in known and not pod.spec.scheduling_gates
                if fresh and pod.status.phase == "Running":
                    return pod
            return None

        web = wait(lambda: let_through("apps.kubernetes.io/pod-index=1,app=web-" + SUFFIX),
                   120, "web-1 made again and let through")  # fmt: skip
        assert web.metadata.uid != pods["web-1"][0]
        assert web.spec.node_selector == NODE_LABELS
        # Told its group by Tower, in an annotation (WorkloadIdentifierAnnotations, on).
        assert web.metadata.annotations["kueue.x-k8s.io/pod-group-name"] == kueue.names["web"]
        tas_new = wait(lambda: let_through("batch.kubernetes.io/job-completion-index=1,"
                                           "batch.kubernetes.io/job-name=tas-kueue"),
                       120, "the TAS pod replaced and let through")  # fmt: skip
        assert tas_new.spec.node_selector[HOSTNAME] == real_node
        assert kueue.get("web")["status"]["admission"] == before["web"]["status"]["admission"]
        assert (
            kueue.get("tas-kueue")["status"]["admission"]
            == (before["tas-kueue"]["status"]["admission"])
        )
        owners = [w["metadata"]["ownerReferences"][0]["name"] for w in
                  kueue.custom.list_namespaced_custom_object(GROUP, VERSION, NS,
                                                             "workloads")["items"]]  # fmt: skip
        assert (owners.count("web"), owners.count("tas-kueue")) == (1, 1), owners
        measured("adoption (kinds, TAS): a StatefulSet pod made again and a TAS pod replaced "
                 "after takeover each let through under Kueue's admission (the TAS one to its "
                 "host in Kueue's assignment), 0 Workloads made")  # fmt: skip
        assert (len(starts.stopped), doubles, changes) == (0, 0, 0), (starts.stopped, order)
    finally:
        starts.halt.set()
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=30)
        webhook.terminate()
        webhook.wait(timeout=20)

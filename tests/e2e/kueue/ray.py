"""KubeRay played for the port of Kueue's kuberay e2e cases: its objects, built as Kueue's
wrappers build them, and its operator, which does not run here.

`KubeRay` watches one namespace from a thread and does what KubeRay's operator does there, as
far as Kueue reads it: a RayJob or RayService not suspended gets a RayCluster made from its
spec (its labels, annotations and KubeRay's originated-from labels copied); a RayCluster not
suspended gets its head pod and one pod per worker replica (KubeRay's labels and names; the
autoscaler sidecar in the head of an in-tree autoscaling cluster, the submitter in it in
SidecarMode), pods gone are replaced, extra ones deleted; its status says ready once every
pod runs; a GCS fault-tolerant one carries KubeRay's Redis cleanup finalizer, and once deleted
runs the cleanup Job before the finalizer comes off. A RayJob's submitter Job is made once its cluster is ready, and the job is Complete
when that Job succeeds, its cluster then deleted (shutdownAfterJobFinishes). What Ray's
autoscaler decides from a script's demand, the test decides: it scales a worker group with
`scale`. Images are the node's stand-ins (tests/e2e/images.py): a Ray process is agnhost's
`netexec`, which waits until stopped.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any

from kubernetes import client, config

from tests.e2e.conftest import KUBECONFIG, kubectl
from tests.e2e.kueue.util import AGNHOST, QUEUE_LABEL, ROOT, end_container

log = logging.getLogger("tests.kuberay")

RAY, RAY_V = "ray.io", "v1"
CRDS = ROOT / "tests" / "data" / "kuberay"
ELASTIC = "kueue.x-k8s.io/elastic-job"
REPLICA_SIZES = "kueue.x-k8s.io/raycluster-podset-replica-sizes"
# KubeRay's labels (ray-operator/controllers/ray/utils/constant.go).
CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
FROM_CRD, FROM_NAME = "ray.io/originated-from-crd", "ray.io/originated-from-cr-name"
# KubeRay's default containers, as it adds them.
SUBMITTER = "ray-job-submitter"
SUBMITTER_RESOURCES = {"limits": {"cpu": "1", "memory": "1Gi"},
                       "requests": {"cpu": "500m", "memory": "200Mi"}}  # fmt: skip
GCS_FT_FINALIZER = "ray.io/gcs-ft-redis-cleanup-finalizer"
REDIS_CLEANUP_RESOURCES = {"limits": {"cpu": "200m", "memory": "256Mi"},
                           "requests": {"cpu": "200m", "memory": "256Mi"}}  # fmt: skip
AUTOSCALER = "autoscaler"
AUTOSCALER_RESOURCES = {"limits": {"cpu": "500m", "memory": "512Mi"},
                        "requests": {"cpu": "500m", "memory": "512Mi"}}  # fmt: skip
# The Ray image of Kueue's suite (util.GetKuberayTestImage), stood in for by agnhost: a Ray
# node is a process that runs until stopped.
RAY_IMAGE = AGNHOST
RAY_ARGS = ["netexec"]
OBJECT_STORE_MEMORY = "100000000"  # objectStoreMemory in Kueue's cases
SERVE_PORT = 8000
# The cases' Serve app answers "Hello, World!" on the head's port 8000: busybox's httpd here.
SERVE = (
    "mkdir -p /tmp/serve && echo 'Hello, World!' > /tmp/serve/index.html && "
    f"exec httpd -f -p {SERVE_PORT} -h /tmp/serve"
)


def install_crds() -> None:
    """KubeRay's CRDs (tests/data/kuberay), as Kueue's e2e kind cluster installs them."""
    for crd in sorted(CRDS.glob("ray.io_*.yaml")):
        # Server-side: the CRDs are larger than client-side apply's annotation allows.
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd))
    kubectl("wait", "--for=condition=Established", "crd", "rayclusters.ray.io",
            "rayjobs.ray.io", "rayservices.ray.io", "--timeout=60s")  # fmt: skip


# ----- the objects, as Kueue's wrappers build them ---------------------------------------


def _container(name: str, cpu: str | None) -> dict[str, Any]:
    resources = {"cpu": cpu} if cpu else {}
    return {"name": name, "image": RAY_IMAGE, "args": list(RAY_ARGS),
            "imagePullPolicy": "IfNotPresent",
            "resources": {"requests": dict(resources), "limits": dict(resources)}}  # fmt: skip


def cluster_spec(
    *,
    head: str = "head-container",
    worker: str = "worker-container",
    head_cpu: str | None = None,
    worker_cpu: str | None = None,
    replicas: int = 1,
    min_replicas: int = 0,
    max_replicas: int = 10,
    restart_never: bool = False,
    grace: int | None = None,
) -> dict[str, Any]:
    """testingraycluster.MakeCluster(...).Spec (RequestAndLimit, Image, RayStartParam)."""
    pod: dict[str, Any] = {"restartPolicy": "Never"} if restart_never else {}
    if grace is not None:
        pod["terminationGracePeriodSeconds"] = grace
    return {
        "rayVersion": "2.41.0",
        "headGroupSpec": {
            "rayStartParams": {"object-store-memory": OBJECT_STORE_MEMORY},
            "template": {
                "spec": {**pod, "nodeSelector": {}, "containers": [_container(head, head_cpu)]}
            },
        },
        "workerGroupSpecs": [
            {
                "groupName": "workers-group-0",
                "replicas": replicas,
                "minReplicas": min_replicas,
                "maxReplicas": max_replicas,
                "rayStartParams": {"object-store-memory": OBJECT_STORE_MEMORY},
                "template": {
                    "spec": {
                        **copy.deepcopy(pod),
                        "nodeSelector": {},
                        "containers": [_container(worker, worker_cpu)],
                    }
                },
            }
        ],
    }


def autoscaling(spec: dict[str, Any]) -> dict[str, Any]:
    """EnableInTreeAutoscaling(): Aggressive upscaling, 10 s idle timeout."""
    spec["enableInTreeAutoscaling"] = True
    spec["autoscalerOptions"] = {"upscalingMode": "Aggressive", "idleTimeoutSeconds": 10}
    return spec


def _meta(name: str, namespace: str, queue: str, elastic: bool) -> dict[str, Any]:
    annotations = {ELASTIC: "true"} if elastic else {}
    return {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue},
            "annotations": annotations}  # fmt: skip


def make_ray_job(
    name: str, namespace: str, queue: str, spec: dict[str, Any], *,
    mode: str = "K8sJobMode", submitter_cpu: str | None = None, elastic: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """testingrayjob.MakeJob(...).Queue(...).WithSubmissionMode(...)
    .WithSubmitterPodTemplate(a container of `submitter_cpu`)."""
    body: dict[str, Any] = {
        "shutdownAfterJobFinishes": True,
        "submissionMode": mode,
        "entrypoint": 'python -c "import ray; ray.init(); print(ray.cluster_resources())"',
        "rayClusterSpec": spec,
        "suspend": not spec.get("enableInTreeAutoscaling"),  # EnableInTreeAutoscaling's
    }
    if submitter_cpu is not None:
        container = _container("rayjob-submitter", submitter_cpu)
        del container["args"], container["imagePullPolicy"]
        body["submitterPodTemplate"] = {
            "spec": {"restartPolicy": "OnFailure", "containers": [container]}
        }
    return {"apiVersion": f"{RAY}/{RAY_V}", "kind": "RayJob",
            "metadata": _meta(name, namespace, queue, elastic), "spec": body}  # fmt: skip


def make_ray_cluster(
    name: str, namespace: str, queue: str, spec: dict[str, Any], *, elastic: bool = False
) -> dict[str, Any]:
    """testingraycluster.MakeCluster(...).Suspend(true).Queue(...)."""
    return {"apiVersion": f"{RAY}/{RAY_V}", "kind": "RayCluster",
            "metadata": _meta(name, namespace, queue, elastic),
            "spec": {**spec, "suspend": True}}  # fmt: skip


def make_ray_service(
    name: str, namespace: str, queue: str, spec: dict[str, Any], *,
    serve_config: str | None = None, elastic: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """testingrayservice.MakeService(...).Suspend(true).Queue(...).WithServeConfigV2(...)."""
    body: dict[str, Any] = {"rayClusterConfig": {**spec, "suspend": True}}
    if serve_config is not None:
        body["serveConfigV2"] = serve_config
    return {"apiVersion": f"{RAY}/{RAY_V}", "kind": "RayService",
            "metadata": _meta(name, namespace, queue, elastic), "spec": body}  # fmt: skip


# ----- reading what KubeRay made (test/util/kuberay.go) ----------------------------------


def _pods(core: client.CoreV1Api, namespace: str, selector: str) -> list[Any]:
    return list(core.list_namespaced_pod(namespace, label_selector=selector).items)


def head_pod(core: client.CoreV1Api, namespace: str, cluster: str) -> Any:
    """util.GetRayClusterHeadPod: exactly one head pod (AssertionError otherwise)."""
    pods = _pods(core, namespace, f"{CLUSTER_LABEL}={cluster},{NODE_TYPE_LABEL}=head")
    assert len(pods) == 1, (
        f"expected exactly one head Pod for RayCluster {cluster}, got {len(pods)}"
    )
    return pods[0]


def worker_pods(
    core: client.CoreV1Api, namespace: str, cluster: str, phase: str | None = "Running"
) -> list[Any]:
    """util.GetRayClusterWorkerPods: the cluster's worker pods in `phase` (None: all)."""
    pods = _pods(core, namespace, f"{CLUSTER_LABEL}={cluster},{NODE_TYPE_LABEL}=worker")
    return [p for p in pods if phase is None or p.status.phase == phase]


def container(pod_spec: Any, name: str) -> Any:
    """findContainer: the named container of a pod's (or a template's) spec, or None."""
    containers = pod_spec["containers"] if isinstance(pod_spec, dict) else pod_spec.containers
    for c in containers:
        if (c["name"] if isinstance(c, dict) else c.name) == name:
            return c
    return None


# ----- the operator ---------------------------------------------------------------------


def _owner(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def _running(pod: Any) -> bool:
    return pod.status.phase == "Running" and not pod.metadata.deletion_timestamp


def _live(pod: Any) -> bool:
    return pod.status.phase not in ("Succeeded", "Failed") and not pod.metadata.deletion_timestamp


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class KubeRay:
    """KubeRay's operator in one namespace, played from a thread every half second."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.api = config.new_client_from_config(config_file=KUBECONFIG)
        self.custom = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        self.batch = client.BatchV1Api(self.api)
        self.script_seconds: dict[str, int] = {}  # RayJob -> its script's run time (else waits)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kuberay-{namespace}", daemon=True)

    def __enter__(self) -> KubeRay:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self.errors, f"the KubeRay stand-in failed: {self.errors[:5]}"

    # --- what the test plays for Ray itself ---

    def scale(self, cluster: str, group: str, replicas: int) -> None:
        """Ray's autoscaler asks KubeRay for `replicas` workers of `group`."""
        obj = self._get("rayclusters", cluster)
        groups = copy.deepcopy(obj["spec"]["workerGroupSpecs"])
        for g in groups:
            if g["groupName"] == group:
                g["replicas"] = replicas
        self.custom.patch_namespaced_custom_object(
            RAY, RAY_V, self.namespace, "rayclusters", cluster,
            {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
             "spec": {"workerGroupSpecs": groups}},
        )  # fmt: skip

    def end_script(self, ray_job: str) -> None:
        """The RayJob's script ends with success: its submitter's process exits 0."""
        selector = f"job-name={ray_job}"
        for pod in _pods(self.core, self.namespace, selector):
            if _running(pod):
                end_container(pod)

    # --- the loop ---

    def _run(self) -> None:
        while not self._stop.is_set():
            for plural, step in (("rayjobs", self._ray_job), ("rayservices", self._ray_service),
                                 ("rayclusters", self._ray_cluster)):  # fmt: skip
                try:
                    items = self._list(plural)
                    for obj in items:
                        step(obj)
                except client.ApiException as err:
                    if err.status not in (404, 409):
                        self.errors.append(f"{plural}: {err.status} {err.reason}")
                except Exception as err:  # the test reads the errors
                    self.errors.append(f"{plural}: {err!r}")
                    log.exception("kuberay stand-in")
            self._stop.wait(0.5)

    def _list(self, plural: str) -> list[dict[str, Any]]:
        return list(
            self.custom.list_namespaced_custom_object(RAY, RAY_V, self.namespace, plural)["items"]
        )

    def _get(self, plural: str, name: str) -> dict[str, Any]:
        return dict(self.custom.get_namespaced_custom_object(RAY, RAY_V, self.namespace, plural,
                                                             name))  # fmt: skip

    def _status(self, plural: str, name: str, status: dict[str, Any]) -> None:
        self.custom.patch_namespaced_custom_object_status(
            RAY, RAY_V, self.namespace, plural, name, {"status": status}
        )

    def _cluster_for(self, parent: dict[str, Any], spec: dict[str, Any]) -> str:
        """A RayCluster for a RayJob or RayService, as KubeRay constructs it."""
        meta = parent["metadata"]
        kind = parent["kind"]
        labels = {**(meta.get("labels") or {}), FROM_CRD: kind, FROM_NAME: meta["name"]}
        body = {
            "apiVersion": f"{RAY}/{RAY_V}", "kind": "RayCluster",
            "metadata": {"generateName": f"{meta['name']}-", "namespace": self.namespace,
                         "labels": labels, "annotations": dict(meta.get("annotations") or {}),
                         "ownerReferences": [_owner(parent)]},
            "spec": {k: copy.deepcopy(v) for k, v in spec.items() if k != "suspend"},
        }  # fmt: skip
        if spec.get("gcsFaultToleranceOptions"):
            body["metadata"]["finalizers"] = [GCS_FT_FINALIZER]
        made = self.custom.create_namespaced_custom_object(
            RAY, RAY_V, self.namespace, "rayclusters", body
        )
        return str(made["metadata"]["name"])

    def _ray_job(self, job: dict[str, Any]) -> None:
        spec, status = job["spec"], dict(job.get("status") or {})
        name = job["metadata"]["name"]
        deployment = status.get("jobDeploymentStatus")
        if deployment in ("Complete", "Failed") or job["metadata"].get("deletionTimestamp"):
            return
        cluster = status.get("rayClusterName") or ""
        if spec.get("suspend"):
            if cluster:
                self._delete_cluster(cluster)
            if deployment != "Suspended":
                self._status("rayjobs", name, {"jobDeploymentStatus": "Suspended",
                                               "rayClusterName": ""})  # fmt: skip
            return
        if not cluster:
            cluster = self._cluster_for(job, spec["rayClusterSpec"])
            self._status("rayjobs", name, {"jobDeploymentStatus": "Initializing",
                                           "rayClusterName": cluster, "jobId": name,
                                           "startTime": _now()})  # fmt: skip
            return
        try:
            ray_cluster = self._get("rayclusters", cluster)
        except client.ApiException as err:
            if err.status == 404:
                return
            raise
        cluster_status = ray_cluster.get("status") or {}
        if deployment == "Initializing" and cluster_status.get("state") == "ready":
            if spec.get("submissionMode", "K8sJobMode") == "K8sJobMode":
                self._submitter(job)
            self._status("rayjobs", name, {"jobDeploymentStatus": "Running",
                                           "jobStatus": "RUNNING",
                                           "rayClusterStatus": cluster_status})  # fmt: skip
            return
        if deployment == "Running":
            if status.get("rayClusterStatus", {}).get("state") != cluster_status.get("state"):
                self._status("rayjobs", name, {"rayClusterStatus": cluster_status})
            if self._script_done(job):
                self._status("rayjobs", name, {"jobDeploymentStatus": "Complete",
                                               "jobStatus": "SUCCEEDED", "endTime": _now(),
                                               "message": "Job finished successfully."})  # fmt: skip
                self._delete_cluster(cluster)  # shutdownAfterJobFinishes

    def _script_done(self, job: dict[str, Any]) -> bool:
        name = job["metadata"]["name"]
        if job["spec"].get("submissionMode", "K8sJobMode") != "K8sJobMode":
            return False
        try:
            submitter = self.batch.read_namespaced_job(name, self.namespace)
        except client.ApiException as err:
            if err.status == 404:
                return False
            raise
        return bool(submitter.status and submitter.status.succeeded)

    def _submitter(self, job: dict[str, Any]) -> None:
        """The submitter Job (K8sJobMode), named as its RayJob; its container runs the script
        (`script_seconds`, else it waits until `end_script`)."""
        meta, spec = job["metadata"], job["spec"]
        template = copy.deepcopy(spec.get("submitterPodTemplate") or {"spec": {
            "restartPolicy": "Never",
            "containers": [{"name": SUBMITTER, "image": RAY_IMAGE,
                            "resources": copy.deepcopy(SUBMITTER_RESOURCES)}]}})  # fmt: skip
        first = template["spec"]["containers"][0]
        seconds = self.script_seconds.get(meta["name"])
        if seconds is not None:
            first["command"] = ["sh", "-c", f"sleep {seconds}"]
        else:
            first["args"] = list(RAY_ARGS)
        first.setdefault("image", RAY_IMAGE)
        body = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": meta["name"], "namespace": self.namespace,
                             "labels": {FROM_CRD: "RayJob", FROM_NAME: meta["name"]},
                             "ownerReferences": [_owner(job)]},
                "spec": {"backoffLimit": 2, "template": template}}  # fmt: skip
        try:
            self.batch.create_namespaced_job(self.namespace, body)
        except client.ApiException as err:
            if err.status != 409:
                raise

    def _ray_service(self, service: dict[str, Any]) -> None:
        spec, status = service["spec"], dict(service.get("status") or {})
        name = service["metadata"]["name"]
        if service["metadata"].get("deletionTimestamp"):
            return
        active = dict(status.get("activeServiceStatus") or {})
        cluster = active.get("rayClusterName") or ""
        if spec["rayClusterConfig"].get("suspend"):
            return
        if not cluster:
            cluster = self._cluster_for(service, spec["rayClusterConfig"])
            self._status("rayservices", name, {"activeServiceStatus": {"rayClusterName": cluster},
                                               "serviceStatus": "Pending"})  # fmt: skip
            return
        try:
            state = (self._get("rayclusters", cluster).get("status") or {}).get("state")
        except client.ApiException as err:
            if err.status == 404:
                return
            raise
        ready = [c for c in status.get("conditions") or [] if c["type"] == "Ready"]
        if state == "ready" and not (ready and ready[0]["status"] == "True"):
            self._status("rayservices", name, {"serviceStatus": "Running", "conditions": [
                {"type": "Ready", "status": "True", "reason": "RayServiceReady",
                 "message": "Number of serve endpoints is greater than 0",
                 "lastTransitionTime": _now()}]})  # fmt: skip

    def _delete_cluster(self, cluster: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(
                RAY, RAY_V, self.namespace, "rayclusters", cluster
            )
        except client.ApiException as err:
            if err.status != 404:
                raise

    def _ray_cluster(self, cluster: dict[str, Any]) -> None:
        meta, spec = cluster["metadata"], cluster["spec"]
        name = meta["name"]
        pods = _pods(self.core, self.namespace, f"{CLUSTER_LABEL}={name}")
        if meta.get("deletionTimestamp"):
            if GCS_FT_FINALIZER in (meta.get("finalizers") or []):
                self._redis_cleanup(cluster, pods)
            return
        if spec.get("suspend"):
            for pod in pods:
                self._delete_pod(pod)
            if (cluster.get("status") or {}).get("state") != "suspended":
                self._status("rayclusters", name, {"state": "suspended"})
            return
        live = [p for p in pods if _live(p)]
        for pod in pods:
            if pod.status.phase == "Failed" and not pod.metadata.deletion_timestamp:
                self._delete_pod(pod)  # KubeRay deletes a failed Ray node and makes another
        heads = [p for p in live if p.metadata.labels.get(NODE_TYPE_LABEL) == "head"]
        if not heads:
            self._pod(cluster, "head", spec["headGroupSpec"]["template"])
        desired = 0
        ready_workers = 0
        for group in spec.get("workerGroupSpecs") or []:
            want = int(group.get("replicas", 1)) * max(int(group.get("numOfHosts", 1)), 1)
            desired += want
            mine = sorted((p for p in live if p.metadata.labels.get(GROUP_LABEL)
                           == group["groupName"]), key=lambda p: p.metadata.name)  # fmt: skip
            for _ in range(want - len(mine)):
                self._pod(cluster, group["groupName"], group["template"])
            for pod in mine[want:]:
                self._delete_pod(pod)  # scaled down
            ready_workers += sum(1 for p in mine[:want] if _running(p))
        head_running = any(_running(p) for p in heads)
        state = "ready" if head_running and ready_workers == desired else ""
        status = {"desiredWorkerReplicas": desired, "readyWorkerReplicas": ready_workers,
                  "availableWorkerReplicas": ready_workers, "state": state or None,
                  "conditions": [{"type": "HeadPodReady",
                                  "status": "True" if head_running else "False",
                                  "reason": "HeadPodRunningAndReady" if head_running
                                  else "HeadPodNotFound", "message": "",
                                  "lastTransitionTime": _now()}]}  # fmt: skip
        old = cluster.get("status") or {}
        keys = ("desiredWorkerReplicas", "readyWorkerReplicas", "availableWorkerReplicas")
        conditions = {c["type"]: c["status"] for c in old.get("conditions") or []}
        if (
            any(old.get(k) != status[k] for k in keys)
            or old.get("state") != status["state"]
            or conditions.get("HeadPodReady") != status["conditions"][0]["status"]
        ):
            self._status("rayclusters", name, status)

    def _redis_cleanup(self, cluster: dict[str, Any], pods: list[Any]) -> None:
        """A GCS fault-tolerant cluster being deleted: its Ray pods go first, then KubeRay's
        Redis cleanup Job (the head pod's Ray container, 200m and 256Mi) purges its storage
        namespace; once that Job finished, the finalizer comes off."""
        meta = cluster["metadata"]
        name = meta["name"]
        ray_nodes = [p for p in pods if p.metadata.labels.get(NODE_TYPE_LABEL) != "redis-cleanup"]
        for pod in ray_nodes:
            self._delete_pod(pod)
        if any(p.metadata.labels.get(NODE_TYPE_LABEL) == "head" for p in ray_nodes):
            return  # the GCS on the head may still write to Redis
        job_name = f"{name}-redis-cleanup"
        try:
            job = self.batch.read_namespaced_job(job_name, self.namespace)
        except client.ApiException as err:
            if err.status != 404:
                raise
            self._cleanup_job(cluster, job_name)
            return
        if not (job.status and (job.status.succeeded or job.status.failed)):
            return
        rest = [f for f in meta.get("finalizers") or [] if f != GCS_FT_FINALIZER]
        self.custom.patch_namespaced_custom_object(
            RAY, RAY_V, self.namespace, "rayclusters", name,
            {"metadata": {"finalizers": rest or None,
                          "resourceVersion": meta["resourceVersion"]}},
        )  # fmt: skip

    def _cleanup_job(self, cluster: dict[str, Any], job_name: str) -> None:
        template = copy.deepcopy(cluster["spec"]["headGroupSpec"]["template"])
        labels = {**((template.get("metadata") or {}).get("labels") or {}),
                  CLUSTER_LABEL: cluster["metadata"]["name"],
                  NODE_TYPE_LABEL: "redis-cleanup"}  # fmt: skip
        pod = template.setdefault("spec", {})
        ray = copy.deepcopy(pod["containers"][0])
        ray.pop("args", None)
        ray.update(command=["sh", "-c", "echo cleanup_redis_storage"],
                   resources=copy.deepcopy(REDIS_CLEANUP_RESOURCES))  # fmt: skip
        pod.update(containers=[ray], restartPolicy="Never")
        body = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": job_name, "namespace": self.namespace, "labels": labels,
                             "ownerReferences": [_owner(cluster)]},
                "spec": {"backoffLimit": 0, "activeDeadlineSeconds": 300,
                         "template": {"metadata": {"labels": labels}, "spec": pod}}}  # fmt: skip
        try:
            self.batch.create_namespaced_job(self.namespace, body)
        except client.ApiException as err:
            if err.status != 409:
                raise

    def _pod(self, cluster: dict[str, Any], group: str, template: dict[str, Any]) -> None:
        """A Ray node's pod, as KubeRay builds it from its group's template."""
        meta = cluster["metadata"]
        name, head = meta["name"], group == "head"
        template = copy.deepcopy(template)
        labels = {**((template.get("metadata") or {}).get("labels") or {}),
                  CLUSTER_LABEL: name, NODE_TYPE_LABEL: "head" if head else "worker",
                  GROUP_LABEL: "headgroup" if head else group, "ray.io/is-ray-node": "yes",
                  "app.kubernetes.io/name": "kuberay",
                  "app.kubernetes.io/created-by": "kuberay-operator"}  # fmt: skip
        for key in (FROM_CRD, FROM_NAME):
            if key in (meta.get("labels") or {}):
                labels[key] = meta["labels"][key]
        pod_spec = template.get("spec") or {}
        for c in pod_spec.get("containers") or []:
            c.setdefault("image", RAY_IMAGE)
        if head and cluster["spec"].get("enableInTreeAutoscaling"):
            options = cluster["spec"].get("autoscalerOptions") or {}
            resources = options.get("resources") or copy.deepcopy(AUTOSCALER_RESOURCES)
            pod_spec["containers"].append({"name": AUTOSCALER, "image": RAY_IMAGE,
                                           "args": list(RAY_ARGS), "resources": resources})  # fmt: skip
        if head and self._serves(cluster):  # Ray Serve's app, as the cases' hello_serve.py
            first = pod_spec["containers"][0]
            first.pop("args", None)
            first["command"] = ["sh", "-c", SERVE]
        if head and self._sidecar_submitter(cluster):
            pod_spec["containers"].append({"name": SUBMITTER, "image": RAY_IMAGE,
                                           "args": list(RAY_ARGS),
                                           "resources": copy.deepcopy(SUBMITTER_RESOURCES)})  # fmt: skip
        prefix = f"{name}-head-" if head else f"{name}-{group}-worker-"
        body = {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"generateName": prefix, "namespace": self.namespace,
                             "labels": labels,
                             "annotations": (template.get("metadata") or {}).get("annotations")
                             or {}, "ownerReferences": [_owner(cluster)]},
                "spec": pod_spec}  # fmt: skip
        self.core.create_namespaced_pod(self.namespace, body)

    def _serves(self, cluster: dict[str, Any]) -> bool:
        labels = cluster["metadata"].get("labels") or {}
        if labels.get(FROM_CRD) != "RayService":
            return False
        try:
            service = self._get("rayservices", labels[FROM_NAME])
        except client.ApiException:
            return False
        return bool(service["spec"].get("serveConfigV2"))

    def _sidecar_submitter(self, cluster: dict[str, Any]) -> bool:
        labels = cluster["metadata"].get("labels") or {}
        if labels.get(FROM_CRD) != "RayJob":
            return False
        try:
            job = self._get("rayjobs", labels[FROM_NAME])
        except client.ApiException:
            return False
        return job["spec"].get("submissionMode") == "SidecarMode"

    def _delete_pod(self, pod: Any) -> None:
        if pod.metadata.deletion_timestamp:
            return
        try:
            self.core.delete_namespaced_pod(pod.metadata.name, self.namespace,
                                            grace_period_seconds=1)  # fmt: skip
        except client.ApiException as err:
            if err.status != 404:
                raise


def non_finished(workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """util.FindNonFinishedWorkloads."""
    out = []
    for wl in workloads:
        conditions = {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions")
                      or []}  # fmt: skip
        if conditions.get("Finished") != "True":
            out.append(wl)
    return out

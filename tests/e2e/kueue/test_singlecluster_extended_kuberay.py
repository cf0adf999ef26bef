"""Kueue v0.19.2 test/e2e/singlecluster/extended/kuberay_test.go, ported case by case.

KubeRay's operator does not run here: tests/e2e/kueue/ray.py plays it (clusters, pods,
submitter Jobs, statuses), and the test plays what Ray's autoscaler decides from a script's
demand (a worker group scaled) and a script's end (its submitter's process stopped). The
on-demand flavor is the one real node here, of 2 cpu: where a case's pods ask more than that
at once, the head, workers and submitter ask less (each case says), the quota is Kueue's.
Kueue reaches the Serve app through a client pod's `curl` (kubectl exec); the API server here
cannot reach the real kubelet's exec endpoint, so the test asks the head pod directly.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client import ApiException
from kubernetes.utils import parse_quantity

from extender.core.jobframework.adapter import workload_name
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.ray import (
    AUTOSCALER,
    GCS_FT_FINALIZER,
    RAY_IMAGE,
    REPLICA_SIZES,
    SERVE_PORT,
    SUBMITTER,
    KubeRay,
    autoscaling,
    cluster_spec,
    container,
    head_pod,
    install_crds,
    make_ray_cluster,
    make_ray_job,
    make_ray_service,
    non_finished,
    worker_pods,
)
from tests.e2e.kueue.util import (
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    eventually,
    gone,
    is_admitted,
    is_finished,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/extended/kuberay_test.go"
VERY_LONG_TIMEOUT = 300.0  # util.VeryLongTimeout


@pytest.fixture(scope="module")
def kuberay_crds() -> None:
    install_crds()


@pytest.fixture
def kuberay(ns: str, kuberay_crds: None) -> Iterator[KubeRay]:
    """KubeRay's operator, played in the test's namespace."""
    with KubeRay(ns) as operator:
        yield operator


@pytest.fixture
def lq(cluster: Cluster, ns: str, kuberay_crds: None) -> Iterator[tuple[str, str]]:
    """The BeforeEach: a flavor of on-demand nodes, a ClusterQueue of 4 cpu and 2Gi, its
    LocalQueue; yields (LocalQueue, ClusterQueue)."""
    rf, cq, lq = f"kuberay-rf-{ns}", f"kuberay-cq-{ns}", f"kuberay-lq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(rf, {"instance-type": "on-demand"}))
    cluster.create_active(
        "clusterqueues", make_cluster_queue(cq, make_flavor_quotas(rf, cpu="4", memory="2Gi"))
    )
    cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
    yield lq, cq
    for plural in ("rayjobs", "rayservices", "rayclusters"):
        cluster.custom.delete_collection_namespaced_custom_object("ray.io", "v1", ns, plural)
    cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", lq, ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", rf)


def _ray(cluster: Cluster, plural: str, name: str, ns: str) -> dict[str, Any]:
    return dict(cluster.custom.get_namespaced_custom_object("ray.io", "v1", ns, plural, name))


def _create(cluster: Cluster, plural: str, body: dict[str, Any]) -> dict[str, Any]:
    ns = body["metadata"]["namespace"]
    return dict(cluster.custom.create_namespaced_custom_object("ray.io", "v1", ns, plural, body))


def _admitted(cluster: Cluster, name: str, ns: str) -> dict[str, Any]:
    """util.ExpectWorkloadsToBeAdmitted, after the workload is found."""
    eventually(lambda: cluster.workload(name, ns), TIMEOUT, f"workload {name} created")

    def admitted() -> dict[str, Any]:
        wl = cluster.workload(name, ns)
        assert is_admitted(wl), f"workload {name}: {(wl or {}).get('status')}"
        return wl or {}

    return dict(eventually(admitted, LONG_TIMEOUT, f"workload {name} admitted"))


def _one_admitted(cluster: Cluster, ns: str, timeout: float = LONG_TIMEOUT) -> dict[str, Any]:
    """Exactly one non-finished workload in the namespace, and it is admitted."""

    def one() -> dict[str, Any]:
        active = non_finished(cluster.list("workloads", ns))
        assert len(active) == 1, f"expected exactly 1 non-finished workload, got {len(active)}"
        assert is_admitted(active[0]), f"workload should be admitted: {active[0].get('status')}"
        return active[0]

    return dict(eventually(one, timeout, "one admitted non-finished workload"))


def _job_status(cluster: Cluster, name: str, ns: str) -> dict[str, Any]:
    return dict(_ray(cluster, "rayjobs", name, ns).get("status") or {})


def _expect_ray_job_running(cluster: Cluster, name: str, ns: str) -> dict[str, Any]:
    def running() -> dict[str, Any]:
        job = _ray(cluster, "rayjobs", name, ns)
        assert job["spec"].get("suspend") is False, "the RayJob is suspended"
        status = job.get("status") or {}
        assert status.get("jobDeploymentStatus") == "Running", status
        return job

    return dict(eventually(running, VERY_LONG_TIMEOUT, "the RayJob cluster ready"))


def _expect_ray_job_finished(cluster: Cluster, name: str, ns: str) -> None:
    def finished() -> bool:
        status = _job_status(cluster, name, ns)
        assert status.get("jobDeploymentStatus") == "Complete", status
        assert status.get("jobStatus") == "SUCCEEDED", status
        return True

    eventually(finished, VERY_LONG_TIMEOUT, "the RayJob finished successfully")


def _running_workers(cluster: Cluster, ns: str, ray_cluster: str, want: int) -> list[Any]:
    def count() -> list[Any]:
        pods = worker_pods(cluster.core, ns, ray_cluster)
        assert len(pods) == want, f"expected {want} running worker pods, got {len(pods)}"
        return pods or [None]

    return list(eventually(count, VERY_LONG_TIMEOUT, f"{want} running worker pods"))


def _same_requests(accounted: dict[str, Any], running: Any, what: str) -> None:
    """Kueue's drift check: the requests Kueue counted are the running container's."""
    got = running.resources.requests or {}
    want = accounted.get("resources", {}).get("requests") or {}
    for resource in ("cpu", "memory"):
        assert parse_quantity(want.get(resource, "0")) == parse_quantity(got.get(resource, "0")), (
            f"{what} {resource}: Kueue counted {want.get(resource)}, the head pod asks {got}"
        )


def _replica_count(ray_job: dict[str, Any], group: str) -> int:
    """parsePodSetReplicaCount: the group's count in the podset-replica-sizes annotation."""
    value = (ray_job["metadata"].get("annotations") or {}).get(REPLICA_SIZES)
    assert value, f"no {REPLICA_SIZES} annotation on the RayJob"
    for entry in json.loads(value):
        if entry["name"] == group:
            return int(entry["count"])
    raise AssertionError(f"group {group!r} not found in the annotation {value}")


@kueue_case(GO, "Kuberay Should run a rayjob if admitted")
def test_should_run_a_rayjob_if_admitted(
    cluster: Cluster, ns: str, lq: tuple[str, str], kuberay: KubeRay
) -> None:
    local_queue, cluster_queue = lq
    spec = cluster_spec(head_cpu="1", worker_cpu="400m", restart_never=True, grace=1)
    kuberay.script_seconds["rayjob"] = 5  # ray.init(); print(ray.cluster_resources())
    created = _create(
        cluster, "rayjobs", make_ray_job("rayjob", ns, local_queue, spec, submitter_cpu="300m")
    )
    wl = workload_name("RayJob", "ray.io", "rayjob", created["metadata"]["uid"])
    _admitted(cluster, wl, ns)
    _expect_ray_job_running(cluster, "rayjob", ns)

    def labelled() -> bool:
        pods = cluster.core.list_namespaced_pod(ns).items
        assert pods, "no pods"
        for pod in pods:
            labels = pod.metadata.labels or {}
            assert labels.get("kueue.x-k8s.io/cluster-queue-name") == cluster_queue, pod.metadata
            assert labels.get("kueue.x-k8s.io/local-queue-name") == local_queue, pod.metadata
        return True

    eventually(labelled, TIMEOUT, "the pods carry their queues' labels")
    _expect_ray_job_finished(cluster, "rayjob", ns)


def _script_configmap(cluster: Cluster, ns: str, name: str) -> None:
    cluster.core.create_namespaced_config_map(ns, {
        "metadata": {"name": name},
        "data": {"sample_code.py": "import ray\nray.init()\n"},
    })  # fmt: skip


def _with_script(spec: dict[str, Any], configmap: str) -> dict[str, Any]:
    head = spec["headGroupSpec"]["template"]["spec"]
    head["volumes"] = [{"name": "script-volume", "configMap": {"name": configmap}}]
    head["containers"][0]["volumeMounts"] = [
        {"name": "script-volume", "mountPath": "/home/ray/samples"}
    ]
    return spec


def _first_admitted_or_finished(cluster: Cluster, ns: str) -> None:
    def found() -> bool:
        workloads = cluster.list("workloads", ns)
        assert workloads, "expected at least one workload in namespace"
        assert any(is_admitted(w) or is_finished(w) for w in workloads), "no admitted workload"
        return True

    eventually(found, MEDIUM_TIMEOUT, "an admitted workload")


@kueue_case(GO, "Kuberay Should run a rayjob with InTreeAutoscaling")
def test_should_run_a_rayjob_with_in_tree_autoscaling(
    cluster: Cluster, ns: str, lq: tuple[str, str], kuberay: KubeRay
) -> None:
    """Kueue's head 1 cpu, workers 400m and submitter 400m ask half here (500m, 200m, 200m):
    with the autoscaler's 500m, two workers need 2.7 cpu, more than the node's 2."""
    local_queue, _ = lq
    _script_configmap(cluster, ns, "rayjob-autoscaling")
    spec = autoscaling(cluster_spec(head_cpu="500m", worker_cpu="200m", restart_never=True,
                                     grace=1, min_replicas=1, max_replicas=2))  # fmt: skip
    body = make_ray_job("rayjob-autoscaling", ns, local_queue, _with_script(spec,
                        "rayjob-autoscaling"), submitter_cpu="200m", elastic=True)  # fmt: skip
    _create(cluster, "rayjobs", body)
    _first_admitted_or_finished(cluster, ns)
    job = _expect_ray_job_running(cluster, "rayjob-autoscaling", ns)
    ray_cluster = job["status"]["rayClusterName"]

    def three_pods() -> bool:
        pods = cluster.core.list_namespaced_pod(ns).items
        assert len(pods) == 3, f"expected exactly 3 pods in rayjob namespace, got {len(pods)}"
        return True

    eventually(three_pods, MEDIUM_TIMEOUT, "head, worker and submitter pods")
    _running_workers(cluster, ns, ray_cluster, 1)
    _one_admitted(cluster, ns, MEDIUM_TIMEOUT)

    kuberay.scale(ray_cluster, "workers-group-0", 2)  # 20 queued tasks: Ray asks for 2
    running = _running_workers(cluster, ns, ray_cluster, 2)
    deleted = running[0].metadata.name
    cluster.core.delete_namespaced_pod(deleted, ns)

    def replaced() -> bool:
        pods = worker_pods(cluster.core, ns, ray_cluster)
        assert len(pods) == 2, f"expected 2 running worker pods after replacement: {len(pods)}"
        assert deleted not in [p.metadata.name for p in pods], "the deleted pod still runs"
        return True

    eventually(replaced, VERY_LONG_TIMEOUT, f"a worker pod replacing {deleted}")
    kuberay.end_script("rayjob-autoscaling")
    _expect_ray_job_finished(cluster, "rayjob-autoscaling", ns)


@kueue_case(GO, "Kuberay Should run a rayjob with multi scale-up steps")
def test_should_run_a_rayjob_with_multi_scale_up_steps(
    cluster: Cluster, ns: str, lq: tuple[str, str], kuberay: KubeRay
) -> None:
    """Kueue's head 1 cpu, workers and submitter 400m ask a quarter here (250m, 100m, 100m):
    five workers beside the head, its 500m autoscaler and the submitter need 1.35 cpu (3.9
    in Kueue's, of its 4), so the quota is 1400m."""
    local_queue, cluster_queue = lq
    cq = cluster.get("clusterqueues", cluster_queue)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "1400m"
    cluster.custom.replace_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", cluster_queue, cq
    )
    _script_configmap(cluster, ns, "rayjob-multi-scaleup")
    spec = autoscaling(cluster_spec(head_cpu="250m", worker_cpu="100m", restart_never=True,
                                     grace=1, min_replicas=1, max_replicas=5))  # fmt: skip
    body = make_ray_job("rayjob-multi-scaleup", ns, local_queue, _with_script(spec,
                        "rayjob-multi-scaleup"), submitter_cpu="100m", elastic=True)  # fmt: skip
    _create(cluster, "rayjobs", body)
    _first_admitted_or_finished(cluster, ns)
    job = _expect_ray_job_running(cluster, "rayjob-multi-scaleup", ns)
    ray_cluster = job["status"]["rayClusterName"]

    def at_least_three_pods() -> bool:
        pods = cluster.core.list_namespaced_pod(ns).items
        assert len(pods) >= 3, f"expected at least 3 pods in rayjob namespace: {len(pods)}"
        return True

    eventually(at_least_three_pods, MEDIUM_TIMEOUT, "head, worker and submitter pods")
    eventually(lambda: worker_pods(cluster.core, ns, ray_cluster), MEDIUM_TIMEOUT, "a worker")
    _one_admitted(cluster, ns, MEDIUM_TIMEOUT)

    kuberay.scale(ray_cluster, "workers-group-0", 3)  # 4 tasks of 1 cpu at once
    _running_workers(cluster, ns, ray_cluster, 3)
    kuberay.scale(ray_cluster, "workers-group-0", 5)  # 16 tasks of 1 cpu at once
    _running_workers(cluster, ns, ray_cluster, 5)

    def sized(count: int) -> bool:
        job = _ray(cluster, "rayjobs", "rayjob-multi-scaleup", ns)
        assert _replica_count(job, "workers-group-0") == count
        return True

    eventually(lambda: sized(5), LONG_TIMEOUT, "podset-replica-sizes after the second scale-up")

    def three_workloads() -> bool:
        workloads = cluster.list("workloads", ns)
        assert len(workloads) >= 3, f"expected at least 3 workloads: {len(workloads)}"
        return True

    eventually(three_workloads, MEDIUM_TIMEOUT, "a workload slice per scale-up")
    kuberay.scale(ray_cluster, "workers-group-0", 1)  # 20 tasks one by one: idle workers go
    eventually(lambda: sized(1), VERY_LONG_TIMEOUT, "podset-replica-sizes after scaling down")
    kuberay.end_script("rayjob-multi-scaleup")
    _expect_ray_job_finished(cluster, "rayjob-multi-scaleup", ns)


@kueue_case(GO, "Kuberay Should account for the SidecarMode submitter in the head PodSet quota")
def test_should_account_for_the_sidecar_mode_submitter_in_the_head_pod_set_quota(
    cluster: Cluster, ns: str, lq: tuple[str, str], kuberay: KubeRay
) -> None:
    local_queue, _ = lq
    spec = cluster_spec(head_cpu="1", worker_cpu="400m", restart_never=True, grace=1)
    _create(cluster, "rayjobs", make_ray_job("rayjob-sidecar", ns, local_queue, spec,
                                             mode="SidecarMode"))  # fmt: skip
    wl = _one_admitted(cluster, ns)
    [head] = [p for p in wl["spec"]["podSets"] if p["name"] == "head"]
    submitter = container(head["template"]["spec"], SUBMITTER)
    assert submitter is not None, "head PodSet should include the submitter sidecar container"

    def same() -> bool:
        status = _job_status(cluster, "rayjob-sidecar", ns)
        assert status.get("rayClusterName"), status
        pod = head_pod(cluster.core, ns, status["rayClusterName"])
        running = container(pod.spec, SUBMITTER)
        assert running is not None, "KubeRay should inject the submitter container"
        _same_requests(submitter, running, "the submitter's")
        return True

    eventually(same, LONG_TIMEOUT, "the accounted submitter resources to match the head pod's")


@kueue_case(GO, "Kuberay Should run a RayCluster on worker if admitted")
def test_should_run_a_ray_cluster_on_worker_if_admitted(
    cluster: Cluster, ns: str, lq: tuple[str, str], kuberay: KubeRay
) -> None:
    local_queue, _ = lq
    spec = cluster_spec(head_cpu="1", worker_cpu="400m")
    created = _create(cluster, "rayclusters", make_ray_cluster("raycluster1", ns, local_queue,
                                                               spec))  # fmt: skip
    _admitted(cluster, workload_name("RayCluster", "ray.io", "raycluster1",
                                     created["metadata"]["uid"]), ns)  # fmt: skip

    def ready() -> bool:
        status = _ray(cluster, "rayclusters", "raycluster1", ns).get("status") or {}
        for key in ("desiredWorkerReplicas", "readyWorkerReplicas", "availableWorkerReplicas"):
            assert status.get(key) == 1, status
        return True

    eventually(ready, VERY_LONG_TIMEOUT, "the RayCluster ready")


@kueue_case(
    GO,
    "Kuberay Should account for the autoscaler sidecar in the head PodSet quota when in-tree "
    "autoscaling is enabled",
)
def test_should_account_for_the_autoscaler_sidecar_in_the_head_pod_set_quota(
    cluster: Cluster, ns: str, lq: tuple[str, str], kuberay: KubeRay
) -> None:
    local_queue, _ = lq
    spec = cluster_spec(head_cpu="1", worker_cpu="400m")
    spec["enableInTreeAutoscaling"] = True
    body = make_ray_cluster("raycluster-autoscaling", ns, local_queue, spec, elastic=True)
    _create(cluster, "rayclusters", body)
    wl = _one_admitted(cluster, ns)
    [head] = [p for p in wl["spec"]["podSets"] if p["name"] == "head"]
    autoscaler = container(head["template"]["spec"], AUTOSCALER)
    assert autoscaler is not None, "head PodSet should include the autoscaler sidecar container"

    def same() -> bool:
        pod = head_pod(cluster.core, ns, "raycluster-autoscaling")
        running = container(pod.spec, AUTOSCALER)
        assert running is not None, "KubeRay should inject an autoscaler container"
        _same_requests(autoscaler, running, "the autoscaler's")
        return True

    eventually(same, LONG_TIMEOUT, "the accounted autoscaler resources to match the head pod's")


HELLO_SERVE = """\
from ray import serve

@serve.deployment
class HelloWorld:
    def __call__(self, request):
        return "Hello, World!"

app = HelloWorld.bind()"""

SERVE_CONFIG = """\
applications:
  - name: hello_app
    import_path: hello_serve:app
    route_prefix: /
    deployments:
      - name: HelloWorld
        num_replicas: 1
        max_replicas_per_node: 1
        ray_actor_options:
          num_cpus: 0.2"""


def _serve_app(cluster: Cluster, ns: str, name: str, spec: dict[str, Any], code: str) -> None:
    """The ConfigMap of the Serve app, mounted and on PYTHONPATH in every Ray node."""
    cluster.core.create_namespaced_config_map(ns, {"metadata": {"name": name},
                                                   "data": {"hello_serve.py": code}})  # fmt: skip
    templates = [spec["headGroupSpec"]["template"], spec["workerGroupSpecs"][0]["template"]]
    for template in templates:
        pod = template["spec"]
        pod["volumes"] = [{"name": "code-sample", "configMap": {"name": name, "items": [
            {"key": "hello_serve.py", "path": "hello_serve.py"}]}}]  # fmt: skip
        first = pod["containers"][0]
        first["volumeMounts"] = [{"name": "code-sample", "mountPath": "/home/ray/samples"}]
        first["env"] = [{"name": "PYTHONPATH", "value": "/home/ray/samples:$PYTHONPATH"}]


def _ready_to_serve(cluster: Cluster, name: str, ns: str) -> dict[str, Any]:
    """waitForRayServiceReadyToServe."""

    def ready() -> dict[str, Any]:
        service = _ray(cluster, "rayservices", name, ns)
        assert service["spec"]["rayClusterConfig"].get("suspend") is False, "still suspended"
        conditions = {c["type"]: c["status"] for c in service.get("status", {}).get("conditions")
                      or []}  # fmt: skip
        assert conditions.get("Ready") == "True", service.get("status")
        return service

    return dict(eventually(ready, VERY_LONG_TIMEOUT, "the RayService ready to serve"))


def _hello(cluster: Cluster, ns: str, service: dict[str, Any]) -> str:
    """The Serve app's answer on the head pod's port 8000 (see the module's docstring)."""
    name = service["status"]["activeServiceStatus"]["rayClusterName"]

    def answer() -> str:
        pod = head_pod(cluster.core, ns, name)
        assert pod.status.pod_ip, "the head pod has no IP yet"
        url = f"http://{pod.status.pod_ip}:{SERVE_PORT}/"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return str(response.read().decode())
        except OSError as err:
            raise AssertionError(f"{url}: {err}") from None

    return str(eventually(answer, LONG_TIMEOUT, "the Serve app to answer"))


@kueue_case(GO, "Kuberay Should run a RayService if admitted")
def test_should_run_a_ray_service_if_admitted(
    cluster: Cluster, ns: str, lq: tuple[str, str], kuberay: KubeRay
) -> None:
    local_queue, _ = lq
    spec = cluster_spec(head="ray-head", worker="ray-worker", head_cpu="1", worker_cpu="600m",
                        grace=1)  # fmt: skip
    _serve_app(cluster, ns, "rayservice-hello", spec, HELLO_SERVE)
    body = make_ray_service("rayservice-hello", ns, local_queue, spec, serve_config=SERVE_CONFIG)
    created = _create(cluster, "rayservices", body)
    wl = workload_name("RayService", "ray.io", "rayservice-hello", created["metadata"]["uid"])
    _admitted(cluster, wl, ns)
    service = _ready_to_serve(cluster, "rayservice-hello", ns)
    assert "Hello, World!" in _hello(cluster, ns, service)


@kueue_case(
    GO, "Kuberay Should run the Redis cleanup Job when a GCS fault-tolerant RayService is deleted"
)
def test_should_run_the_redis_cleanup_job_when_a_gcs_fault_tolerant_ray_service_is_deleted(
    cluster: Cluster, ns: str, lq: tuple[str, str], kuberay: KubeRay
) -> None:
    """Redis is agnhost here (no Redis image, no exec to count its keys): Kueue's "Redis
    populated" check has no stand-in, and "Redis cleaned up" is KubeRay's cleanup Job done,
    which must not be held back by the queueing of the RayService it outlives."""
    local_queue, _ = lq
    app = {"app": "redis-gcs-ft"}
    cluster.apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "redis"},
        "spec": {"selector": {"matchLabels": app}, "template": {"metadata": {"labels": app},
                 "spec": {"containers": [{"name": "redis", "image": RAY_IMAGE, "args": ["netexec"],
                                          "ports": [{"containerPort": 6379}]}]}}},
    })  # fmt: skip
    cluster.core.create_namespaced_service(ns, {
        "metadata": {"name": "redis"}, "spec": {"selector": app, "ports": [{"port": 6379}]},
    })  # fmt: skip
    eventually(
        lambda: cluster.apps.read_namespaced_deployment("redis", ns).status.ready_replicas == 1,
        LONG_TIMEOUT, "Redis deployed",
    )  # fmt: skip
    spec = cluster_spec(head="ray-head", worker="ray-worker", head_cpu="1", worker_cpu="600m",
                        grace=1)  # fmt: skip
    spec["gcsFaultToleranceOptions"] = {"redisAddress": "redis:6379"}
    created = _create(cluster, "rayservices", make_ray_service("rayservice-gcs-ft", ns,
                                                               local_queue, spec))  # fmt: skip
    _admitted(cluster, workload_name("RayService", "ray.io", "rayservice-gcs-ft",
                                     created["metadata"]["uid"]), ns)  # fmt: skip

    def provisioned() -> bool:
        clusters = cluster.custom.list_namespaced_custom_object("ray.io", "v1", ns,
                                                                "rayclusters")["items"]  # fmt: skip
        assert len(clusters) == 1, f"{len(clusters)} RayClusters"
        assert GCS_FT_FINALIZER in (clusters[0]["metadata"].get("finalizers") or [])
        return True

    eventually(provisioned, VERY_LONG_TIMEOUT, "the RayCluster with the GCS cleanup finalizer")
    name = cluster.custom.list_namespaced_custom_object("ray.io", "v1", ns, "rayclusters")[
        "items"][0]["metadata"]["name"]  # fmt: skip
    eventually(lambda: head_pod(cluster.core, ns, name).status.phase == "Running",
               VERY_LONG_TIMEOUT, "the GCS running on the head")  # fmt: skip
    cluster.custom.delete_namespaced_custom_object(
        "ray.io", "v1", ns, "rayservices", "rayservice-gcs-ft"
    )
    eventually(
        lambda: gone(lambda: _ray(cluster, "rayservices", "rayservice-gcs-ft", ns)),
        LONG_TIMEOUT, "the RayService deleted",
    )  # fmt: skip

    def cleaned_up() -> bool:
        try:
            job = cluster.batch.read_namespaced_job(f"{name}-redis-cleanup", ns)
        except ApiException as err:
            raise AssertionError(f"no Redis cleanup Job: {err.status}") from None
        assert job.status.succeeded == 1, f"the Redis cleanup Job: {job.status}"
        return True

    eventually(cleaned_up, LONG_TIMEOUT, "Redis cleaned up by KubeRay's cleanup Job")


AUTOSCALING_SERVE = """\
import asyncio
from ray import serve

@serve.deployment
class HelloWorld:
    async def __call__(self, request):
        delay = request.query_params.get("delay", "0")
        if float(delay) > 0:
            await asyncio.sleep(float(delay))
        return "Hello, World!"

app = HelloWorld.bind()"""

AUTOSCALING_SERVE_CONFIG = """\
applications:
  - name: hello_app
    import_path: hello_serve:app
    route_prefix: /
    deployments:
      - name: HelloWorld
        autoscaling_config:
          min_replicas: 0
          max_replicas: 5
          target_ongoing_requests: 1
          upscaling_factor: 1.0
          upscale_delay_s: 2
          downscale_delay_s: 2
        max_replicas_per_node: 1
        ray_actor_options:
          num_cpus: 0.2"""


@kueue_case(GO, "Kuberay Should run a rayservice with InTreeAutoscaling")
def test_should_run_a_rayservice_with_in_tree_autoscaling(
    cluster: Cluster, ns: str, lq: tuple[str, str], kuberay: KubeRay
) -> None:
    """Kueue's head asks 1 cpu, 500m here: with the autoscaler's 500m and two workers of
    400m it would need 2.3 cpu, more than the node's 2."""
    local_queue, _ = lq
    spec = cluster_spec(head="ray-head", worker="ray-worker", head_cpu="500m",
                        worker_cpu="400m", grace=1)  # fmt: skip
    spec = autoscaling(spec)
    _serve_app(cluster, ns, "rayservice-autoscale", spec, AUTOSCALING_SERVE)
    body = make_ray_service("rayservice-autoscale", ns, local_queue, spec,
                            serve_config=AUTOSCALING_SERVE_CONFIG, elastic=True)  # fmt: skip
    _create(cluster, "rayservices", body)
    _one_admitted(cluster, ns, MEDIUM_TIMEOUT)
    service = _ready_to_serve(cluster, "rayservice-autoscale", ns)
    ray_cluster = service["status"]["activeServiceStatus"]["rayClusterName"]
    assert "Hello, World!" in _hello(cluster, ns, service)

    kuberay.scale(ray_cluster, "workers-group-0", 0)  # min_replicas 0, no load: idle worker goes
    eventually(lambda: not worker_pods(cluster.core, ns, ray_cluster), VERY_LONG_TIMEOUT,
               "no running worker before the load")  # fmt: skip
    kuberay.scale(ray_cluster, "workers-group-0", 2)  # 10 slow requests: serve replicas added

    def more_than_one() -> bool:
        running = worker_pods(cluster.core, ns, ray_cluster)
        assert len(running) > 1, f"expected more than 1 running worker pods: {len(running)}"
        return True

    eventually(more_than_one, VERY_LONG_TIMEOUT, "workers added by the autoscaler")

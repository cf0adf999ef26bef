"""Plain pods and a Deployment on a real kube-apiserver, kube-controller-manager and
kube-scheduler: Kueue's pod example is gated, admitted, bound by the real scheduler and run
(by the stand-in kubelet where the Nodes have none); with quota for one, the second waits gated
with a reason until the first Succeeds; Kueue's sample Deployment with quota for two of its
three pods has exactly two bound and one gated, and scaling it to one admits nothing new and
frees the quota; a running Deployment pod is preempted by a higher-priority Job, and its
ReplicaSet's replacement waits gated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from tests.e2e.conftest import (
    controller_process,
    job_manifest,
    kubectl,
    serve_webhook,
    wait,
    webhook_host_port,
)

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples"
PODS_NS, SERVING_NS = "pods-e2e", "serving-e2e"
GATE = "kueue.x-k8s.io/admission"


def queue_objects(namespace: str, cpu: str) -> list[dict[str, Any]]:
    """A ClusterQueue of `cpu`, preempting lower priority, with the LocalQueue `user-queue`
    Kueue's examples name in `namespace`."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": namespace},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "pods-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": cpu},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": namespace},
            "spec": {"clusterQueue": namespace},
        },
    ]


@pytest.fixture(scope="module")
def tower(tmp_path_factory, api_client, kubelet_namespaces):
    webhook_host_port()
    tmp = tmp_path_factory.mktemp("pods")
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    setup = tmp / "setup.yaml"
    objects = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "pods-flavor"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "urgent"}, "value": 1000},
        *queue_objects(PODS_NS, "3"),
        *queue_objects(SERVING_NS, "200m"),
    ]  # fmt: skip
    setup.write_text(yaml.safe_dump_all(objects))
    kubectl("apply", "-f", str(setup))
    kubelet_namespaces.update((PODS_NS, SERVING_NS))
    controller = controller_process("--physical-resources", "none")  # Kueue's default set
    yield client.CoreV1Api(api_client)
    tear_down(controller, webhook, setup, (PODS_NS, SERVING_NS), "deployments,jobs,pods")


def tear_down(
    controller: Any, webhook: Any, setup: Path, namespaces: tuple[str, ...], kinds: str
) -> None:
    """Stop Tower, delete these kinds in the namespaces, and Kueue's finalizer with them (it
    would outlive the controller: taken off by hand, as an admin would), then the setup and
    the webhook configurations."""
    controller.terminate()
    controller.wait(timeout=30)
    webhook.terminate()
    webhook.wait(timeout=20)
    for namespace in namespaces:
        kubectl("delete", kinds, "--all", "-n", namespace, "--wait=false", check=False)
        for name in kubectl("get", "pods", "-n", namespace, "-o", "name", check=False).split():
            kubectl("patch", name, "-n", namespace, "--type=merge", "-p", '{"metadata":{"finalizers":null}}', check=False)  # fmt: skip
    kubectl("delete", "-f", str(setup), "--wait=false", check=False)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


def pods_of(core: client.CoreV1Api, namespace: str, selector: str = "") -> list[Any]:
    return core.list_namespaced_pod(namespace, label_selector=selector).items


def is_gated(pod: Any) -> bool:
    return any(g.name == GATE for g in pod.spec.scheduling_gates or [])


def workload_of(namespace: str, pod_name: str) -> dict[str, Any] | None:
    listed = json.loads(kubectl("get", "workloads", "-n", namespace, "-o", "json"))
    for workload in listed["items"]:
        owners = workload["metadata"].get("ownerReferences") or []
        if any(o.get("kind") == "Pod" and o.get("name") == pod_name for o in owners):
            return dict(workload)
    return None


def workload_message(namespace: str, pod_name: str) -> str | None:
    workload = workload_of(namespace, pod_name) or {}
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition["type"] == "QuotaReserved" and condition["status"] == "False":
            return str(condition["message"])
    return None


def test_kueues_pod_example_waits_for_quota_then_runs(tower):
    core = tower
    example = EXAMPLES / "pods" / "kueue-pod.yaml"
    first = kubectl("create", "-n", PODS_NS, "-f", str(example)).split()[0].split("/")[1]
    # The second is made once the first is queued: made in the same second while the controller
    # still starts, the two would tie in the queue (creation times are whole seconds).
    wait(lambda: workload_of(PODS_NS, first), what="the first pod's Workload")
    second = kubectl("create", "-n", PODS_NS, "-f", str(example)).split()[0].split("/")[1]
    made = core.read_namespaced_pod(second, PODS_NS)
    assert is_gated(made)
    assert made.metadata.labels["kueue.x-k8s.io/managed"] == "true"
    assert "kueue.x-k8s.io/managed" in made.metadata.finalizers

    # The first is admitted and bound by the real scheduler; the second waits gated.
    bound = wait(
        lambda: (p := core.read_namespaced_pod(first, PODS_NS)).spec.node_name and p,
        what="the first pod bound",
    )
    assert not is_gated(bound)
    message = wait(lambda: workload_message(PODS_NS, second), what="the second pod's reason")
    assert "needs 3 cpu in flavor pods-flavor" in message, message
    assert is_gated(core.read_namespaced_pod(second, PODS_NS))

    # The first runs its 3 s and Succeeds: the second is admitted, bound and run.
    wait(
        lambda: core.read_namespaced_pod(second, PODS_NS).spec.node_name,
        what="the second pod admitted and bound once the first Succeeded",
    )
    done = wait(
        lambda: (p := core.read_namespaced_pod(first, PODS_NS)).status.phase == "Succeeded" and p,
        what="the first pod Succeeded",
    )
    wait(
        lambda: (
            "kueue.x-k8s.io/managed"
            not in (core.read_namespaced_pod(first, PODS_NS).metadata.finalizers or [])
        ),
        what="Kueue's finalizer off the finished pod",
    )
    assert done is not None


def deployment_pods(core: client.CoreV1Api) -> list[Any]:
    return [p for p in pods_of(core, SERVING_NS, "app=nginx") if not p.metadata.deletion_timestamp]


def test_kueues_sample_deployment_runs_as_its_quota_allows(tower):
    core = tower
    kubectl("apply", "-n", SERVING_NS, "-f", str(EXAMPLES / "serving" / "sample-deployment.yaml"))

    def two_bound_one_gated() -> list[Any] | None:
        pods = deployment_pods(core)
        bound = [p for p in pods if p.spec.node_name]
        gated = [p for p in pods if is_gated(p)]
        return pods if (len(pods), len(bound), len(gated)) == (3, 2, 1) else None

    pods = wait(two_bound_one_gated, what="2 of the 3 pods bound and 1 gated (quota for 2)")
    [waiting] = [p for p in pods if is_gated(p)]
    message = wait(lambda: workload_message(SERVING_NS, waiting.metadata.name), what="its reason")
    assert "needs 100m cpu in flavor pods-flavor" in message, message

    # A higher-priority Job takes one running pod's place: the pod is deleted, and the
    # ReplicaSet's replacement waits gated with the one that already waited.
    labels = {"kueue.x-k8s.io/queue-name": "user-queue", "kueue.x-k8s.io/priority-class": "urgent"}
    job = job_manifest(labels, name="urgent", cpu="100m", memory="64Mi", seconds=600)
    client.BatchV1Api(core.api_client).create_namespaced_job(SERVING_NS, job)
    wait(
        lambda: client.BatchV1Api(core.api_client).read_namespaced_job("urgent", SERVING_NS).spec.suspend is False,
        what="the urgent Job started by preempting a Deployment pod",
    )  # fmt: skip
    wait(
        lambda: (
            len(pods := deployment_pods(core)) == 3
            and len([p for p in pods if p.spec.node_name]) == 1
            and len([p for p in pods if is_gated(p)]) == 2
        ),
        what="1 Deployment pod bound, 2 gated (the replacement among them)",
    )
    kubectl("delete", "job", "urgent", "-n", SERVING_NS, "--wait=true")
    wait(two_bound_one_gated, what="the quota back to the Deployment: 2 bound, 1 gated")

    # Scaled to one: nothing new is admitted, and the quota of the pods removed is free.
    kubectl("scale", "deployment", "nginx-deployment", "-n", SERVING_NS, "--replicas=1")
    wait(
        lambda: len(pods := deployment_pods(core)) == 1 and pods[0].spec.node_name,
        what="one bound pod left",
    )

    def used() -> str | None:
        cq = json.loads(kubectl("get", "clusterqueue", SERVING_NS, "-o", "json"))
        status = cq.get("status") or {}
        usage = status.get("flavorsReservation") or status.get("flavorsUsage") or []
        for flavor in usage:
            for resource in flavor.get("resources") or []:
                if resource["name"] == "cpu":
                    return str(resource.get("total"))
        return None

    wait(lambda: used() == "100m", what="the ClusterQueue's cpu in use down to 100m")
    kubectl("delete", "deployment", "nginx-deployment", "-n", SERVING_NS)

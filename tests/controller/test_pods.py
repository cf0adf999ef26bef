"""Kueue's plain-pod example and its sample Deployment through the API double, the real webhook
and the controller: a labelled pod is created gated, labelled managed and with Kueue's
finalizer; it is one Workload; admission removes the gate and adds the flavor's nodeSelector;
a second pod waits gated, with a reason, until the first Succeeds; a preempted running pod is
deleted and holds its quota until it has stopped. No kubelet runs here: the test sets the
status a kubelet would."""

from __future__ import annotations

import copy
import json
import signal
from pathlib import Path
from typing import Any

import pytest

from extender.kube.api import resources as r
from extender.kube.api.client import ApiError
from tests.controller.conftest import eventually
from tests.controller.test_kubectl_tower import tower
from tests.controller.test_kubeflow import condition, load

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"
GATE = {"name": "kueue.x-k8s.io/admission"}
FINALIZER = "kueue.x-k8s.io/managed"
DEPLOYMENTS = r.Resource("apps", "v1", "deployments", "Deployment", True)


def setup(cluster: Any) -> None:
    flavor, queue, local_queue = load(EXAMPLES / "single-clusterqueue-setup.yaml")
    flavor["spec"] = {"nodeLabels": {"instance-type": "spot"}}
    cluster.apply(flavor, queue, local_queue)


def preemption_setup(cluster: Any) -> None:
    """Kueue's single ClusterQueue, preempting lower priority, and the classes low and high."""
    flavor, queue, local_queue = load(EXAMPLES / "single-clusterqueue-setup.yaml")
    queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    cluster.apply(flavor, queue, local_queue)
    cluster.apply(
        *[
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
            for name, value in (("low", 10), ("high", 100))
        ]
    )


def example_pod() -> dict[str, Any]:
    [pod] = load(EXAMPLES / "pods" / "kueue-pod.yaml")
    return pod


def pod(cluster: Any, created: dict[str, Any]) -> dict[str, Any] | None:
    return cluster.get("pods", created["metadata"]["name"], "default")


def ungated(cluster: Any, created: dict[str, Any]) -> dict[str, Any] | None:
    now = pod(cluster, created)
    return (
        now if now is not None and GATE not in (now["spec"].get("schedulingGates") or []) else None
    )


def kubelet(cluster: Any, created: dict[str, Any], phase: str, node: str = "node-1") -> None:
    """What kube-scheduler and a kubelet would write: bound, then the phase. (The double
    takes nodeName in a patch; kube-apiserver takes it only through pods/binding.)"""
    name = created["metadata"]["name"]
    if phase == "Running":
        cluster.admin.patch(r.PODS, name, {"spec": {"nodeName": node}}, "default")
    cluster.admin.patch(r.PODS, name, {"status": {"phase": phase}}, "default", subresource="status")


def test_kueues_pod_example_is_gated_admitted_and_finished(cluster, start_controller):
    setup(cluster)
    start_controller()  # Kueue's default set: pod is on
    first = cluster.admin.create(r.PODS, example_pod(), "default")
    # The webhook: gated, labelled managed, kept by Kueue's finalizer.
    assert GATE in first["spec"]["schedulingGates"]
    assert first["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    assert FINALIZER in first["metadata"]["finalizers"]
    workload = eventually(lambda: cluster.workload_of(first), what="its Workload")
    assert workload["metadata"]["name"].startswith(f"pod-{first['metadata']['name']}-")
    [main] = workload["spec"]["podSets"]
    assert (main["name"], main["count"]) == ("main", 1)
    assert main["template"]["spec"]["containers"][0]["resources"]["requests"] == {"cpu": 3}

    # Admitted: the gate removed and the flavor's nodeSelector added, in one patch.
    running = eventually(lambda: ungated(cluster, first), what="the pod ungated")
    assert running["spec"]["nodeSelector"] == {"instance-type": "spot"}
    assert running["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "main"

    # Quota for three such pods (9 cpu): the fourth waits gated, and says why.
    others = [cluster.admin.create(r.PODS, example_pod(), "default") for _ in range(3)]
    for other in others[:2]:
        eventually(lambda other=other: ungated(cluster, other), what="a pod ungated")
    waiting = others[2]
    message = eventually(
        lambda: condition(cluster.workload_of(waiting), "QuotaReserved").get("message"),
        what="the fourth pod's reason",
    )
    assert "needs 3 cpu in flavor default-flavor" in message, message
    assert GATE in pod(cluster, waiting)["spec"]["schedulingGates"]
    said = tower(
        cluster, "why", f"pod/{waiting['metadata']['name']}", "-n", "default", "-o", "json"
    )
    assert said.returncode == 0, said.stderr
    assert (json.loads(said.stdout)["kind"], json.loads(said.stdout)["state"]) == ("Pod", "Pending")

    # The first runs and succeeds: its Workload is Finished, the finalizer comes off, and
    # the waiting pod is admitted.
    kubelet(cluster, first, "Running")
    kubelet(cluster, first, "Succeeded")
    finished = eventually(
        lambda: (
            condition(cluster.workload_of(first), "Finished").get("status") == "True"
            and cluster.workload_of(first)
        ),
        what="the first Workload Finished",
    )
    assert condition(finished, "Finished")["reason"] == "Succeeded"
    eventually(
        lambda: FINALIZER not in (pod(cluster, first)["metadata"].get("finalizers") or []),
        what="Kueue's finalizer off the finished pod",
    )
    eventually(lambda: ungated(cluster, waiting), what="the waiting pod admitted")


def test_a_gated_pod_deleted_ends_its_workload_and_goes(cluster, start_controller):
    setup(cluster)
    start_controller()
    blocker = example_pod()
    blocker["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 9
    big = cluster.admin.create(r.PODS, blocker, "default")
    eventually(lambda: ungated(cluster, big), what="the big pod admitted")
    gated = cluster.admin.create(r.PODS, example_pod(), "default")
    eventually(lambda: condition(cluster.workload_of(gated), "QuotaReserved"), what="waiting")
    cluster.admin.delete(r.PODS, gated["metadata"]["name"], "default")
    eventually(lambda: pod(cluster, gated) is None, what="the deleted pod gone")
    # Its Workload went with it (the pod owned it), or was at least finished.
    workload = cluster.workload_of(gated)
    assert workload is None or condition(workload, "Finished").get("reason") == "OwnerNotFound"


def test_a_pod_cannot_be_ungated_by_hand(cluster, start_controller):
    setup(cluster)
    blocker = example_pod()
    blocker["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 10  # more than the quota
    made = cluster.admin.create(r.PODS, blocker, "default")
    with pytest.raises(ApiError) as refused:
        cluster.admin.patch(
            r.PODS, made["metadata"]["name"], {"spec": {"schedulingGates": None}}, "default"
        )
    assert "only Tower removes its scheduling gate kueue.x-k8s.io/admission" in str(refused.value)


def test_a_running_pod_preempted_is_deleted_and_holds_its_quota_until_it_stops(
    cluster, start_controller
):
    preemption_setup(cluster)
    start_controller()
    serving = example_pod()
    serving["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    serving["spec"]["containers"][0]["resources"]["requests"]["cpu"] = 9
    low = cluster.admin.create(r.PODS, serving, "default")
    eventually(lambda: ungated(cluster, low), what="the serving pod admitted")
    kubelet(cluster, low, "Running")

    high = cluster.job("urgent", "9", labels={"kueue.x-k8s.io/priority-class": "high"})
    eventually(
        lambda: (pod(cluster, low) or {}).get("metadata", {}).get("deletionTimestamp"),
        what="the preempted pod deleted",
    )
    assert cluster.get("jobs", "urgent", "default")["spec"]["suspend"] is True  # still running
    kubelet(cluster, low, "Failed")  # its containers stopped
    eventually(
        lambda: cluster.get("jobs", "urgent", "default")["spec"]["suspend"] is False,
        what="the Job started once the pod stopped",
    )
    eventually(lambda: pod(cluster, low) is None, what="the pod gone, its finalizer off")
    assert high is not None


def test_a_deployments_pods_are_queued_one_by_one(cluster, start_controller):
    """No ReplicaSet controller runs in the double: the test makes the pods from the
    template the webhook marked, as the ReplicaSet controller would."""
    setup(cluster)
    start_controller()
    [deployment] = load(EXAMPLES / "serving" / "sample-deployment.yaml")
    created = cluster.admin.create(DEPLOYMENTS, deployment, "default")
    template = created["spec"]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/pod-suspending-parent"] == (
        "deployment"
    )
    assert template["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "user-queue"
    assert template["metadata"]["labels"]["kueue.x-k8s.io/managed"] == "true"
    made = []
    for i in range(3):
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                **copy.deepcopy(template["metadata"]),
                "name": f"nginx-deployment-{i}",
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "ReplicaSet",
                        "name": "nginx-deployment-abc",
                        "uid": "rs-uid",
                        "controller": True,
                    }
                ],
            },
            "spec": copy.deepcopy(template["spec"]),
        }
        made.append(cluster.admin.create(r.PODS, body, "default"))
    for each in made:
        assert GATE in each["spec"]["schedulingGates"]
        assert FINALIZER not in (each["metadata"].get("finalizers") or [])  # its parent's
    workloads = [eventually(lambda p=p: cluster.workload_of(p), what="a Workload") for p in made]
    assert len({w["metadata"]["name"] for w in workloads}) == 3
    for each in made:
        eventually(lambda p=each: ungated(cluster, p), what="each pod admitted")
    said = tower(cluster, "why", "deployment/nginx-deployment", "-n", "default", "-o", "json")
    assert said.returncode == 0, said.stderr
    answer = json.loads(said.stdout)
    assert (answer["kind"], answer["state"]) == ("Deployment", "3 Admitted")
    assert [p["name"] for p in answer["pods"]] == [f"nginx-deployment-{i}" for i in range(3)]
    text = tower(cluster, "why", "deployment/nginx-deployment", "-n", "default").stdout
    assert text.startswith("Deployment default/nginx-deployment\nState:       3 Admitted")


def test_a_gpu_pod_is_planned_and_sent_to_its_node(cluster):
    """With placement on, the controller watches every pod (for the nodes' use) and the
    queued pods (as jobs) side by side: a 4-GPU pod is planned on the node that holds it,
    ungated there, and kube-scheduler's filter sends it to that node only."""
    from tests.controller.conftest import controller_process
    from tests.controller.test_placement import (
        FLAVOR,
        GPU,
        LOCAL_QUEUE,
        QUEUE,
        node,
        scheduler_filter,
    )
    from tests.servers import free_port

    for name, gpus in (("gpu-node-1", 2), ("gpu-node-2", 4), ("cpu-node", None)):
        cluster.admin.create(r.NODES, node(name, gpus))
    cluster.apply(FLAVOR, QUEUE, LOCAL_QUEUE)
    port = free_port()
    proc = controller_process(cluster, "--scheduler-extender-address", f"127.0.0.1:{port}")
    try:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "train", "labels": {"kueue.x-k8s.io/queue-name": "gpus"}},
            "spec": {
                "containers": [
                    {
                        "name": "train",
                        "image": "busybox:1.36",
                        "resources": {"requests": {"cpu": "1", GPU: "4"}, "limits": {GPU: "4"}},
                    }
                ]
            },
        }
        made = cluster.admin.create(r.PODS, body, "default")
        running = eventually(lambda: ungated(cluster, made), 20, "the GPU pod ungated")
        assert running["spec"]["nodeSelector"] == {"gpu": "a100"}
        workload = cluster.workload_of(made)
        assert json.loads(workload["metadata"]["annotations"]["tower.dev/placement"]) == {
            "main": {"gpu-node-2": 1}
        }
        answer = scheduler_filter(port, running, ["gpu-node-1", "gpu-node-2", "cpu-node"])
        assert answer["NodeNames"] == ["gpu-node-2"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)

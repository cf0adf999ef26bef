"""Physical fit end to end: the double, the real webhook, `python -m extender run` with its
scheduler extender, and pods placed where the Workload's plan says."""

from __future__ import annotations

import json
import signal
from http.client import HTTPConnection
from typing import Any

from extender.kube.api import resources as r
from tests.builders import ready_node
from tests.controller.conftest import controller_process, eventually
from tests.servers import free_port
from tests.waiting import wait_until

GPU = "nvidia.com/gpu"
FLAVOR = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ResourceFlavor",
    "metadata": {"name": "a100"},
    "spec": {"nodeLabels": {"gpu": "a100"}},
}
QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "ClusterQueue",
    "metadata": {"name": "gpu-queue"},
    "spec": {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", GPU],
                "flavors": [
                    {
                        "name": "a100",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "64"},
                            {"name": GPU, "nominalQuota": "8"},
                        ],
                    }
                ],
            }
        ],
    },
}
LOCAL_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "LocalQueue",
    "metadata": {"name": "gpus", "namespace": "default"},
    "spec": {"clusterQueue": "gpu-queue"},
}


def node(name: str, gpus: int | None) -> dict[str, Any]:
    allocatable = {"cpu": "16", "memory": "64Gi", "pods": "110"}
    labels = {"kubernetes.io/hostname": name}
    if gpus is not None:
        allocatable[GPU] = str(gpus)
        labels["gpu"] = "a100"
    return ready_node(name, labels, allocatable)


def gpu_job(cluster: Any, name: str, pods: int, gpus: int) -> dict[str, Any]:
    body = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": "gpus"},
            "annotations": {"tower.dev/sim-duration": "600s"},
        },
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "train",
                            "image": "busybox:1.36",
                            "resources": {
                                "requests": {"cpu": "1", GPU: str(gpus)},
                                "limits": {GPU: str(gpus)},
                            },
                        }
                    ],
                }
            },
        },
    }
    return cluster.admin.create(r.JOBS, body, "default")


def pod_of(job: dict[str, Any], name: str) -> dict[str, Any]:
    """A pod as the Job controller makes it from the Job's template."""
    template = job["spec"]["template"]
    meta = template.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": dict(meta.get("labels") or {}),
            "annotations": dict(meta.get("annotations") or {}),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job["metadata"]["name"],
                    "uid": job["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": template["spec"],
    }


def scheduler_filter(port: int, pod: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """What kube-scheduler sends with nodeCacheCapable: true (the Pod has no kind/apiVersion)."""
    pod = {k: v for k, v in pod.items() if k not in ("kind", "apiVersion")}
    conn = HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        body = json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names})
        conn.request("POST", "/scheduler/filter", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        answer: dict[str, Any] = json.loads(response.read())
        return answer
    finally:
        conn.close()


def pending_message(cluster: Any, job: dict[str, Any]) -> str | None:
    workload = cluster.workload_of(job)
    for condition in ((workload or {}).get("status") or {}).get("conditions") or []:
        if condition["type"] == "QuotaReserved" and condition["status"] == "False":
            return str(condition["message"])
    return None


def test_gpus_are_admitted_only_where_a_node_holds_each_pod(cluster: Any) -> None:
    for name, gpus in (("gpu-node-1", 4), ("gpu-node-2", 4), ("cpu-node", None)):
        cluster.admin.create(r.NODES, node(name, gpus))
    cluster.apply(FLAVOR, QUEUE, LOCAL_QUEUE)
    port = free_port()
    proc = controller_process(cluster, "--scheduler-extender-address", f"127.0.0.1:{port}")
    try:
        # 8 GPUs of quota, but no node has 8: the one-pod job waits, and says why.
        big = gpu_job(cluster, "one-pod-of-8", 1, 8)
        message = eventually(lambda: pending_message(cluster, big), 20, "the 8-GPU job's reason")
        assert message == (
            "needs 8 nvidia.com/gpu on one node; the nodes of flavor a100 have at most 4 free "
            "(gpu-node-1: 4, gpu-node-2: 4)"
        )
        assert cluster.get("jobs", "one-pod-of-8", "default")["spec"]["suspend"] is True

        # Two pods of 4 fit, one on each node: admitted, with the plan on its Workload.
        gpu_job(cluster, "two-pods-of-4", 2, 4)
        job = eventually(
            lambda: (
                (j := cluster.get("jobs", "two-pods-of-4", "default"))
                and j["spec"]["suspend"] is False
                and j
            ),
            20,
            "the 4-GPU job to start",
        )
        workload = cluster.workload_of(job)
        assert workload is not None
        plan = json.loads(workload["metadata"]["annotations"]["tower.dev/placement"])
        assert plan == {"main": {"gpu-node-1": 1, "gpu-node-2": 1}}
        annotations = job["spec"]["template"]["metadata"]["annotations"]
        assert annotations["kueue.x-k8s.io/workload"] == workload["metadata"]["name"]

        # kube-scheduler asks where its first pod may go: the two planned nodes.
        candidates = ["gpu-node-1", "gpu-node-2", "cpu-node"]
        first = pod_of(job, "two-pods-of-4-a")
        answer = scheduler_filter(port, first, candidates)
        assert answer["NodeNames"] == ["gpu-node-1", "gpu-node-2"]
        assert answer["FailedNodes"] == {"cpu-node": "not a node of flavor a100"}

        # It binds to gpu-node-1; the second pod is then sent to gpu-node-2 only.
        bound = {**first, "spec": {**first["spec"], "nodeName": "gpu-node-1"}}
        cluster.admin.create(r.PODS, bound, "default")
        second = pod_of(job, "two-pods-of-4-b")

        def second_goes_to_node_2() -> dict[str, Any] | None:
            answer = scheduler_filter(port, second, candidates)
            return answer if answer["NodeNames"] == ["gpu-node-2"] else None

        answer = eventually(second_goes_to_node_2, 10, "the second pod to be sent to gpu-node-2")
        assert answer["FailedNodes"] == {
            "gpu-node-1": "planned for other pods of this workload",
            "cpu-node": "not a node of flavor a100",
        }
        # The 8-GPU job still waits (its quota is taken now, and no node could hold it).
        assert cluster.get("jobs", "one-pod-of-8", "default")["spec"]["suspend"] is True
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)


def plan_of(cluster: Any, job: dict[str, Any]) -> dict[str, Any] | None:
    workload = cluster.workload_of(job) or {}
    raw = (workload.get("metadata", {}).get("annotations") or {}).get("tower.dev/placement")
    return json.loads(raw) if raw else None


def workload_summary(cluster: Any, job: dict[str, Any]) -> dict[str, Any]:
    """The plan and conditions of a Job's Workload, and whether the Job is suspended."""
    workload = cluster.workload_of(job) or {}
    current = cluster.get("jobs", job["metadata"]["name"], "default") or {}
    return {
        "plan": plan_of(cluster, job),
        "conditions": [
            (c["type"], c["status"], c.get("reason"))
            for c in (workload.get("status") or {}).get("conditions") or []
        ],
        "workload": (workload.get("metadata") or {}).get("name"),
        "suspended": (current.get("spec") or {}).get("suspend"),
    }


def not_ready(cluster: Any, name: str) -> None:
    conditions = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]
    cluster.admin.patch(r.NODES, name, {"status": {"conditions": conditions}}, subresource="status")


def evicted_reason(cluster: Any, job: dict[str, Any]) -> str | None:
    workload = cluster.workload_of(job) or {}
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition["type"] == "Evicted" and condition["status"] == "True":
            return f"{condition['reason']}: {condition['message']}"
    return None


def test_a_failed_node_moves_the_plan_or_evicts_the_workload(cluster: Any) -> None:
    for name in ("gpu-node-1", "gpu-node-2"):
        cluster.admin.create(r.NODES, node(name, 4))
    cluster.apply(FLAVOR, QUEUE, LOCAL_QUEUE)
    proc = controller_process(cluster)
    try:
        job = gpu_job(cluster, "one-pod-of-4", 1, 4)
        seen = wait_until(
            lambda: workload_summary(cluster, job),
            lambda seen: seen["plan"],
            timeout=20,
            what="a plan on the Workload",
        )
        first = seen["plan"]
        (planned,) = first["main"]
        other = "gpu-node-2" if planned == "gpu-node-1" else "gpu-node-1"
        # Its node dies before the pod runs: the pod is planned on the other node.
        not_ready(cluster, planned)
        eventually(lambda: plan_of(cluster, job) == {"main": {other: 1}}, 20, "the plan to move")
        # The other node dies too: no node holds the pod, so the workload is evicted (and
        # requeued: admitted again once a node has room).
        not_ready(cluster, other)
        reason = eventually(lambda: evicted_reason(cluster, job), 20, "the eviction")
        assert reason.startswith("NodeFailures: A node of its placement failed"), reason
        assert "needs 4 nvidia.com/gpu" in reason or "no Ready, schedulable node" in reason
        eventually(
            lambda: cluster.get("jobs", "one-pod-of-4", "default")["spec"]["suspend"] is True,
            20,
            "the Job to be suspended again",
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)

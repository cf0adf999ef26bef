"""Kueue v0.19.2 test/e2e/singlecluster/extended/kuberay_autoscaling_test.go, ported.

KubeRay's operator is played (tests/e2e/kueue/ray.py). Kueue's case runs Python on the head
pod (a detached actor asking for a worker group's custom resource, later killed) and Ray's
autoscaler scales that group; here the test scales the group as the autoscaler would, since
neither Ray nor an exec into the pod is available. The head asks 500m where Kueue's asks 1
cpu: with the autoscaler's 500m and two workers of 400m it would need 2.3 cpu, more than the
real node's 2 (Kueue's quota of 3 cpu is kept).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.ray import (
    GROUP_LABEL,
    OBJECT_STORE_MEMORY,
    KubeRay,
    cluster_spec,
    head_pod,
    install_crds,
    make_ray_cluster,
    non_finished,
    worker_pods,
)
from tests.e2e.kueue.util import (
    Cluster,
    eventually,
    is_admitted,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/extended/kuberay_autoscaling_test.go"
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
def lq(cluster: Cluster, ns: str, kuberay_crds: None) -> Iterator[str]:
    """The BeforeEach: a flavor of on-demand nodes, a ClusterQueue of 3 cpu and 2Gi (the head's
    1 cpu, the autoscaler's 500m and two workers of 400m at peak), its LocalQueue."""
    rf = f"kuberay-autoscaling-rf-{ns}"
    cq, lq = f"kuberay-autoscaling-cq-{ns}", f"kuberay-autoscaling-lq-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(rf, {"instance-type": "on-demand"}))
    cluster.create_active(
        "clusterqueues", make_cluster_queue(cq, make_flavor_quotas(rf, cpu="3", memory="2Gi"))
    )
    cluster.create_active("localqueues", make_local_queue(lq, ns, cq), ns)
    yield lq
    cluster.custom.delete_collection_namespaced_custom_object("ray.io", "v1", ns, "rayclusters")
    cluster.core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", lq, ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", rf)


def _ray_cluster(cluster: Cluster, name: str, ns: str) -> dict[str, Any]:
    obj = cluster.custom.get_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", name)
    return dict(obj)


@kueue_case(
    GO, "KubeRay multi-PodSet autoscaling Should scale RayCluster worker groups independently"
)
def test_should_scale_ray_cluster_worker_groups_independently(
    cluster: Cluster, ns: str, lq: str, kuberay: KubeRay
) -> None:
    name = "raycluster-multi-podset"
    spec = cluster_spec(head_cpu="500m", worker_cpu="400m")
    spec["enableInTreeAutoscaling"] = True
    spec["autoscalerOptions"] = {"idleTimeoutSeconds": 1}
    spec["headGroupSpec"]["rayStartParams"]["num-cpus"] = "0"
    [worker] = spec["workerGroupSpecs"]
    groups = []
    for group, resource in (("workers-a", "worker_a"), ("workers-b", "worker_b")):
        copy = {**worker, "groupName": group, "replicas": 0, "minReplicas": 0, "maxReplicas": 1,
                "rayStartParams": {"num-cpus": "0", "object-store-memory": OBJECT_STORE_MEMORY,
                                   "resources": f"'{{\"{resource}\": 1}}'"}}  # fmt: skip
        groups.append(copy)
    spec["workerGroupSpecs"] = groups
    body = make_ray_cluster(name, ns, lq, spec, elastic=True)
    cluster.custom.create_namespaced_custom_object("ray.io", "v1", ns, "rayclusters", body)

    def zero_worker_cluster_ready() -> bool:
        obj = _ray_cluster(cluster, name, ns)
        assert obj["spec"].get("suspend") is False, "still suspended"
        status = obj.get("status") or {}
        ready = {c["type"]: c["status"] for c in status.get("conditions") or []}
        assert ready.get("HeadPodReady") == "True", status
        assert status.get("desiredWorkerReplicas") == 0, status
        assert head_pod(cluster.core, ns, name).status.phase == "Running"
        return True

    eventually(zero_worker_cluster_ready, VERY_LONG_TIMEOUT, "the zero-worker RayCluster ready")

    def expect_worker_groups(expected: dict[str, int]) -> None:
        def sized() -> bool:
            obj = _ray_cluster(cluster, name, ns)
            replicas = {
                g["groupName"]: g.get("replicas", 0) for g in obj["spec"]["workerGroupSpecs"]
            }
            assert replicas == expected, replicas
            running: dict[str, int] = {}
            for pod in worker_pods(cluster.core, ns, name):
                group = pod.metadata.labels[GROUP_LABEL]
                running[group] = running.get(group, 0) + 1
            for group, count in expected.items():
                assert running.get(group, 0) == count, f"running workers {running}"
            return True

        eventually(sized, VERY_LONG_TIMEOUT, f"worker groups at {expected}")

    def expect_kueue_accounting(expected: dict[str, int]) -> None:
        def accounted() -> bool:
            active = non_finished(cluster.list("workloads", ns))
            assert len(active) == 1, f"{len(active)} non-finished workloads"
            assert is_admitted(active[0]), active[0].get("status")
            counts = {p["name"]: p["count"] for p in active[0]["spec"]["podSets"]}
            for group, count in expected.items():
                assert counts.get(group) == count, counts
            return True

        eventually(accounted, VERY_LONG_TIMEOUT, f"Kueue accounting for {expected}")

    steps = (
        ("workers-a", 1, {"workers-a": 1, "workers-b": 0}),  # actor A asks for worker_a
        ("workers-b", 1, {"workers-a": 1, "workers-b": 1}),  # actor B asks for worker_b
        ("workers-a", 0, {"workers-a": 0, "workers-b": 1}),  # actor A killed: idle, let go
        ("workers-b", 0, {"workers-a": 0, "workers-b": 0}),  # actor B killed
    )
    for group, replicas, expected in steps:
        kuberay.scale(name, group, replicas)
        expect_worker_groups(expected)
        expect_kueue_accounting(expected)

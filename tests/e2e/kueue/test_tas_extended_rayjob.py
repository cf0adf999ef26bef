"""Kueue v0.19.2 test/e2e/tas/extended/rayjob_test.go, ported case by case.

KubeRay is played (tas_operators.play_rayjob): the RayCluster's head and workers and the
submitter's pod made from the templates as Tower started the RayJob; Tower lets each through
to its host, the real scheduler binds it to one of the TAS workers (tas_extended.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.tas_extended import (
    BLOCK,
    GPU,
    PREFERRED,
    RACK,
    REQUIRED,
    expect_pods_created,
    expect_pods_scheduled,
    kind_workers,
    operator_crds,
    pods,
    tas_queues,
)
from tests.e2e.kueue.tas_operators import RAYJOB, create, get, play_rayjob
from tests.e2e.kueue.util import AGNHOST, QUEUE_LABEL, Cluster

pytestmark = pytest.mark.e2e
GO = "tas/extended/rayjob_test.go"
__all__ = ["kind_workers", "operator_crds"]  # fixtures


@pytest.fixture
def queue(operator_crds: None, cluster: Cluster, ns: str, kind_workers: list[str]) -> Iterator[str]:
    """The BeforeEach: LocalQueue `local-queue` of a ClusterQueue with 2 cpus, 8Gi, 8 gpus."""
    quotas = {"cpu": "2", "memory": "8Gi", GPU: "8"}
    with tas_queues(cluster, ns, "local-queue", quotas) as name:
        yield name


def template(container: str, requests: dict[str, str], annotations: dict[str, str],
             restart: str = "OnFailure") -> dict[str, Any]:  # fmt: skip
    """A pod template of the case (the kuberay test image stands as agnhost here: no pod of
    this case runs on a real node)."""
    return {
        "metadata": {"annotations": annotations},
        "spec": {"restartPolicy": restart, "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": container, "image": AGNHOST,
                                 "resources": {"requests": requests, "limits": requests}}]},
    }  # fmt: skip


@kueue_case(GO, "TopologyAwareScheduling for RayJob Creating a RayJob Should place pods based on the ranks-ordering")  # fmt: skip
def test_places_pods_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    workers = 3
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "ranks-ray", "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "suspend": True,
            "shutdownAfterJobFinishes": True,
            "submissionMode": "K8sJobMode",
            "entrypoint": 'python -c "import ray; ray.init(); print(ray.cluster_resources())"',
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {},
                    "template": template("head-container", {"cpu": "1"}, {PREFERRED: RACK}),
                },
                "workerGroupSpecs": [{
                    "groupName": "workers-group-0",
                    "replicas": workers, "minReplicas": workers, "maxReplicas": 10,
                    "rayStartParams": {},
                    "template": template("head-container", {GPU: "1"}, {PREFERRED: BLOCK}),
                }],
            },
            "submitterPodTemplate": template("ranks-ray-submitter", {"cpu": "200m"},
                                             {REQUIRED: BLOCK}, restart="Never"),
        },
    }  # fmt: skip
    create(cluster, RAYJOB, body)
    ray_cluster = play_rayjob(cluster, "ranks-ray", ns)  # "RayJob is unsuspended", its pods
    expect_pods_created(cluster, ns, 1 + workers + 1)
    expect_pods_scheduled(cluster, ns, 1 + workers + 1)
    assert get(cluster, RAYJOB, "ranks-ray", ns)["status"]["rayClusterName"] == ray_cluster
    # util.GetRayClusterWorkerPods: the workers, each on its own node.
    selector = f"ray.io/cluster={ray_cluster},ray.io/node-type=worker"
    assert len({p.spec.node_name for p in pods(cluster, ns, selector)}) == workers

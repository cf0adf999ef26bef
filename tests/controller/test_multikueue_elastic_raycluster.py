"""An elastic RayCluster run through MultiKueue: scaled down on the manager, its copy on the
worker is scaled down in place (Kueue's elastic replica sync, ray_multikueue_adapter.go), and
a scale-up does not reach the worker before its new slice is admitted."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.jobframework import registry
from tests.controller.conftest import Cluster, eventually
from tests.controller.test_kubeflow import condition, load
from tests.controller.test_multikueue_kinds import (  # noqa: F401 (the fixtures)
    KINDS,
    _manager_and_worker,
    _resource,
    manager_webhook,
    worker_webhook,
)

ELASTIC = "kueue.x-k8s.io/elastic-job"


def _elastic_cluster(replicas: int) -> dict[str, Any]:
    """Kueue's RayCluster example, elastic, its worker group at `replicas`."""
    [example] = load(KINDS["raycluster"].example)
    example["metadata"].setdefault("annotations", {})[ELASTIC] = "true"
    group = example["spec"]["workerGroupSpecs"][0]
    group.update(replicas=replicas, minReplicas=0, maxReplicas=max(replicas, 4))
    return example


def _replicas(cluster: Cluster, resource: Any, name: str) -> int | None:
    found = cluster.get(resource.plural, name, "default")
    return None if found is None else found["spec"]["workerGroupSpecs"][0].get("replicas")


@pytest.mark.usefixtures("manager_webhook")
def test_an_elastic_raycluster_scaled_down_here_is_scaled_down_on_the_worker_in_place(
    cluster, webhook, request, tmp_path
):
    kind = KINDS["raycluster"]
    adapter = registry.ADAPTERS[kind.framework]
    resource = _resource(kind)
    hook = request.getfixturevalue("worker_webhook")
    with _manager_and_worker(cluster, webhook, hook, tmp_path, kind) as worker:
        created = cluster.admin.create(resource, _elastic_cluster(2), "default")
        name = created["metadata"]["name"]
        eventually(
            lambda: (
                (w := cluster.workload_of(created))
                and condition(w, "Admitted").get("status") == "True"
            ),
            timeout=30,
            what="the elastic RayCluster's slice admitted on the manager",
        )
        remote = eventually(
            lambda: (
                (j := worker.get(resource.plural, name, "default"))
                and not adapter.is_suspended(j)
                and j
            ),
            timeout=30,
            what="the worker's RayCluster started",
        )
        assert remote["spec"]["workerGroupSpecs"][0]["replicas"] == 2
        uid = remote["metadata"]["uid"]

        group = created["spec"]["workerGroupSpecs"][0]
        cluster.admin.patch(
            resource, name, {"spec": {"workerGroupSpecs": [{**group, "replicas": 1}]}}, "default"
        )
        eventually(
            lambda: _replicas(worker, resource, name) == 1,
            timeout=20,
            what="the worker's RayCluster scaled down to one worker",
        )
        copy_there = worker.get(resource.plural, name, "default")
        assert copy_there["metadata"]["uid"] == uid, "the worker's RayCluster was made again"
        # Its head and the rest of its spec are the worker's as they were.
        assert copy_there["spec"]["headGroupSpec"] == remote["spec"]["headGroupSpec"]

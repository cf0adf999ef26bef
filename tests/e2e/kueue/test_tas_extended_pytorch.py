"""Kueue v0.19.2 test/e2e/tas/extended/pytorch_test.go, ported case by case.

training-operator is played (tas_operators.play_pytorchjob): a pod per replica, labelled
with its replica type and index; Tower lets each through to its host and the real scheduler
binds it to one of the TAS workers (tas_extended.py)."""

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
    expect_pods_created,
    expect_pods_scheduled,
    kind_workers,
    operator_crds,
    pods,
    tas_queues,
)
from tests.e2e.kueue.tas_operators import (
    PYTORCHJOB,
    REPLICA_INDEX,
    REPLICA_TYPE,
    create,
    play_pytorchjob,
)
from tests.e2e.kueue.util import AGNHOST, BEHAVIOR_EXIT_FAST, QUEUE_LABEL, Cluster

pytestmark = pytest.mark.e2e
GO = "tas/extended/pytorch_test.go"
__all__ = ["kind_workers", "operator_crds"]  # fixtures


@pytest.fixture
def queue(operator_crds: None, cluster: Cluster, ns: str, kind_workers: list[str]) -> Iterator[str]:
    """The BeforeEach: LocalQueue `local-queue` of a ClusterQueue with 1 cpu and 8 gpus."""
    with tas_queues(cluster, ns, "local-queue", {"cpu": "1", GPU: "8"}) as name:
        yield name


def replica(count: int, level: str, requests: dict[str, str]) -> dict[str, Any]:
    """PyTorchReplicaSpecRequirement: agnhost exiting fast, restartPolicy OnFailure, the
    topology preferred at `level`."""
    container = {"name": "pytorch", "image": AGNHOST, "args": BEHAVIOR_EXIT_FAST,
                 "resources": {"requests": requests, "limits": requests}}  # fmt: skip
    return {
        "replicas": count,
        "restartPolicy": "OnFailure",
        "template": {
            "metadata": {"annotations": {PREFERRED: level}},
            "spec": {"restartPolicy": "OnFailure", "containers": [container]},
        },
    }


@kueue_case(GO, "TopologyAwareScheduling for PyTorchJob Creating a PyTorchJob Should place pods based on the ranks-ordering")  # fmt: skip
def test_places_pods_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "ranks-pytorch", "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Master": replica(1, RACK, {"cpu": "200m"}),
                "Worker": replica(3, BLOCK, {GPU: "1"}),
            },
        },
    }
    create(cluster, PYTORCHJOB, body)
    play_pytorchjob(cluster, "ranks-pytorch", ns)  # "PyTorchJob is unsuspended", its pods
    expect_pods_created(cluster, ns, 4)
    expect_pods_scheduled(cluster, ns, 4)
    got = {
        f"worker/{p.metadata.labels[REPLICA_INDEX]}": p.spec.node_name
        for p in pods(cluster, ns)
        if p.metadata.labels.get(REPLICA_TYPE) == "worker"
    }
    assert got == {"worker/0": "kind-worker", "worker/1": "kind-worker2",
                   "worker/2": "kind-worker3"}  # fmt: skip

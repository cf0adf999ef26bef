"""Kueue v0.19.2 test/e2e/tas/extended/trainjob_test.go, ported case by case.

The trainer and the JobSet controller are played (tas_operators.play_trainjob): a JobSet
from the TrainingRuntime with Kueue's runtime patch applied, then its Jobs; the real Job
controller makes the pods, Tower lets each through to its host."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.tas_extended import (
    BLOCK,
    GPU,
    PREFERRED,
    SLICE_REQUIRED,
    SLICE_SIZE,
    expect_pods_created,
    expect_pods_scheduled,
    kind_workers,
    operator_crds,
    tas_queues,
)
from tests.e2e.kueue.tas_operators import (
    RUNTIME,
    TRAINJOB,
    create,
    make_jobset,
    play_trainjob,
    rank_assignments,
)
from tests.e2e.kueue.util import QUEUE_LABEL, Cluster

pytestmark = pytest.mark.e2e
GO = "tas/extended/trainjob_test.go"
__all__ = ["kind_workers", "operator_crds"]  # fixtures


@pytest.fixture
def queue(operator_crds: None, cluster: Cluster, ns: str, kind_workers: list[str]) -> Iterator[str]:
    """The When's BeforeEach: LocalQueue `main` of a ClusterQueue with 8 gpus of tas-flavor."""
    with tas_queues(cluster, ns, "main", {GPU: "8"}) as name:
        yield name


def run_ranks_case(
    cluster: Cluster, ns: str, queue: str, replicas: int, parallelism: int, annotations: dict
) -> dict[str, str]:
    """A TrainingRuntime of one replicatedJob `node` (testingtrainjob.MakeTrainingRuntime of
    a testingjobset spec), a TrainJob of it in `queue`; its pods' rank assignment."""
    jobset = make_jobset(
        "",
        ns,
        queue,
        {"name": "node", "replicas": replicas, "parallelism": parallelism,
         "annotations": annotations},
    )  # fmt: skip
    jobset["spec"].pop("suspend")
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "test-trainingruntime", "namespace": ns},
        "spec": {"template": {"spec": jobset["spec"]}},
    }
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "trainjob-test", "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "suspend": True,
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "name": "test-trainingruntime",
                           "kind": "TrainingRuntime"},
            "trainer": {"resourcesPerNode": {"requests": {}, "limits": {}}},
        },
    }  # fmt: skip
    create(cluster, RUNTIME, runtime)
    create(cluster, TRAINJOB, trainjob)
    play_trainjob(cluster, "trainjob-test", ns)  # "TrainJob is unsuspended", then its JobSet
    expect_pods_created(cluster, ns, replicas * parallelism)
    expect_pods_scheduled(cluster, ns, replicas * parallelism)
    return rank_assignments(cluster, ns)


@kueue_case(GO, "TopologyAwareScheduling for TrainJob Creating a TrainJob Should place pods based on the ranks-ordering")  # fmt: skip
def test_places_pods_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    got = run_ranks_case(cluster, ns, queue, 3, 2, {PREFERRED: BLOCK})
    assert got == {
        "0/0": "kind-worker",
        "0/1": "kind-worker2",
        "1/0": "kind-worker3",
        "1/1": "kind-worker4",
        "2/0": "kind-worker5",
        "2/1": "kind-worker6",
    }


SLICES_WANTED = {
    "0/0": "kind-worker",
    "0/1": "kind-worker2",
    "0/2": "kind-worker3",
    "1/0": "kind-worker5",
    "1/1": "kind-worker6",
    "1/2": "kind-worker7",
}


@kueue_case(GO, "TopologyAwareScheduling for TrainJob Creating a TrainJob Should place pods in podset slices with two-level scheduling based on the ranks-ordering")  # fmt: skip
def test_places_slices_two_level_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    annotations = {PREFERRED: BLOCK, SLICE_REQUIRED: BLOCK, SLICE_SIZE: "3"}
    assert run_ranks_case(cluster, ns, queue, 2, 3, annotations) == SLICES_WANTED


@kueue_case(GO, "TopologyAwareScheduling for TrainJob Creating a TrainJob Should place pods in podset slices with slice-only scheduling based on the ranks-ordering")  # fmt: skip
def test_places_slices_only_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    annotations = {SLICE_REQUIRED: BLOCK, SLICE_SIZE: "3"}
    assert run_ranks_case(cluster, ns, queue, 2, 3, annotations) == SLICES_WANTED

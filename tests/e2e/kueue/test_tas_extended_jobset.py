"""Kueue v0.19.2 test/e2e/tas/extended/jobset_test.go, ported case by case.

The JobSet controller is played (tas_operators.play_jobset); the real Job controller makes
the pods, Tower lets each through to its host, the real scheduler binds it to one of the
eight TAS workers (tas_extended.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from extender.core.jobframework.adapter import workload_name
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.tas_extended import (
    BLOCK,
    GPU,
    HOSTNAME,
    NODE_GROUP,
    PREFERRED,
    REQUIRED,
    SLICE_REQUIRED,
    SLICE_SIZE,
    admitted_workload,
    expect_pods_created,
    expect_pods_scheduled,
    host_assignment,
    kind_workers,
    operator_crds,
    tas_queues,
)
from tests.e2e.kueue.tas_operators import (
    JOBSET,
    complete_jobset,
    create,
    make_jobset,
    play_jobset,
    rank_assignments,
)
from tests.e2e.kueue.util import (
    LONG_TIMEOUT,
    Cluster,
    expect_workload_to_finish,
)

pytestmark = pytest.mark.e2e
GO = "tas/extended/jobset_test.go"
__all__ = ["kind_workers", "operator_crds"]  # fixtures


@pytest.fixture
def queue(operator_crds: None, cluster: Cluster, ns: str, kind_workers: list[str]) -> Iterator[str]:
    """The When's BeforeEach: LocalQueue `main` of a ClusterQueue with 8 gpus of tas-flavor."""
    with tas_queues(cluster, ns, "main", {GPU: "8"}) as name:
        yield name


def run_ranks_case(
    cluster: Cluster, ns: str, queue: str, replicas: int, parallelism: int, annotations: dict
) -> dict[str, str]:
    body = make_jobset(
        "ranks-jobset",
        ns,
        queue,
        {"name": "replicated-job-1", "replicas": replicas, "parallelism": parallelism,
         "annotations": annotations},
    )  # fmt: skip
    create(cluster, JOBSET, body)
    play_jobset(cluster, "ranks-jobset", ns)  # "JobSet is unsuspended", then its Jobs
    expect_pods_created(cluster, ns, replicas * parallelism)
    expect_pods_scheduled(cluster, ns, replicas * parallelism)
    return rank_assignments(cluster, ns)


@kueue_case(GO, "TopologyAwareScheduling for JobSet Creating a JobSet Should place pods based on the ranks-ordering")  # fmt: skip
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


@kueue_case(GO, "TopologyAwareScheduling for JobSet Creating a JobSet Should place pods in podset slices with two-level scheduling based on the ranks-ordering")  # fmt: skip
def test_places_slices_two_level_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    annotations = {PREFERRED: BLOCK, SLICE_REQUIRED: BLOCK, SLICE_SIZE: "3"}
    assert run_ranks_case(cluster, ns, queue, 2, 3, annotations) == SLICES_WANTED


@kueue_case(GO, "TopologyAwareScheduling for JobSet Creating a JobSet Should place pods in podset slices with slice-only scheduling based on the ranks-ordering")  # fmt: skip
def test_places_slices_only_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    annotations = {SLICE_REQUIRED: BLOCK, SLICE_SIZE: "3"}
    assert run_ranks_case(cluster, ns, queue, 2, 3, annotations) == SLICES_WANTED


@kueue_case(GO, "TopologyAwareScheduling for JobSet Creating a JobSet should admit a JobSet with two ReplicatedJobs")  # fmt: skip
def test_admits_two_replicated_jobs(cluster: Cluster, ns: str, queue: str) -> None:
    one = {"replicas": 1, "parallelism": 1, "annotations": {REQUIRED: HOSTNAME}}
    body = make_jobset("test-jobset", ns, queue, {"name": "rj1", **one}, {"name": "rj2", **one})
    created = create(cluster, JOBSET, body)
    play_jobset(cluster, "test-jobset", ns)  # waits for it to be unsuspended
    jobset = cluster.custom.get_namespaced_custom_object(
        "jobset.x-k8s.io", "v1alpha2", ns, "jobsets", "test-jobset"
    )
    selector = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert selector.get("nodeSelector") == {NODE_GROUP: "tas-group"}
    name = workload_name("JobSet", "jobset.x-k8s.io", "test-jobset", created["metadata"]["uid"])
    workload = admitted_workload(cluster, name, ns)
    assignments = workload["status"]["admission"]["podSetAssignments"]
    assert len(assignments) == 2, assignments
    assert assignments[0].get("topologyAssignment") == host_assignment("kind-worker", 1)
    assert assignments[1].get("topologyAssignment") == host_assignment("kind-worker2", 1)
    complete_jobset(cluster, "test-jobset", ns)
    expect_workload_to_finish(cluster, name, ns, LONG_TIMEOUT)

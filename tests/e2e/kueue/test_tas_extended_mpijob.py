"""Kueue v0.19.2 test/e2e/tas/extended/mpijob_test.go, ported case by case.

mpi-operator is played (tas_operators.play_mpijob): the launcher and the workers made from
the templates as Tower started them, numbered by their replica index; Tower lets each through
to its host and the real scheduler binds it to one of the TAS workers (tas_extended.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from extender.core.jobframework.adapter import workload_name
from tests.e2e.kueue.cases import DifferenceError, kueue_case
from tests.e2e.kueue.tas_extended import (
    BLOCK,
    GPU,
    GROUP_NAME,
    POD_INDEX_OFFSET,
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
from tests.e2e.kueue.tas_operators import (
    JOB_ROLE,
    MPIJOB,
    REPLICA_INDEX,
    create,
    get,
    play_mpijob,
)
from tests.e2e.kueue.util import (
    AGNHOST,
    BEHAVIOR_EXIT_FAST,
    QUEUE_LABEL,
    TIMEOUT,
    Cluster,
    eventually,
)

pytestmark = pytest.mark.e2e
GO = "tas/extended/mpijob_test.go"
__all__ = ["kind_workers", "operator_crds"]  # fixtures


@pytest.fixture
def queue(operator_crds: None, cluster: Cluster, ns: str, kind_workers: list[str]) -> Iterator[str]:
    """The BeforeEach: LocalQueue `local-queue` of a ClusterQueue with 1 cpu and 8 gpus."""
    with tas_queues(cluster, ns, "local-queue", {"cpu": "1", GPU: "8"}) as name:
        yield name


def replica(count: int, annotations: dict[str, str] | None, requests: dict[str, str]) -> dict:
    """MPIJobReplicaSpecRequirement: agnhost exiting fast, restartPolicy OnFailure."""
    container: dict[str, Any] = {"name": "mpijob", "image": AGNHOST, "args": BEHAVIOR_EXIT_FAST}
    if requests:
        container["resources"] = {"requests": requests, "limits": requests}
    template: dict[str, Any] = {"spec": {"restartPolicy": "OnFailure", "containers": [container]}}
    if annotations:
        template["metadata"] = {"annotations": annotations}
    return {"replicas": count, "restartPolicy": "OnFailure", "template": template}


def make_mpijob(name: str, ns: str, queue: str, launcher: dict[str, str] | None,
                worker: dict[str, str] | None, as_worker: bool = False) -> dict[str, Any]:  # fmt: skip
    """testingmpijob.MakeMPIJob(...).Queue(...).MPIJobReplicaSpecs(launcher 1, workers 3)
    .RequestAndLimit(launcher, cpu, 200m).RequestAndLimit(worker, gpu, 1)."""
    spec: dict[str, Any] = {
        "runPolicy": {"suspend": True},
        "mpiReplicaSpecs": {
            "Launcher": replica(1, launcher, {"cpu": "200m"}),
            "Worker": replica(3, worker, {GPU: "1"}),
        },
    }
    if as_worker:
        spec["runLauncherAsWorker"] = True
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": spec,
    }


def rank_assignments(cluster: Cluster, ns: str, with_launcher: bool) -> dict[str, str]:
    """readRankAssignmentsFromMPIJobPods: "<role>/<replica index>" -> its node, for workers
    (and the launcher, when it is grouped with them)."""
    out = {}
    for pod in pods(cluster, ns):
        role = pod.metadata.labels.get(JOB_ROLE)
        if role == "worker" or (with_launcher and role == "launcher"):
            out[f"{role}/{pod.metadata.labels.get(REPLICA_INDEX)}"] = pod.spec.node_name
    return out


def run(cluster: Cluster, ns: str, body: dict[str, Any]) -> None:
    create(cluster, MPIJOB, body)
    play_mpijob(cluster, body["metadata"]["name"], ns)  # "MPIJob is unsuspended", its pods
    expect_pods_created(cluster, ns, 4)
    expect_pods_scheduled(cluster, ns, 4)


@kueue_case(GO, "TopologyAwareScheduling for MPIJob Creating a MPIJob Should place pods based on the ranks-ordering")  # fmt: skip
def test_places_pods_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    run(cluster, ns, make_mpijob("ranks-mpi", ns, queue, {PREFERRED: RACK}, {PREFERRED: BLOCK}))
    assert rank_assignments(cluster, ns, False) == {
        "worker/0": "kind-worker",
        "worker/1": "kind-worker2",
        "worker/2": "kind-worker3",
    }


@kueue_case(GO, "TopologyAwareScheduling for MPIJob Creating a MPIJob with runLauncherAsWorker Should place MPIJob pods based on the ranks-ordering (kueue.x-k8s.io/pod-index-offset Pods annotation)")  # fmt: skip
def test_places_pods_by_ranks_with_an_offset(cluster: Cluster, ns: str, queue: str) -> None:
    name = "ranks-mpi-launcherasworker"
    body = make_mpijob(name, ns, queue, {PREFERRED: RACK}, {PREFERRED: BLOCK}, as_worker=True)
    create(cluster, MPIJOB, body)

    def offset() -> bool:
        worker = get(cluster, MPIJOB, name, ns)["spec"]["mpiReplicaSpecs"]["Worker"]
        annotations = (worker["template"].get("metadata") or {}).get("annotations") or {}
        assert annotations.get(POD_INDEX_OFFSET) == "1", annotations
        return True

    eventually(offset, TIMEOUT, "the webhook's pod-index-offset on the Worker template")
    play_mpijob(cluster, name, ns)
    expect_pods_created(cluster, ns, 4)
    expect_pods_scheduled(cluster, ns, 4)
    assert rank_assignments(cluster, ns, False) == {
        "worker/1": "kind-worker",
        "worker/2": "kind-worker2",
        "worker/3": "kind-worker3",
    }


@kueue_case(GO, "TopologyAwareScheduling for MPIJob Creating a launcher and workers grouped MPIJob with runLauncherAsWorker Should place MPIJob launcher and workers grouped pods based on the ranks-ordering (kueue.x-k8s.io/podset-group-name Pods annotation)")  # fmt: skip
def test_places_grouped_launcher_and_workers_by_ranks(
    cluster: Cluster, ns: str, queue: str
) -> None:
    grouped = {REQUIRED: BLOCK, GROUP_NAME: "same-group"}
    run(cluster, ns, make_mpijob("ranks-mpi-podsetgroup", ns, queue, grouped, grouped, True))
    assert rank_assignments(cluster, ns, True) == {
        "launcher/0": "kind-worker",
        "worker/1": "kind-worker",
        "worker/2": "kind-worker2",
        "worker/3": "kind-worker3",
    }


@kueue_case(
    GO,
    "TopologyAwareScheduling for MPIJob Creating an MPIJob with an unknown replica Should accept the MPIJob and create a Workload with podsets only for known replica types",
    differs="#a-kubeflow-jobs-unknown-replica-type",
)
def test_an_unknown_replica_type_is_accepted_and_left_out(
    cluster: Cluster, ns: str, queue: str
) -> None:
    body = make_mpijob("malformed-replica-type", ns, queue, None, None)
    specs = body["spec"]["mpiReplicaSpecs"]
    specs["Worker"] = replica(1, None, {GPU: "1"})
    del specs["Launcher"]
    specs["Unknown"] = replica(1, {REQUIRED: BLOCK}, {})
    try:  # "MPIJob is admitted by the kueue webhook without panicking"
        created = create(cluster, MPIJOB, body)
    except client.ApiException as err:
        refused = err
    else:
        refused = None
    if refused is not None:
        # Tower refuses it, naming the replica type (docs/kueue.md); any other error fails.
        said = str(refused.body)
        if refused.status == 403 and "spec.mpiReplicaSpecs.Unknown: is not a replica type" in said:
            raise DifferenceError("Kueue accepts an MPIJob with an unknown replica type")
        raise refused
    name = workload_name("MPIJob", "kubeflow.org", "malformed-replica-type",
                         created["metadata"]["uid"])  # fmt: skip

    def workload() -> dict[str, Any]:
        found = cluster.workload(name, ns)
        assert found is not None, f"workload {name} not found"
        return found

    found = eventually(workload, TIMEOUT, f"workload {name}")
    assert [p["name"] for p in found["spec"]["podSets"]] == ["worker"]

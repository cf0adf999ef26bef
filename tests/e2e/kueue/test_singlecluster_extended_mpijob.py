"""Kueue v0.19.2 test/e2e/singlecluster/extended/mpijob_test.go, ported case by case (the
mpi-operator played by tests/e2e/kueue/operators.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.operators import (
    MPIJOB,
    Operators,
    create,
    get,
    install_operators_crds,
    operators,
    queues,
    stop_cluster_queue,
    workload_of,
)
from tests.e2e.kueue.util import (
    AGNHOST,
    BEHAVIOR_EXIT_FAST,
    LONG_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    eventually,
    expect_workload_to_finish,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/extended/mpijob_test.go"


@pytest.fixture(scope="module", autouse=True)
def crds(tower: Tower) -> None:
    install_operators_crds(tower)


@pytest.fixture
def played(cluster: Cluster, ns: str) -> Iterator[Operators]:
    with operators(cluster, ns) as running:
        yield running


def make_mpijob(name: str, ns: str, launcher_cpu: str, worker_cpu: str) -> dict:
    """testingmpijob.MakeMPIJob(name, ns).Queue("main").MPIJobReplicaSpecs(a Launcher and a
    Worker, one each, agnhost exiting fast).RequestAndLimit(...)."""

    def replica(cpu: str) -> dict:
        resources = {"cpu": cpu}
        return {"replicas": 1, "template": {"spec": {
            "restartPolicy": "Never", "nodeSelector": {},
            "containers": [{"name": "mpijob", "image": AGNHOST, "args": BEHAVIOR_EXIT_FAST,
                            "resources": {"requests": resources, "limits": resources}}]}}}  # fmt: skip

    return {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": {"runPolicy": {"suspend": True},
                     "mpiReplicaSpecs": {"Launcher": replica(launcher_cpu),
                                         "Worker": replica(worker_cpu)}}}  # fmt: skip


@kueue_case(GO, "MPIJob Creating a MPIJob Should run a MPIJob if admitted")
def test_an_mpijob_runs_once_admitted(cluster: Cluster, ns: str, played: Operators) -> None:
    with queues(cluster, ns, {f"default-{ns}": None}, {"cpu": "2", "memory": "2G"},
                cluster_queue=f"cluster-queue-{ns}", kinds=(MPIJOB,)):  # fmt: skip
        job = create(cluster, MPIJOB, ns, make_mpijob("mpijob", ns, "500m", "100m"))
        expect_workload_to_finish(cluster, workload_of("MPIJob", "kubeflow.org", job), ns,
                                  LONG_TIMEOUT)  # fmt: skip


@kueue_case(GO, "MPIJob Using resource flavors with node selectors Should allow to suspend a "
                "MPIJob when the ClusterQueue is stopped with the HoldAndDrain policy")  # fmt: skip
def test_an_mpijob_is_suspended_when_its_cluster_queue_holds_and_drains(
    cluster: Cluster, ns: str, played: Operators
) -> None:
    flavors = {f"on-demand-{ns}": {"instance-type": "on-demand"},
               f"spot-{ns}": {"instance-type": "spot"}}  # fmt: skip
    cq = f"cluster-queue-{ns}"
    with queues(cluster, ns, flavors, {"cpu": "1", "memory": "1Gi"}, cluster_queue=cq,
                preemption=True, kinds=(MPIJOB,)):  # fmt: skip
        create(cluster, MPIJOB, ns, make_mpijob("mpijob-suspend", ns, "100m", "100m"))

        def unsuspended() -> dict:
            job = get(cluster, MPIJOB, ns, "mpijob-suspend")
            assert job["spec"]["runPolicy"].get("suspend") is False, "still suspended"
            return job

        job = eventually(unsuspended, TIMEOUT, "the mpiJob to be unsuspended")
        launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
        assert launcher.get("nodeSelector") == {"instance-type": "on-demand"}

        stop_cluster_queue(cluster, cq)

        def suspended() -> bool:
            job = get(cluster, MPIJOB, ns, "mpijob-suspend")
            assert job["spec"]["runPolicy"].get("suspend") is True, "not suspended"
            return True

        eventually(suspended, TIMEOUT, "the mpiJob to be suspended")

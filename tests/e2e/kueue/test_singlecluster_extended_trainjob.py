"""Kueue v0.19.2 test/e2e/singlecluster/extended/trainjob_test.go, ported case by case
(Kubeflow Trainer and the JobSet controller played by tests/e2e/kueue/operators.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from extender.core.jobframework.trainer import MANAGER
from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.operators import (
    JOBSET,
    TRAINJOB,
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
    BEHAVIOR_WAIT_FOR_DELETION,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    eventually,
    expect_workload_to_finish,
    is_admitted,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/extended/trainjob_test.go"


@pytest.fixture(scope="module", autouse=True)
def crds(tower: Tower) -> None:
    install_operators_crds(tower)


@pytest.fixture
def played(cluster: Cluster, ns: str) -> Iterator[Operators]:
    with operators(cluster, ns) as running:
        yield running


def make_trainjob(ns: str, args: list[str]) -> dict:
    """testingtrainjob.MakeTrainJob("trainjob-test", ns).RuntimeRefName("torch-distributed")
    .Queue("main").TrainerImage(agnhost, ["/agnhost"], args).TrainerRequest(cpu 500m,
    memory 200Mi)."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "trainjob-test", "namespace": ns,
                         "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": {"suspend": True, "runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"image": AGNHOST, "command": ["/agnhost"], "args": args,
                                 "resourcesPerNode": {"requests": {"cpu": "500m",
                                                                   "memory": "200Mi"}}}}}  # fmt: skip


def admitted_and_unsuspended(cluster: Cluster, ns: str, trainjob: dict) -> dict:
    """The case's 'Ensuring that a workload is created and the job admitted' and 'Waiting for
    the trainjob to be unsuspended'."""
    name = workload_of("TrainJob", "trainer.kubeflow.org", trainjob)

    def admitted() -> bool:
        wl = cluster.workload(name, ns)
        assert wl is not None, f"workload {name} not found"
        assert is_admitted(wl), "not admitted"
        return True

    eventually(admitted, MEDIUM_TIMEOUT, "the workload admitted")

    def unsuspended() -> dict:
        job = get(cluster, TRAINJOB, ns, "trainjob-test")
        assert job["spec"].get("suspend") is False, "the trainjob is still suspended"
        return job

    return eventually(unsuspended, TIMEOUT, "the trainjob to be unsuspended")  # type: ignore[no-any-return]


@kueue_case(GO, "TrainJob Creating a TrainJob Should run a TrainJob if admitted")
def test_a_trainjob_runs_once_admitted(cluster: Cluster, ns: str, played: Operators) -> None:
    with queues(cluster, ns, {f"default-{ns}": None}, {"cpu": "2", "memory": "2G"},
                cluster_queue=f"cluster-queue-{ns}", kinds=(TRAINJOB, JOBSET)):  # fmt: skip
        trainjob = create(cluster, TRAINJOB, ns, make_trainjob(ns, BEHAVIOR_EXIT_FAST))
        admitted_and_unsuspended(cluster, ns, trainjob)

        def complete() -> bool:
            status = get(cluster, TRAINJOB, ns, "trainjob-test").get("status") or {}
            kinds = {c["type"]: c["status"] for c in status.get("conditions") or []}
            assert kinds.get("Complete") == "True", f"trainjob conditions: {kinds}"
            return True

        eventually(complete, LONG_TIMEOUT, "the trainjob complete")
        name = workload_of("TrainJob", "trainer.kubeflow.org", trainjob)
        expect_workload_to_finish(cluster, name, ns, LONG_TIMEOUT)


@kueue_case(GO, "TrainJob Using resource flavors with node selectors Should allow to suspend a "
                "TrainJob when injected nodeSelector")  # fmt: skip
def test_a_trainjob_is_suspended_when_its_cluster_queue_holds_and_drains(
    cluster: Cluster, ns: str, played: Operators
) -> None:
    flavors = {f"on-demand-{ns}": {"instance-type": "on-demand"},
               f"spot-{ns}": {"instance-type": "spot"}}  # fmt: skip
    cq = f"cluster-queue-{ns}"
    with queues(cluster, ns, flavors, {"cpu": "1", "memory": "1Gi"}, cluster_queue=cq,
                preemption=True, kinds=(TRAINJOB, JOBSET)):  # fmt: skip
        trainjob = create(cluster, TRAINJOB, ns, make_trainjob(ns, BEHAVIOR_WAIT_FOR_DELETION))
        running = admitted_and_unsuspended(cluster, ns, trainjob)

        ours = [p for p in running["spec"].get("runtimePatches") or [] if p["manager"] == MANAGER]
        assert ours, f"no runtime patch of {MANAGER}: {running['spec'].get('runtimePatches')}"
        rjobs = ours[0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
        assert len(rjobs) == 1, rjobs
        pod = rjobs[0]["template"]["spec"]["template"]["spec"]
        assert pod.get("nodeSelector") == {"instance-type": "on-demand"}

        stop_cluster_queue(cluster, cq)

        def suspended() -> bool:
            job = get(cluster, TRAINJOB, ns, "trainjob-test")
            assert job["spec"].get("suspend") is True, "the trainjob is not suspended"
            return True

        eventually(suspended, MEDIUM_TIMEOUT, "the TrainJob to be suspended")

"""Kueue v0.19.2 test/e2e/singlecluster/extended/pytorchjob_test.go, ported case by case (the
training-operator played by tests/e2e/kueue/operators.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.operators import (
    PYTORCHJOB,
    Operators,
    create,
    expect_gone,
    expect_replicas_running,
    install_operators_crds,
    operators,
    queues,
    wait_for_active_pods_and_terminate,
    workload_of,
)
from tests.e2e.kueue.util import (
    AGNHOST,
    BEHAVIOR_WAIT_FOR_DELETION,
    LONG_TIMEOUT,
    Cluster,
    Tower,
    eventually,
    expect_workload_to_finish,
    is_admitted,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/extended/pytorchjob_test.go"


@pytest.fixture(scope="module", autouse=True)
def crds(tower: Tower) -> None:
    install_operators_crds(tower)


@pytest.fixture
def played(cluster: Cluster, ns: str) -> Iterator[Operators]:
    with operators(cluster, ns) as running:
        yield running


@kueue_case(GO, "PyTorch integration PyTorch created should admit group with leader only")
def test_a_pytorchjob_with_only_a_master_is_admitted_and_finishes(
    cluster: Cluster, ns: str, played: Operators
) -> None:
    lq = f"pytorch-lq-{ns}"
    with queues(cluster, ns, {f"pytorch-rf-{ns}": None}, {"cpu": "5", "memory": "10Gi"},
                cluster_queue=f"pytorch-cq-{ns}", local_queue=lq, preemption=True,
                kinds=(PYTORCHJOB,)):  # fmt: skip
        # MakePyTorchJob(...).Queue(lq).Suspend(false).PyTorchReplicaSpecsOnlyMasterDefault()
        # .Image(Master, agnhost, waiting for deletion).Request(cpu 1, memory 200Mi)
        # .TerminationGracePeriod(Master, 1)
        master = {"replicas": 1, "template": {"spec": {
            "restartPolicy": "Never", "nodeSelector": {}, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "pytorch", "image": AGNHOST, "command": [],
                            "args": BEHAVIOR_WAIT_FOR_DELETION,
                            "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}}}  # fmt: skip
        job = create(cluster, PYTORCHJOB, ns, {
            "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "pytorch-simple", "namespace": ns, "annotations": {},
                         "labels": {"kueue.x-k8s.io/queue-name": lq}},
            "spec": {"runPolicy": {"suspend": False},
                     "pytorchReplicaSpecs": {"Master": master}}})  # fmt: skip

        expect_replicas_running(cluster, PYTORCHJOB, ns, "pytorch-simple", "Master", 1)
        name = workload_of("PyTorchJob", "kubeflow.org", job)
        assert cluster.workload(name, ns) is not None, f"workload {name} not found"
        eventually(lambda: is_admitted(cluster.workload(name, ns)), 10, "the workload admitted")

        wait_for_active_pods_and_terminate(cluster, ns, 1)
        expect_workload_to_finish(cluster, name, ns, LONG_TIMEOUT)

        expect_gone(cluster, PYTORCHJOB, ns, "pytorch-simple")
        eventually(lambda: cluster.workload(name, ns) is None, 45, "the workload deleted")

"""Kueue v0.19.2 test/e2e/singlecluster/extended/jaxjob_test.go, ported case by case (the
training-operator played by tests/e2e/kueue/operators.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.operators import (
    JAXJOB,
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
GO = "singlecluster/extended/jaxjob_test.go"


@pytest.fixture(scope="module", autouse=True)
def crds(tower: Tower) -> None:
    install_operators_crds(tower)


@pytest.fixture
def played(cluster: Cluster, ns: str) -> Iterator[Operators]:
    with operators(cluster, ns) as running:
        yield running


@kueue_case(GO, "JAX integration JAX created should admit group with leader only")
def test_a_jaxjob_of_two_workers_is_admitted_and_finishes(
    cluster: Cluster, ns: str, played: Operators
) -> None:
    lq = f"jax-lq-{ns}"
    with queues(cluster, ns, {f"jax-rf-{ns}": None}, {"cpu": "5", "memory": "10Gi"},
                cluster_queue=f"jax-cq-{ns}", local_queue=lq, preemption=True,
                kinds=(JAXJOB,)):  # fmt: skip
        # MakeJAXJob(...).Label(queue-name, lq).Suspend(false).JAXReplicaSpecsDefault()
        # .TerminationGracePeriod(Worker, 1).Parallelism(Worker, 2).Image(Worker, agnhost,
        # waiting for deletion).Request(Worker, cpu 1, memory 200Mi)
        worker = {"replicas": 2, "template": {"spec": {
            "restartPolicy": "Never", "nodeSelector": {}, "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "jax", "image": AGNHOST, "command": [],
                            "args": BEHAVIOR_WAIT_FOR_DELETION,
                            "resources": {"requests": {"cpu": "1", "memory": "200Mi"}}}]}}}  # fmt: skip
        job = create(cluster, JAXJOB, ns, {
            "apiVersion": "kubeflow.org/v1", "kind": "JAXJob",
            "metadata": {"name": "jax-simple", "namespace": ns,
                         "labels": {"kueue.x-k8s.io/queue-name": lq}},
            "spec": {"runPolicy": {"suspend": False}, "jaxReplicaSpecs": {"Worker": worker}}})  # fmt: skip

        expect_replicas_running(cluster, JAXJOB, ns, "jax-simple", "Worker", 2)
        name = workload_of("JAXJob", "kubeflow.org", job)
        assert cluster.workload(name, ns) is not None, f"workload {name} not found"
        eventually(lambda: is_admitted(cluster.workload(name, ns)), 10, "the workload admitted")

        wait_for_active_pods_and_terminate(cluster, ns, 2)
        expect_workload_to_finish(cluster, name, ns, LONG_TIMEOUT)

        expect_gone(cluster, JAXJOB, ns, "jax-simple")
        eventually(lambda: cluster.workload(name, ns) is None, 45, "the workload deleted")

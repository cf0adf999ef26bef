"""Kueue v0.19.2 test/e2e/singlecluster/extended/jobset_test.go, ported case by case (the
JobSet controller played by tests/e2e/kueue/operators.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.operators import (
    JOBSET,
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
GO = "singlecluster/extended/jobset_test.go"


@pytest.fixture(scope="module", autouse=True)
def crds(tower: Tower) -> None:
    install_operators_crds(tower)


@pytest.fixture
def played(cluster: Cluster, ns: str) -> Iterator[Operators]:
    with operators(cluster, ns) as running:
        yield running


def make_jobset(name: str, ns: str, replicas: int, pods: int) -> dict:
    """testingjobset.MakeJobSet(name, ns).Queue("main").ReplicatedJobs({replicated-job-1,
    agnhost exiting fast, replicas, parallelism = completions = pods})
    .RequestAndLimit(cpu 500m, memory 200M)."""
    resources = {"cpu": "500m", "memory": "200M"}
    container = {"name": "c", "image": AGNHOST, "args": BEHAVIOR_EXIT_FAST,
                 "resources": {"requests": resources, "limits": resources}}  # fmt: skip
    job = {"spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                    "template": {"spec": {"restartPolicy": "Never",
                                          "terminationGracePeriodSeconds": 0,
                                          "containers": [container]}}}}  # fmt: skip
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": {"suspend": True, "replicatedJobs": [
                {"name": "replicated-job-1", "replicas": replicas, "template": job}]}}  # fmt: skip


@kueue_case(GO, "JobSet Creating a JobSet Should run a jobSet if admitted")
def test_a_jobset_runs_once_admitted(cluster: Cluster, ns: str, played: Operators) -> None:
    with queues(cluster, ns, {f"default-{ns}": None}, {"cpu": "2", "memory": "2G"},
                cluster_queue=f"cluster-queue-{ns}", kinds=(JOBSET,)):  # fmt: skip
        jobset = create(cluster, JOBSET, ns, make_jobset("job-set", ns, replicas=2, pods=2))
        name = workload_of("JobSet", "jobset.x-k8s.io", jobset)
        expect_workload_to_finish(cluster, name, ns, LONG_TIMEOUT)


@kueue_case(GO, "JobSet Using resource flavors with node selectors Should allow to suspend a "
                "JobSet when injected nodeSelector")  # fmt: skip
def test_a_jobset_is_suspended_when_its_cluster_queue_holds_and_drains(
    cluster: Cluster, ns: str, played: Operators
) -> None:
    flavors = {f"on-demand-{ns}": {"instance-type": "on-demand"},
               f"spot-{ns}": {"instance-type": "spot"}}  # fmt: skip
    cq = f"cluster-queue-{ns}"
    with queues(cluster, ns, flavors, {"cpu": "1", "memory": "1Gi"}, cluster_queue=cq,
                preemption=True, kinds=(JOBSET,)):  # fmt: skip
        create(cluster, JOBSET, ns, make_jobset("job-set-suspend", ns, replicas=1, pods=1))

        def unsuspended() -> dict:
            js = get(cluster, JOBSET, ns, "job-set-suspend")
            assert js["spec"].get("suspend") is False, "the jobSet is still suspended"
            return js

        js = eventually(unsuspended, TIMEOUT, "the jobSet to be unsuspended")
        pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert pod.get("nodeSelector") == {"instance-type": "on-demand"}

        stop_cluster_queue(cluster, cq)

        def suspended() -> bool:
            js = get(cluster, JOBSET, ns, "job-set-suspend")
            assert js["spec"].get("suspend") is True, "the jobSet is not suspended"
            return True

        eventually(suspended, TIMEOUT, "the jobSet to be suspended")

"""Kueue v0.19.2 test/e2e/singlecluster/extended/appwrapper_test.go, ported case by case (the
AppWrapper controller played by tests/e2e/kueue/operators.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.operators import (
    APPWRAPPER,
    create,
    expect_gone,
    get,
    install_operators_crds,
    operators,
    queues,
    workload_of,
)
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    TIMEOUT,
    Cluster,
    Tower,
    eventually,
    is_admitted,
    make_deployment,
    make_job,
)

pytestmark = pytest.mark.e2e
GO = "singlecluster/extended/appwrapper_test.go"


@pytest.fixture(scope="module", autouse=True)
def crds(tower: Tower) -> None:
    install_operators_crds(tower)


@pytest.fixture
def appwrapper_queue(cluster: Cluster, ns: str) -> Iterator[str]:
    """The Describe's BeforeEach: a flavor of on-demand nodes, 5 cpu, preemption within the
    ClusterQueue of lower priority; yields the LocalQueue's name."""
    lq = f"appwrapper-lq-{ns}"
    with (
        queues(cluster, ns, {f"appwrapper-rf-{ns}": {"instance-type": "on-demand"}}, {"cpu": "5"},
               cluster_queue=f"appwrapper-cq-{ns}", local_queue=lq, preemption=True,
               kinds=(APPWRAPPER,)),
        operators(cluster, ns),
    ):  # fmt: skip
        yield lq


def make_appwrapper(name: str, ns: str, queue: str, component: dict) -> dict:
    """awtesting.MakeAppWrapper(name, ns).Component(component).Queue(queue): suspended."""
    return {"apiVersion": "workload.codeflare.dev/v1beta2", "kind": "AppWrapper",
            "metadata": {"name": name, "namespace": ns, "annotations": {},
                         "labels": {"kueue.x-k8s.io/queue-name": queue}},
            "spec": {"suspend": True, "components": [component]}}  # fmt: skip


def unsuspended(cluster: Cluster, ns: str, name: str) -> bool:
    aw = get(cluster, APPWRAPPER, ns, name)
    assert aw["spec"].get("suspend") is False, "the appwrapper is still suspended"
    return True


@kueue_case(GO, "AppWrapper Should admit Workload for Job")
def test_an_appwrapped_job_is_admitted_and_succeeds(
    cluster: Cluster, ns: str, appwrapper_queue: str
) -> None:
    job = make_job("job-0", ns, args=BEHAVIOR_EXIT_FAST, requests={"cpu": "200m"},
                   parallelism=2, completions=2)  # fmt: skip
    job["spec"]["suspend"] = False
    create(cluster, APPWRAPPER, ns, make_appwrapper("appwrapper", ns, appwrapper_queue,
                                                    {"template": job}))  # fmt: skip

    eventually(lambda: unsuspended(cluster, ns, "appwrapper"), TIMEOUT, "the appwrapper started")

    def succeeded() -> bool:
        phase = (get(cluster, APPWRAPPER, ns, "appwrapper").get("status") or {}).get("phase")
        assert phase == "Succeeded", f"phase {phase}"
        return True

    eventually(succeeded, LONG_TIMEOUT, "the wrapped Job to complete")
    expect_gone(cluster, APPWRAPPER, ns, "appwrapper")


@kueue_case(GO, "AppWrapper Should admit Workload for Deployment Pods")
def test_an_appwrapped_deployment_is_admitted_as_one_workload(
    cluster: Cluster, ns: str, appwrapper_queue: str
) -> None:
    deployment = make_deployment("deployment", ns, replicas=3, cpu="200m", grace=1)
    component = {"template": deployment,
                 "podSets": [{"replicas": 3, "path": "template.spec.template"}]}  # fmt: skip
    aw = create(cluster, APPWRAPPER, ns, make_appwrapper("aw", ns, appwrapper_queue, component))

    eventually(lambda: unsuspended(cluster, ns, "aw"), MEDIUM_TIMEOUT, "the appwrapper started")

    def one_admitted() -> bool:
        workloads = cluster.list("workloads", ns)
        assert len(workloads) == 1, [w["metadata"]["name"] for w in workloads]
        assert workloads[0]["metadata"]["name"] == workload_of(
            "AppWrapper", "workload.codeflare.dev", aw
        )
        assert is_admitted(workloads[0]), "the workload is not admitted"
        return True

    eventually(one_admitted, MEDIUM_TIMEOUT, "one workload, admitted")

    def ready() -> bool:
        listed = cluster.apps.list_namespaced_deployment(ns).items
        assert listed, f"no Deployment yet: {get(cluster, APPWRAPPER, ns, 'aw')}"
        status = listed[0].status
        assert status.ready_replicas == 3, f"ready replicas {status.ready_replicas}"
        return True

    eventually(ready, MEDIUM_TIMEOUT, "the Deployment ready")

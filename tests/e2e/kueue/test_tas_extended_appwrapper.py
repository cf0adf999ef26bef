"""Kueue v0.19.2 test/e2e/tas/extended/appwrapper_test.go, ported case by case.

The AppWrapper controller is played (tas_operators.play_appwrapper): its Job made with the
podSetInfo Tower wrote; the real Job controller makes the pods, Tower lets each through to
its host, the real scheduler binds it to one of the TAS workers (tas_extended.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.tas_extended import (
    BLOCK,
    COMPLETION_INDEX,
    GPU,
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
from tests.e2e.kueue.tas_operators import APPWRAPPER, create, get, play_appwrapper
from tests.e2e.kueue.util import AGNHOST, BEHAVIOR_EXIT_FAST, QUEUE_LABEL, Cluster

pytestmark = pytest.mark.e2e
GO = "tas/extended/appwrapper_test.go"
__all__ = ["kind_workers", "operator_crds"]  # fixtures


@pytest.fixture
def queue(operator_crds: None, cluster: Cluster, ns: str, kind_workers: list[str]) -> Iterator[str]:
    """The BeforeEach: LocalQueue `local-queue` of a ClusterQueue with 1 cpu and 8 gpus."""
    with tas_queues(cluster, ns, "local-queue", {"cpu": "1", GPU: "8"}) as name:
        yield name


def make_job(name: str, pods_: int, requests: dict[str, str], annotations: dict[str, str],
             indexed: bool = False) -> dict[str, Any]:  # fmt: skip
    """utiltestingjob.MakeJob(...).Parallelism/Completions(n).RequestAndLimit(...)
    .Suspend(false).Image(agnhost, BehaviorExitFast).PodAnnotation(...).SetTypeMeta()."""
    spec: dict[str, Any] = {
        "parallelism": pods_,
        "completions": pods_,
        "suspend": False,
        "template": {
            "metadata": {"annotations": annotations},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "c", "image": AGNHOST, "args": BEHAVIOR_EXIT_FAST,
                "resources": {"requests": requests, "limits": requests}}]},
        },
    }  # fmt: skip
    if indexed:
        spec["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def make_appwrapper(name: str, ns: str, queue: str, job: dict[str, Any]) -> dict[str, Any]:
    """awtesting.MakeAppWrapper(name, ns).Component({Template: job}).Queue(queue)."""
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {"suspend": True, "components": [{"template": job}]},
    }


@kueue_case(GO, "TopologyAwareScheduling for AppWrapper Creating an AppWrapper Should place pods")
def test_places_pods(cluster: Cluster, ns: str, queue: str) -> None:
    job = make_job("job-0", 4, {"cpu": "200m", GPU: "1"}, {PREFERRED: RACK})
    create(cluster, APPWRAPPER, make_appwrapper("appwrapper", ns, queue, job))
    play_appwrapper(cluster, "appwrapper", ns)  # "AppWrapper is unsuspended", then its Job
    expect_pods_created(cluster, ns, 4)
    expect_pods_scheduled(cluster, ns, 4)


@kueue_case(GO, "TopologyAwareScheduling for AppWrapper Creating an AppWrapper Should place pods based on the ranks-ordering")  # fmt: skip
def test_places_pods_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    job = make_job("ranks-job", 4, {GPU: "1"}, {REQUIRED: BLOCK}, indexed=True)
    create(cluster, APPWRAPPER, make_appwrapper("aw-ranks-job", ns, queue, job))
    play_appwrapper(cluster, "aw-ranks-job", ns)
    assert get(cluster, APPWRAPPER, "aw-ranks-job", ns)["status"]["phase"] == "Running"
    expect_pods_scheduled(cluster, ns, 4)
    got = {p.metadata.labels[COMPLETION_INDEX]: p.spec.node_name for p in pods(cluster, ns)}
    assert got == {"0": "kind-worker", "1": "kind-worker2", "2": "kind-worker3",
                   "3": "kind-worker4"}  # fmt: skip

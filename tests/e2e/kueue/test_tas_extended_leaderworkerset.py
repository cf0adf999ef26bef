"""Kueue v0.19.2 test/e2e/tas/extended/leaderworkerset_test.go, ported case by case.

The LeaderWorkerSet controller is played (tas_operators.play_leaderworkerset): each group's
leader and workers made from the templates as Tower's webhook marked them, labelled with their
group and worker index; Tower stamps each with its group, admits the group's Workload and lets
each pod through to its host, the real scheduler binds it to one of the TAS workers
(tas_extended.py), and the LeaderWorkerSet's status is written once its pods are ready."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.tas_extended import (
    BLOCK,
    GPU,
    GROUP_NAME,
    POD_INDEX_OFFSET,
    PODSET_LABEL,
    REQUIRED,
    expect_pods_scheduled,
    kind_workers,
    operator_crds,
    pods,
    tas_queues,
)
from tests.e2e.kueue.tas_operators import (
    GROUP_INDEX,
    LWS,
    WORKER_INDEX,
    create,
    expect_leaderworkerset_ready,
    get,
    play_leaderworkerset,
)
from tests.e2e.kueue.util import (
    AGNHOST,
    BEHAVIOR_WAIT_FOR_DELETION,
    QUEUE_LABEL,
    TIMEOUT,
    Cluster,
    eventually,
)

pytestmark = pytest.mark.e2e
GO = "tas/extended/leaderworkerset_test.go"
__all__ = ["kind_workers", "operator_crds"]  # fixtures


@pytest.fixture
def queue(operator_crds: None, cluster: Cluster, ns: str, kind_workers: list[str]) -> Iterator[str]:
    """The BeforeEach: LocalQueue `test-queue` of a ClusterQueue with 8 gpus and 2 cpus."""
    with tas_queues(cluster, ns, "test-queue", {GPU: "8", "cpu": "2"}) as name:
        yield name


def template(requests: dict[str, str], group: bool = False) -> dict[str, Any]:
    """A pod template of the case: agnhost waiting for its deletion, block required."""
    annotations = {REQUIRED: BLOCK, **({GROUP_NAME: "same-group"} if group else {})}
    container = {"name": "c", "image": AGNHOST, "args": BEHAVIOR_WAIT_FOR_DELETION,
                 "resources": {"requests": requests, "limits": requests}}  # fmt: skip
    return {
        "metadata": {"annotations": annotations},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [container]},
    }


def make_lws(ns: str, queue: str, replicas: int, size: int, worker: dict[str, Any],
             leader: dict[str, Any] | None = None) -> dict[str, Any]:  # fmt: skip
    """leaderworkersettesting.MakeLeaderWorkerSet("lws", ns).Replicas().Size().Queue()
    .WorkerTemplate().LeaderTemplate().TerminationGracePeriod(1)."""
    spec: dict[str, Any] = {"size": size, "workerTemplate": worker}
    if leader is not None:
        spec["leaderTemplate"] = leader
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws", "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": spec},
    }


def run(cluster: Cluster, ns: str, body: dict[str, Any]) -> None:
    create(cluster, LWS, body)
    play_leaderworkerset(cluster, "lws", ns)
    expect_leaderworkerset_ready(cluster, "lws", ns)  # "Waiting for replicas to be ready"
    replicas, size = body["spec"]["replicas"], body["spec"]["leaderWorkerTemplate"]["size"]
    expect_pods_scheduled(cluster, ns, replicas * size)


def rank_assignments(cluster: Cluster, ns: str, selector: str = "") -> dict[str, str]:
    """ "<group index>/<worker index>" -> its node."""
    return {
        f"{p.metadata.labels[GROUP_INDEX]}/{p.metadata.labels[WORKER_INDEX]}": p.spec.node_name
        for p in pods(cluster, ns, selector)
    }


def template_annotations(cluster: Cluster, ns: str, which: str) -> dict[str, str]:
    lws = get(cluster, LWS, "lws", ns)
    found = lws["spec"]["leaderWorkerTemplate"][which].get("metadata") or {}
    return dict(found.get("annotations") or {})


def one_group_in_each_block(first: dict[str, str], second: dict[str, str]) -> list[dict]:
    """The two answers Kueue's case takes: group 0 in block b1 and group 1 in b2, or the
    other way round."""
    return [{**first, **second}, {**{k.replace("1/", "0/", 1): v for k, v in second.items()},
                                  **{k.replace("0/", "1/", 1): v for k, v in first.items()}}]  # fmt: skip


@kueue_case(GO, "TopologyAwareScheduling for LeaderWorkerSet creating a LeaderWorkerSet should place pods based on the ranks-ordering")  # fmt: skip
def test_places_pods_by_ranks(cluster: Cluster, ns: str, queue: str) -> None:
    run(cluster, ns, make_lws(ns, queue, 2, 3, template({GPU: "1"})))
    assert rank_assignments(cluster, ns) in one_group_in_each_block(
        {"0/0": "kind-worker", "0/1": "kind-worker2", "0/2": "kind-worker3"},
        {"1/0": "kind-worker5", "1/1": "kind-worker6", "1/2": "kind-worker7"},
    )


@kueue_case(GO, "TopologyAwareScheduling for LeaderWorkerSet creating a LeaderWorkerSet with Leader and Workers which doesn't have grouping annotation should place worker pods based on the ranks-ordering")  # fmt: skip
def test_places_workers_beside_an_ungrouped_leader_by_ranks(
    cluster: Cluster, ns: str, queue: str
) -> None:
    body = make_lws(ns, queue, 1, 5, template({GPU: "1"}), template({GPU: "1"}))
    create(cluster, LWS, body)

    def offset_on_workers_only() -> bool:
        assert POD_INDEX_OFFSET not in template_annotations(cluster, ns, "leaderTemplate")
        worker = template_annotations(cluster, ns, "workerTemplate")
        assert worker.get(POD_INDEX_OFFSET) == "1", worker
        return True

    eventually(offset_on_workers_only, TIMEOUT, "pod-index-offset on the worker template only")
    play_leaderworkerset(cluster, "lws", ns)
    expect_leaderworkerset_ready(cluster, "lws", ns)
    expect_pods_scheduled(cluster, ns, 5)
    # The ranks hold among the workers only: the leader is not grouped with them.
    got = rank_assignments(cluster, ns, f"{PODSET_LABEL}=worker")
    assert got in [
        {f"0/{i}": f"kind-worker{'' if i == 1 else i}" for i in range(1, 5)},
        {f"0/{i}": f"kind-worker{i + 4}" for i in range(1, 5)},
    ], got


@kueue_case(GO, "TopologyAwareScheduling for LeaderWorkerSet creating a LeaderWorkerSet with leader grouped with workers with the same resource requests should place pods based on the ranks-ordering")  # fmt: skip
def test_places_a_leader_grouped_with_alike_workers_by_ranks(
    cluster: Cluster, ns: str, queue: str
) -> None:
    grouped = template({GPU: "1"}, group=True)
    body = make_lws(ns, queue, 1, 4, grouped, template({GPU: "1"}, group=True))
    create(cluster, LWS, body)

    def no_offset() -> bool:
        for which in ("leaderTemplate", "workerTemplate"):
            annotations = template_annotations(cluster, ns, which)
            assert POD_INDEX_OFFSET not in annotations, (which, annotations)
        # (the webhook has marked the templates by now: its mark is there)
        assert "kueue.x-k8s.io/pod-suspending-parent" in annotations, annotations
        return True

    eventually(no_offset, TIMEOUT, "no pod-index-offset on either template")
    play_leaderworkerset(cluster, "lws", ns)
    expect_leaderworkerset_ready(cluster, "lws", ns)
    expect_pods_scheduled(cluster, ns, 4)
    assert rank_assignments(cluster, ns) == {
        "0/0": "kind-worker",
        "0/1": "kind-worker2",
        "0/2": "kind-worker3",
        "0/3": "kind-worker4",
    }


@kueue_case(GO, "TopologyAwareScheduling for LeaderWorkerSet creating a LeaderWorkerSet with leader grouped with workers with the different resource requests should place pods based on the ranks-ordering")  # fmt: skip
def test_places_a_leader_grouped_with_unlike_workers_by_ranks(
    cluster: Cluster, ns: str, queue: str
) -> None:
    worker = template({"cpu": "200m", GPU: "1"}, group=True)
    leader = template({"cpu": "200m"}, group=True)
    run(cluster, ns, make_lws(ns, queue, 2, 4, worker, leader))
    assert rank_assignments(cluster, ns) in one_group_in_each_block(
        {"0/0": "kind-worker", "0/1": "kind-worker", "0/2": "kind-worker2",
         "0/3": "kind-worker3"},
        {"1/0": "kind-worker5", "1/1": "kind-worker5", "1/2": "kind-worker6",
         "1/3": "kind-worker7"},
    )  # fmt: skip

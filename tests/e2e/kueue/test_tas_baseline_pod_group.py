"""Kueue v0.19.2 test/e2e/tas/baseline/pod_group_test.go, ported case by case.

The eight kind workers of Kueue's TAS cluster are stand-in Nodes (tests/e2e/kueue/tas.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.tas import (
    BLOCK,
    EXTRA_RESOURCE,
    POD_GROUP_INDEX,
    REQUIRED,
    expect_scheduled,
    kind_workers,  # noqa: F401 (the module's nodes, by usefixtures)
    pods_by_index,
    tas_queues,
)
from tests.e2e.kueue.util import (
    BEHAVIOR_EXIT_FAST,
    BEHAVIOR_WAIT_FOR_DELETION,
    MEDIUM_TIMEOUT,
    POD_GROUP_LABEL,
    POD_GROUP_TOTAL,
    Cluster,
    eventually,
    make_pod,
)

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("kind_workers")]
GO = "tas/baseline/pod_group_test.go"
DESCRIBE = "TopologyAwareScheduling for Pod group "
GPU = {EXTRA_RESOURCE: "1"}
NUM_PODS = 4


@pytest.fixture
def tas_queue(cluster: Cluster, ns: str) -> Iterator[str]:
    with tas_queues(cluster, ns, {EXTRA_RESOURCE: "8"}, "test-queue") as cq:
        yield cq


@pytest.fixture
def plain_queue(cluster: Cluster, ns: str) -> Iterator[str]:
    """`Creating a Pod group which is not using TAS`: the flavor has no topology."""
    quotas = {EXTRA_RESOURCE: "8"}
    with tas_queues(cluster, ns, quotas, "test-queue", topology=False) as cq:
        yield cq


def indexed_group(ns: str, args: list[str], annotations: dict[str, str]) -> list[dict]:
    """testingpod.MakePod("test-pod").Queue("test-queue").RequestAndLimit(gpu, 1)
    .Image(agnhost, args)...MakeIndexedGroup(4): pods test-pod-<i>, group `test-pod`, with
    the group's size and each pod's index."""
    group = []
    for i in range(NUM_PODS):
        pod = make_pod(f"test-pod-{i}", ns, queue="test-queue", args=args, grace=1)
        pod["spec"]["containers"][0]["resources"] = {"requests": dict(GPU), "limits": dict(GPU)}
        pod["metadata"]["labels"] |= {POD_GROUP_LABEL: "test-pod", POD_GROUP_INDEX: str(i)}
        pod["metadata"]["annotations"] |= {POD_GROUP_TOTAL: str(NUM_PODS), **annotations}
        group.append(pod)
    return group


def _create_all(cluster: Cluster, ns: str, group: list[dict]) -> None:
    for pod in group:
        cluster.core.create_namespaced_pod(ns, pod)

    def created() -> bool:
        pods = cluster.core.list_namespaced_pod(ns).items
        assert len(pods) == NUM_PODS, [p.metadata.name for p in pods]
        return True

    eventually(created, MEDIUM_TIMEOUT, "all pods created")


@kueue_case(GO, DESCRIBE + "Creating a Pod group Should place pods based on the ranks-ordering")
def test_ranks_ordering(cluster: Cluster, ns: str, tas_queue: str) -> None:
    _create_all(cluster, ns, indexed_group(ns, BEHAVIOR_EXIT_FAST, {REQUIRED: BLOCK}))
    expect_scheduled(cluster, ns, NUM_PODS)
    got = pods_by_index(cluster, ns, f"{POD_GROUP_LABEL}=test-pod", POD_GROUP_INDEX)
    assert got == {"0": "kind-worker", "1": "kind-worker2", "2": "kind-worker3",
                   "3": "kind-worker4"}  # fmt: skip


@kueue_case(
    GO, DESCRIBE + "Creating a Pod group Should schedule Pods without explicit TAS annotation"
)
def test_without_tas_annotation(cluster: Cluster, ns: str, tas_queue: str) -> None:
    _create_all(cluster, ns, indexed_group(ns, BEHAVIOR_WAIT_FOR_DELETION, {}))
    pods = expect_scheduled(cluster, ns, NUM_PODS)
    assert sorted(p.spec.node_name for p in pods) == [
        "kind-worker", "kind-worker2", "kind-worker3", "kind-worker4"
    ]  # fmt: skip


@kueue_case(
    GO, DESCRIBE + "Creating a Pod group which is not using TAS Should let the Job scheduled"
)
def test_group_not_using_tas(cluster: Cluster, ns: str, plain_queue: str) -> None:
    _create_all(cluster, ns, indexed_group(ns, BEHAVIOR_WAIT_FOR_DELETION, {}))
    expect_scheduled(cluster, ns, NUM_PODS)

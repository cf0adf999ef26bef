"""Kueue v0.19.2 test/e2e/tas/baseline/statefulset_test.go, ported case by case.

The eight kind workers of Kueue's TAS cluster are stand-in Nodes (tests/e2e/kueue/tas.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.kueue.cases import kueue_case
from tests.e2e.kueue.tas import (
    BLOCK,
    EXTRA_RESOURCE,
    REQUIRED,
    STATEFULSET_INDEX,
    expect_scheduled,
    kind_workers,  # noqa: F401 (the module's nodes, by usefixtures)
    pods_by_index,
    tas_queues,
)
from tests.e2e.kueue.util import MEDIUM_TIMEOUT, Cluster, eventually, make_stateful_set

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("kind_workers")]
GO = "tas/baseline/statefulset_test.go"
REPLICAS = 3


@pytest.fixture
def queue(cluster: Cluster, ns: str) -> Iterator[str]:
    with tas_queues(cluster, ns, {EXTRA_RESOURCE: "8"}, "test-queue") as cq:
        yield cq


@kueue_case(
    GO,
    "TopologyAwareScheduling for StatefulSet Creating a StatefulSet Should place pods based on "
    "the ranks-ordering",
)
def test_ranks_ordering(cluster: Cluster, ns: str, queue: str) -> None:
    sts = make_stateful_set("sts", ns, queue="test-queue", replicas=REPLICAS)
    template = sts["spec"]["template"]
    gpu = {EXTRA_RESOURCE: "1"}
    template["spec"]["containers"][0]["resources"] = {"requests": gpu, "limits": dict(gpu)}
    template["metadata"]["annotations"] = {REQUIRED: BLOCK}
    cluster.apps.create_namespaced_stateful_set(ns, sts)

    def ready() -> bool:
        status = cluster.apps.read_namespaced_stateful_set("sts", ns).status
        assert status.ready_replicas == REPLICAS, status.ready_replicas
        return True

    eventually(ready, MEDIUM_TIMEOUT, "replicas ready")
    expect_scheduled(cluster, ns, REPLICAS)
    got = pods_by_index(cluster, ns, "app=sts-pod", STATEFULSET_INDEX)
    assert got == {"0": "kind-worker", "1": "kind-worker2", "2": "kind-worker3"}

"""A LeaderWorkerSet's group Workloads as Kueue v0.19.2's reconciler keeps them
(leaderworkerset_reconciler.go filterWorkloads): one per group up to spec.replicas, and during
a rolling update with maxSurge, one per surge group too (status.replicas counts them)."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.jobframework.adapter import workload_name
from extender.core.jobframework.registry import PARENTS

LWS = PARENTS["leaderworkerset.x-k8s.io/leaderworkerset"]


def lws(
    replicas: int = 4,
    status: dict[str, Any] | None = None,
    max_surge: int | str | None = 2,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "replicas": replicas,
        "leaderWorkerTemplate": {
            "size": 1,
            "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
    }
    if max_surge is not None:
        spec["rolloutStrategy"] = {
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxUnavailable": 2, "maxSurge": max_surge},
        }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "ns", "uid": "lws-uid"},
        "spec": spec,
        "status": status or {},
    }


def groups(n: int) -> tuple[str, ...]:
    return tuple(
        workload_name("LeaderWorkerSet", "leaderworkerset.x-k8s.io", f"serve-{i}", "lws-uid")
        for i in range(n)
    )


@pytest.mark.parametrize(
    ("obj", "count"),
    [
        # a rollout under way: the leader StatefulSet runs 6 groups, 2 of them surge
        (lws(status={"replicas": 6, "updatedReplicas": 1}), 6),
        # the rollout is done (all updated): the surge groups go
        (lws(status={"replicas": 6, "updatedReplicas": 4}), 4),
        # no surge allowed: status.replicas above spec is a scale-down in progress
        (lws(status={"replicas": 6, "updatedReplicas": 1}, max_surge=None), 4),
        (lws(status={"replicas": 6, "updatedReplicas": 1}, max_surge=0), 4),
        # Kueue reads maxSurge as an int (IntValue): a percentage counts as none
        (lws(status={"replicas": 6, "updatedReplicas": 1}, max_surge="50%"), 4),
        (lws(status={"replicas": 6, "updatedReplicas": 1}, max_surge="2"), 6),
        # scaling down with surge allowed: fewer groups than spec are never dropped below it
        (lws(replicas=2, status={"replicas": 1, "updatedReplicas": 0}), 2),
    ],
)
def test_a_rollout_with_surge_has_a_workload_for_each_surge_group(obj, count):
    assert LWS.workload_names(obj) == groups(count)
    surge = groups(count)[-1]
    [main] = LWS.group_pod_sets(obj, surge) or []
    assert (main.name, main.count) == ("main", 1)

"""A ClusterQueue's status.fairSharing.weightedShare, as Kueue writes it with fair sharing on
(Kueue's e2e fair_sharing_test.go, on the API double): three ClusterQueues of 9 cpu and 36G in
one cohort; four Jobs of 3 pods x 1 cpu in the first make it borrow 3 cpu of the 18 the others
lend, a share of 112; the others, borrowing nothing, show 0. Without fair sharing there is no
such field, as in Kueue."""

from __future__ import annotations

from typing import Any

from extender.kube.api.resources import JOBS
from tests.controller.conftest import eventually

KUEUE = "kueue.x-k8s.io/v1beta2"


def queues() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "rf"}}
    ]
    for i in (1, 2, 3):
        quotas = [{"name": "cpu", "nominalQuota": "9"}, {"name": "memory", "nominalQuota": "36G"}]
        objs.append({
            "apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"cq{i}"},
            "spec": {"cohortName": "cohort", "namespaceSelector": {},
                     "resourceGroups": [{"coveredResources": ["cpu", "memory"],
                                         "flavors": [{"name": "rf", "resources": quotas}]}]},
        })  # fmt: skip
        objs.append({"apiVersion": KUEUE, "kind": "LocalQueue",
                     "metadata": {"name": f"lq{i}", "namespace": "default"},
                     "spec": {"clusterQueue": f"cq{i}"}})  # fmt: skip
    return objs


def job(name: str) -> dict[str, Any]:
    resources = {"cpu": "1", "memory": "200Mi"}
    container = {"name": "c", "image": "busybox", "resources": {"requests": resources}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "lq1"},
                         "annotations": {"tower.dev/sim-duration": "600s"}},
            "spec": {"parallelism": 3, "completions": 3,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [container]}}}}  # fmt: skip


def shares(cluster: Any) -> list[tuple[int, Any]]:
    out = []
    for i in (1, 2, 3):
        status = (cluster.get("clusterqueues", f"cq{i}") or {}).get("status") or {}
        fair = status.get("fairSharing")
        out.append((status.get("admittedWorkloads", 0), fair and fair.get("weightedShare")))
    return out


def test_a_borrowing_cluster_queue_shows_its_weighted_share(cluster, start_controller):
    cluster.apply(*queues())
    start_controller(fair_sharing=True)
    for i in range(4):
        cluster.admin.create(JOBS, job(f"j{i + 1}"), "default")
    eventually(
        lambda: shares(cluster) == [(4, 112), (0, 0), (0, 0)], what=f"the shares {shares(cluster)}"
    )


def test_no_weighted_share_without_fair_sharing(cluster, start_controller):
    cluster.apply(*queues())
    start_controller()
    cluster.admin.create(JOBS, job("j1"), "default")
    eventually(lambda: shares(cluster)[0][0] == 1, what="the job admitted")
    assert shares(cluster) == [(1, None), (0, None), (0, None)]

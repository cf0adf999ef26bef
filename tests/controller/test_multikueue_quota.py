"""Kueue's MultiKueueManagerQuotaAutomation on two API doubles: the manager's ClusterQueue of a
MultiKueue check takes its workers' quota once its MultiKueueConfig asks (Kueue's e2e "should
automatically aggregate quotas from active worker ClusterQueues"), and follows a worker's
change; its condition says why it does or does not."""

from __future__ import annotations

from typing import Any

from extender.kube.api import resources as r
from tests.controller.conftest import Cluster, eventually
from tests.controller.test_multikueue import _manager_setup, _start, _worker_setup
from tests.controller.test_multikueue import worker as worker  # the fixture
from tests.controller.workers import name_worker, worker_cluster

GATE = "MultiKueueManagerQuotaAutomation"


def _quota_condition(cluster: Cluster) -> tuple[str, str, str] | None:
    cq = cluster.get("clusterqueues", "cluster-queue") or {}
    for c in (cq.get("status") or {}).get("conditions") or []:
        if c["type"] == GATE:
            return c["status"], c["reason"], c["message"]
    return None


def _quotas(cluster: Cluster) -> dict[str, Any]:
    [group] = cluster.get("clusterqueues", "cluster-queue")["spec"]["resourceGroups"]
    [flavor] = group["flavors"]
    return {q["name"]: q["nominalQuota"] for q in flavor["resources"]}


def _automate(cluster: Cluster) -> None:
    cluster.admin.patch(
        r.MULTIKUEUE_CONFIGS, "multikueue-test", {"spec": {"quotaManagement": "Automated"}}
    )


def test_the_managers_quota_is_the_sum_of_its_workers(cluster, webhook, tmp_path):
    with (
        worker_cluster(tmp_path / "w1", webhook) as one,
        worker_cluster(tmp_path / "w2", webhook) as two,
    ):
        _worker_setup(one, "2")
        _worker_setup(two, "1200m")
        two.admin.patch(r.CLUSTER_QUEUES, "cluster-queue", {"spec": {"resourceGroups": [
            {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
             "resources": [{"name": "cpu", "nominalQuota": "1200m"},
                           {"name": "memory", "nominalQuota": "4G"}]}]}]}})  # fmt: skip
        one.admin.patch(r.CLUSTER_QUEUES, "cluster-queue", {"spec": {"resourceGroups": [
            {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
             "resources": [{"name": "cpu", "nominalQuota": "2"},
                           {"name": "memory", "nominalQuota": "1G"}]}]}]}})  # fmt: skip
        name_worker(cluster, one, "worker1", "worker1-secret")
        name_worker(cluster, two, "worker2", "worker2-secret")
        _manager_setup(cluster, ["worker1", "worker2"])
        running = [_start(cluster, feature_gates={GATE: True})]
        try:
            # Not asked for (Manual, the default): the quota is the manager's own.
            eventually(
                lambda: _quota_condition(cluster)
                == ("False", "NotRequested",
                    "MultiKueue manager quota automation has not been requested."),
                timeout=20,
                what="the condition NotRequested",
            )  # fmt: skip
            assert _quotas(cluster) == {"cpu": 9, "memory": "36Gi"}
            _automate(cluster)
            eventually(
                lambda: _quota_condition(cluster)
                == ("True", "QuotaAutomated",
                    "ClusterQueue quota is automatically managed based on MultiKueue workers."),
                timeout=20,
                what="the condition QuotaAutomated",
            )  # fmt: skip
            eventually(
                lambda: _quotas(cluster) == {"cpu": "3200m", "memory": "5G"},
                timeout=20,
                what="the workers' quotas summed",
            )
            # A worker's quota changes: the manager's follows.
            one.admin.patch(r.CLUSTER_QUEUES, "cluster-queue", {"spec": {"resourceGroups": [
                {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "default-flavor",
                 "resources": [{"name": "cpu", "nominalQuota": "3"},
                               {"name": "memory", "nominalQuota": "1G"}]}]}]}})  # fmt: skip
            eventually(
                lambda: _quotas(cluster) == {"cpu": "4200m", "memory": "5G"},
                timeout=20,
                what="the manager's quota after the worker's change",
            )
            # A resource a worker has that the manager does not cover: refused, as Kueue.
            two.admin.patch(r.CLUSTER_QUEUES, "cluster-queue", {"spec": {"resourceGroups": [
                {"coveredResources": ["cpu", "memory", "example.com/gpu"],
                 "flavors": [{"name": "default-flavor", "resources": [
                     {"name": "cpu", "nominalQuota": "1200m"},
                     {"name": "memory", "nominalQuota": "4G"},
                     {"name": "example.com/gpu", "nominalQuota": "2"}]}]}]}})  # fmt: skip
            eventually(
                lambda: _quota_condition(cluster)
                == ("False", "UnsupportedConfiguration",
                    "manager-side coveredResources is missing resources configured on "
                    "workers: [example.com/gpu]"),
                timeout=20,
                what="the missing resource said",
            )  # fmt: skip
            # The queue status Tower writes keeps the condition beside Active.
            cq = cluster.get("clusterqueues", "cluster-queue")
            types = {c["type"] for c in cq["status"]["conditions"]}
            assert {"Active", GATE} <= types
        finally:
            for item in running:
                item.halt()


def test_without_the_gate_nothing_is_automated(cluster, worker):
    _worker_setup(worker, "2")
    name_worker(cluster, worker, "worker1", "worker1-secret")
    _manager_setup(cluster, ["worker1"])
    _automate(cluster)
    running = [_start(cluster)]
    try:
        eventually(
            lambda: (
                (c := cluster.get("multikueueclusters", "worker1"))
                and any(x["type"] == "Active" and x["status"] == "True"
                        for x in (c.get("status") or {}).get("conditions") or [])
            ),
            timeout=20,
            what="the worker connected",
        )  # fmt: skip
        eventually(
            lambda: any(
                c["type"] == "Active"
                for c in (cluster.get("clusterqueues", "cluster-queue").get("status") or {})
                .get("conditions") or []
            ),
            what="the ClusterQueue's status",
        )  # fmt: skip
        assert _quota_condition(cluster) is None
        assert _quotas(cluster) == {"cpu": 9, "memory": "36Gi"}
    finally:
        for item in running:
            item.halt()

"""Kueue's resources.transformations and excludeResourcePrefixes in the controller: quota is
measured on what the pods ask for after the Configuration's rules, end to end over HTTP."""

from __future__ import annotations

from typing import Any

from extender.core.config.kueue_config import parse
from extender.kube.api.resources import JOBS
from tests.controller.conftest import eventually

CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {
        "excludeResourcePrefixes": ["example.com/ignored"],
        "transformations": [
            {"input": "cpu", "strategy": "Retain", "outputs": {"example.com/credits": "3"}}
        ],
    },
}


def queues() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "default-flavor"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cluster-queue"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "example.com/credits"],
                        "flavors": [
                            {
                                "name": "default-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 8},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                    {"name": "example.com/credits", "nominalQuota": 4},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": "default"},
            "spec": {"clusterQueue": "cluster-queue"},
        },
    ]


def job(name: str) -> dict[str, Any]:
    requests = {"cpu": "1", "memory": "1Gi", "example.com/ignored-device": "1"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {"tower.dev/sim-duration": "600s"},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox:1.36", "resources": {"requests": requests}}
                    ],
                }
            }
        },
    }


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return {}


def test_quota_counts_the_credits_each_cpu_costs_and_not_an_excluded_resource(
    cluster, start_controller
):
    cluster.apply(*queues())
    start_controller(resource_policy=parse(CONFIG).resource_policy)
    # 1 cpu is 3 credits of 4: one Job runs, the other waits for credits, not cpu. Their
    # request for example.com/ignored (which no ClusterQueue covers) is not counted. Created
    # in the same second, which goes first is their uids' order, as in Kueue.
    jobs = [cluster.admin.create(JOBS, job(name), "default") for name in ("first", "second")]

    def started() -> list[str]:
        return [
            j["metadata"]["name"]
            for j in jobs
            if cluster.get("jobs", j["metadata"]["name"], "default")["spec"]["suspend"] is False
        ]

    [running] = eventually(started, what="one Job to start")
    ran, held = (jobs[0], jobs[1]) if running == "first" else (jobs[1], jobs[0])
    wl = cluster.workload_of(ran)
    [assigned] = wl["status"]["admission"]["podSetAssignments"]
    assert assigned["resourceUsage"]["example.com/credits"] == "3"

    def waiting() -> str | None:
        message = condition(cluster.workload_of(held), "QuotaReserved").get("message", "")
        return message if "example.com/credits" in message else None

    message = eventually(waiting, what="the other Job to wait for credits")
    assert "cpu" not in message.split(";")[0]
    assert started() == [running]

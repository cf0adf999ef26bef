"""Kueue's usage-based admission fair sharing, with Kueue's documentation example applied
unchanged, end to end over HTTP: the LocalQueue that used less goes first.

Kueue's page (site/content/en/docs/concepts/admission_fair_sharing.md) says "Workloads from
LocalQueues with lower historical usage get admitted before those from high-usage queues";
its example (site/static/examples/admission-fs/admission-fair-sharing-setup.yaml) is a
StrictFIFO ClusterQueue of 9 cpu with lq-a and lq-b. As Kueue's own e2e test does with it:
lq-a fills the queue, then a Job of each queue waits (lq-a's created first); once room is
made, lq-b's is admitted first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from extender.core.config.kueue_config import parse
from extender.kube.api.resources import JOBS, LOCAL_QUEUES
from tests import yamlc
from tests.controller.conftest import eventually

EXAMPLE = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "kueue-v0.19.2"
    / "examples"
    / "admission-fs"
    / "admission-fair-sharing-setup.yaml"
)
CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "admissionFairSharing": {"usageHalfLifeTime": "60s", "usageSamplingInterval": "1s"},
}


def job(name: str, queue: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": queue},
            "annotations": {"tower.dev/sim-duration": "600s"},
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}
                    ],
                }
            }
        },
    }


def running(cluster: Any, name: str) -> bool:
    found = cluster.get("jobs", name, "default")
    return found is not None and found["spec"]["suspend"] is False


def test_the_local_queue_that_used_less_goes_first(cluster, start_controller):
    cluster.apply(*[d for d in yamlc.safe_load_all(EXAMPLE.read_text()) if d])
    start_controller(admission_fair_sharing=parse(CONFIG).admission_fair_sharing)
    for i in range(3):
        cluster.admin.create(JOBS, job(f"a{i}", "lq-a"), "default")
    eventually(lambda: all(running(cluster, f"a{i}") for i in range(3)), what="lq-a full")

    def consumed(name: str) -> str | None:
        status = (cluster.get("localqueues", name, "default") or {}).get("status") or {}
        afs = (status.get("fairSharing") or {}).get("admissionFairSharingStatus") or {}
        return (afs.get("consumedResources") or {}).get("cpu")

    eventually(lambda: consumed("lq-a"), what="lq-a's usage in its status")
    cluster.admin.create(JOBS, job("a-next", "lq-a"), "default")
    cluster.admin.create(JOBS, job("b-first", "lq-b"), "default")

    def pending(name: str) -> int:
        status = (cluster.get("localqueues", name, "default") or {}).get("status") or {}
        return int(status.get("pendingWorkloads") or 0)

    # Both wait in the controller's queue (not only in the API server) before room is made:
    # what its LocalQueues report, as a user would check with kubectl.
    eventually(lambda: pending("lq-a") == 1 and pending("lq-b") == 1, what="both Jobs pending")
    assert not running(cluster, "a-next")
    assert not running(cluster, "b-first")
    cluster.admin.delete(JOBS, "a0", "default", propagation="Background")
    eventually(lambda: running(cluster, "b-first"), what="lq-b's Job admitted first")
    assert not running(cluster, "a-next")
    lq_a = cluster.admin.get(LOCAL_QUEUES, "lq-a", "default")
    assert lq_a["status"]["fairSharing"]["weightedShare"] == 0
    assert lq_a["status"]["fairSharing"]["admissionFairSharingStatus"]["lastUpdate"]

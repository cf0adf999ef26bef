"""A prebuilt Workload (Kueue's prebuilt-workload-name label) that carries Kueue's finalizer:
adopted by its Job, run, finished, and then free to be deleted, as Kueue leaves it."""

from __future__ import annotations

from extender.kube.api.resources import JOBS, WORKLOADS
from tests.controller.conftest import eventually
from tests.controller.test_preemption import cluster_queue, flavor, local_queue

FINALIZER = "kueue.x-k8s.io/resource-in-use"


def test_a_finished_prebuilt_workload_loses_kueues_finalizer(cluster, start_controller):
    """Kueue's e2e job_test.go "Should run with prebuilt workload" ends with
    ExpectWorkloadsFinalizedOrGone: the user made the Workload with Kueue's finalizer, and a
    finished one that kept it could never be deleted."""
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 4), local_queue("user-queue", "cq"))
    container = {
        "name": "worker",
        "image": "busybox:1.36",
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
    }
    cluster.admin.create(
        WORKLOADS,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": "prebuilt-wl", "namespace": "default", "finalizers": [FINALIZER]},
            "spec": {
                "queueName": "user-queue",
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                    }
                ],
            },
        },
        "default",
    )
    start_controller()
    job = cluster.job(
        "adopting",
        "1",
        duration="0.3s",
        labels={"kueue.x-k8s.io/prebuilt-workload-name": "prebuilt-wl"},
    )

    def workload() -> dict:
        found = cluster.get("workloads", "prebuilt-wl", "default")
        assert found is not None, "the prebuilt workload is gone"
        return found

    eventually(
        lambda: any(
            o["uid"] == job["metadata"]["uid"]
            for o in workload()["metadata"].get("ownerReferences") or []
        ),
        what="the job to adopt the prebuilt workload",
    )
    finished = eventually(
        lambda: (
            any(
                c["type"] == "Finished" and c["status"] == "True"
                for c in (workload().get("status") or {}).get("conditions") or []
            )
            and workload()
        ),
        timeout=20,
        what="the workload to finish",
    )
    assert finished is not None
    eventually(
        lambda: FINALIZER not in (workload()["metadata"].get("finalizers") or []),
        what="Kueue's finalizer removed from the finished workload",
    )
    assert cluster.get(JOBS.plural, "adopting", "default") is not None

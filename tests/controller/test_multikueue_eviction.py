"""MultiKueue eviction on two API doubles: a job evicted on its worker, as the manager's Job
shows it afterwards."""

from __future__ import annotations

from extender.kube.api import resources as r
from tests.controller.conftest import eventually
from tests.controller.test_multikueue import (
    _condition,
    _manager_setup,
    _start,
    _worker_setup,
)
from tests.controller.test_multikueue import routed_webhook as routed_webhook  # the fixture
from tests.controller.test_multikueue import worker as worker  # the fixture
from tests.controller.workers import name_worker


def test_a_job_evicted_on_its_worker_counts_no_pods_here_while_it_waits(
    cluster, worker, routed_webhook
):
    """Kueue's e2e 'Should preempt a running low-priority workload on a worker when a
    high-priority workload is admitted to it by manager': once the worker evicted the copy
    and the manager's Workload is no longer admitted, the manager's Job shows no active pod
    (its worker's were stopped), also while no worker admits it again."""
    _worker_setup(worker, "9")
    name_worker(cluster, worker, "multikueue-test-worker1", "worker1-secret")
    _manager_setup(cluster, ["multikueue-test-worker1"])
    running = [_start(cluster), _start(worker)]
    try:
        job = cluster.job("stopped", "100m", queue="user-queue", duration="600s")
        key = eventually(lambda: cluster.workload_of(job), what="its Workload")["metadata"]["name"]
        eventually(
            lambda: (
                (cluster.get("jobs", "stopped", "default").get("status") or {}).get("active") == 1
            ),
            timeout=20,
            what="the worker's active pod counted on the manager's Job",
        )
        # No room on the worker any more: the Workload dispatched again waits there.
        worker.admin.patch(r.CLUSTER_QUEUES, "cluster-queue", {"spec": {"stopPolicy": "Hold"}})
        worker.admin.patch(r.WORKLOADS, key, {"spec": {"active": False}}, "default")
        eventually(
            lambda: (
                (_condition(cluster.get("workloads", key, "default"), "Admitted") or {}).get(
                    "status"
                )
                == "False"
            ),
            timeout=20,
            what="the manager's Workload no longer admitted",
        )
        eventually(
            lambda: (
                not (cluster.get("jobs", "stopped", "default").get("status") or {}).get("active")
            ),
            timeout=20,
            what="no active pod on the manager's Job",
        )
        wl = cluster.get("workloads", key, "default")
        assert _condition(wl, "Admitted")["status"] == "False"
    finally:
        for item in running:
            item.halt()

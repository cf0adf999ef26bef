"""MultiKueue's orchestrated preemption on three API doubles: a manager and two workers, each with
its own Tower and the MultiKueueOrchestratedPreemption gate on."""

from __future__ import annotations

import time
from typing import Any

from extender.core.scheduling.options import SchedulingOptions
from extender.kube.api import resources as r
from tests.controller.conftest import Cluster, eventually
from tests.controller.test_multikueue import _condition, _manager_setup, _start, _worker_setup
from tests.controller.test_multikueue import routed_webhook as routed_webhook  # the fixture
from tests.controller.workers import name_worker, worker_cluster

GATE = "MultiKueueOrchestratedPreemption"
PRIORITY = "kueue.x-k8s.io/priority-class"


def _priority_classes(cluster: Cluster) -> None:
    for name, value in (("low", 10), ("high", 100)):
        cluster.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                       "metadata": {"name": name}, "value": value})  # fmt: skip


def _preempting_worker(worker: Cluster) -> None:
    """One cpu, and a higher priority may preempt within the ClusterQueue."""
    _worker_setup(worker, "1")
    worker.admin.patch(r.CLUSTER_QUEUES, "cluster-queue", {"spec": {
        "preemption": {"withinClusterQueue": "LowerPriority"}}})  # fmt: skip
    _priority_classes(worker)


def _hold(worker: Cluster, hold: bool) -> None:
    policy = "Hold" if hold else "None"
    worker.admin.patch(r.CLUSTER_QUEUES, "cluster-queue", {"spec": {"stopPolicy": policy}})


def _admitted(wl: dict[str, Any] | None) -> bool:
    return (_condition(wl, "Admitted") or {}).get("status") == "True"


def test_a_high_priority_job_preempts_on_one_worker_only(
    cluster, webhook, routed_webhook, tmp_path
):
    """Kueue's e2e 'MultiKueueOrchestratedPreemption is enabled should not trigger concurrent
    preemptions': each worker runs a low-priority job; a high-priority job that fits on
    either after a preemption evicts on exactly one of them, the other keeps its job."""
    gates = {"feature_gates": {GATE: True},
             "scheduling": SchedulingOptions(orchestrated_preemption=True)}  # fmt: skip
    with (
        worker_cluster(tmp_path / "w1", webhook) as one,
        worker_cluster(tmp_path / "w2", webhook) as two,
    ):
        workers = (one, two)
        for worker in workers:
            _preempting_worker(worker)
        name_worker(cluster, one, "worker1", "worker1-secret")
        name_worker(cluster, two, "worker2", "worker2-secret")
        _manager_setup(cluster, ["worker1", "worker2"])
        _priority_classes(cluster)
        running = [_start(cluster, **gates), _start(one, **gates), _start(two, **gates)]
        try:
            lows = []
            for index, name in enumerate(("low1", "low2")):
                _hold(workers[1 - index], True)  # it runs on this worker only
                job = cluster.job(name, "1", duration="600s", labels={PRIORITY: "low"})
                wl = eventually(lambda j=job: cluster.workload_of(j), what=f"{name}'s Workload")
                key = wl["metadata"]["name"]
                eventually(
                    lambda k=key, w=workers[index]: _admitted(w.get("workloads", k, "default")),
                    timeout=20,
                    what=f"{name} admitted on worker {index + 1}",
                )
                _hold(workers[1 - index], False)
                lows.append(key)
            job = cluster.job("high", "1", duration="600s", labels={PRIORITY: "high"})
            high = eventually(lambda: cluster.workload_of(job), what="high's Workload")
            key = high["metadata"]["name"]

            def admitted_on() -> int | None:
                on = [i for i, w in enumerate(workers) if _admitted(w.get("workloads", key,
                                                                             "default"))]  # fmt: skip
                return on[0] + 1 if len(on) == 1 else None

            where = eventually(admitted_on, timeout=30, what="high admitted on one worker") - 1
            other = 1 - where
            # The other worker's low job was never evicted: the gate of high's copy there
            # stays closed while the first worker preempts.
            for _ in range(30):
                kept = workers[other].get("workloads", lows[other], "default")
                assert _admitted(kept), kept
                assert (_condition(kept, "Evicted") or {}).get("status") != "True", kept
                time.sleep(0.1)
            evicted = workers[where].get("workloads", lows[where], "default")
            assert not _admitted(evicted), evicted
            manager_high = eventually(
                lambda: w if _admitted(w := cluster.get("workloads", key, "default")) else None,
                timeout=20,
                what="high admitted on the manager",
            )
            assert manager_high["status"]["clusterName"] == f"worker{where + 1}"
        finally:
            for item in running:
                item.halt()

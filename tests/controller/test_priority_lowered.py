"""A running job's WorkloadPriorityClass label lowered: what waited behind it preempts it."""

from __future__ import annotations

from extender.kube.api.resources import JOBS
from tests.controller.conftest import eventually
from tests.controller.test_preemption import cluster_queue, flavor, local_queue, priority

LABEL = "kueue.x-k8s.io/priority-class"


def test_a_running_jobs_lowered_priority_lets_the_waiting_job_preempt_it(cluster, start_controller):
    """Kueue's MultiKueue e2e 'Should allow to mutate kueue.x-k8s.io/priority-class (other
    workers)', on one cluster: job-two waits at the same priority as job-one, which runs;
    job-one's label lowered, its admitted Workload takes the low priority and job-two
    preempts it (Kueue requeues the waiting workloads when an admitted one's priority
    changes)."""
    cluster.apply(
        flavor("pool-a"),
        cluster_queue("cq", 1, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue("user-queue", "cq"),
        priority("low", 100),
        priority("high", 300),
    )
    start_controller()
    one = cluster.job("job-one", "1", duration="600s", labels={LABEL: "high"})
    eventually(
        lambda: cluster.get("jobs", "job-one", "default")["spec"]["suspend"] is False,
        what="job-one to start",
    )
    two = cluster.job("job-two", "1", duration="600s", labels={LABEL: "high"})
    eventually(lambda: cluster.workload_of(two), what="job-two's workload")
    cluster.admin.patch(JOBS, "job-one", {"metadata": {"labels": {LABEL: "low"}}}, "default")
    eventually(
        lambda: (cluster.workload_of(one) or {}).get("spec", {}).get("priority") == 100,
        what="job-one's workload at priority 100",
    )
    eventually(
        lambda: cluster.get("jobs", "job-two", "default")["spec"]["suspend"] is False,
        timeout=20,
        what="job-two to start, preempting job-one",
    )
    assert cluster.get("jobs", "job-one", "default")["spec"]["suspend"] is True

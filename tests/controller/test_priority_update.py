"""A queued job's WorkloadPriorityClass label changed: its Workload follows, as Kueue's does."""

from __future__ import annotations

from extender.kube.api.resources import JOBS
from tests.controller.conftest import eventually
from tests.controller.test_preemption import cluster_queue, flavor, local_queue, priority

LABEL = "kueue.x-k8s.io/priority-class"


def test_a_queued_jobs_new_priority_class_reaches_its_workload_and_preempts(
    cluster, start_controller
):
    """Kueue's e2e job_test.go "Should allow updating the workload's priority through the
    job": job-two waits at low priority behind job-one; its label raised to high, its Workload
    gets the class and value, an UpdatedWorkload event says so, and it preempts job-one."""
    cluster.apply(
        flavor("pool-a"),
        cluster_queue("cq", 1, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue("user-queue", "cq"),
        priority("low", 100),
        priority("mid", 200),
        priority("high", 300),
    )
    start_controller()
    one = cluster.job("job-one", "1", duration="600s", labels={LABEL: "mid"})
    eventually(
        lambda: cluster.get("jobs", "job-one", "default")["spec"]["suspend"] is False,
        what="job-one to start",
    )
    two = cluster.job("job-two", "1", duration="600s", labels={LABEL: "low"})
    eventually(lambda: cluster.workload_of(two), what="job-two's workload")
    assert cluster.get("jobs", "job-two", "default")["spec"]["suspend"] is True

    cluster.admin.patch(JOBS, "job-two", {"metadata": {"labels": {LABEL: "high"}}}, "default")
    updated = eventually(
        lambda: (
            (cluster.workload_of(two) or {}).get("spec", {}).get("priority") == 300
            and cluster.workload_of(two)
        ),
        what="job-two's workload at priority 300",
    )
    assert updated["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "high",
    }
    eventually(
        lambda: cluster.get("jobs", "job-two", "default")["spec"]["suspend"] is False,
        what="job-two to start, preempting job-one",
    )
    assert cluster.get("jobs", "job-one", "default")["spec"]["suspend"] is True
    reasons = [
        (e.get("reason"), e.get("message"))
        for e in cluster.api.list("events", "default")
        if (e.get("involvedObject") or {}).get("name") == "job-two"
    ]
    wl_name = updated["metadata"]["name"]
    assert ("UpdatedWorkload", f"Updated workload priority class: default/{wl_name}") in reasons
    assert one["metadata"]["uid"] != two["metadata"]["uid"]

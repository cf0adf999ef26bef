"""A waiting job moved to another LocalQueue by its queue-name label: its Workload follows
(Kueue's QueueNameChange) and is admitted there."""

from __future__ import annotations

from extender.kube.api.resources import JOBS
from tests.controller.conftest import eventually
from tests.controller.test_preemption import cluster_queue, flavor, local_queue

LABEL = "kueue.x-k8s.io/queue-name"


def test_a_waiting_jobs_new_queue_name_moves_its_workload_and_it_starts(cluster, start_controller):
    """Kueue's e2e 'should suspend a job' (sequential managejobswithoutqueuename): the job
    waits in a LocalQueue that does not exist; its label set to one that does, its Workload's
    spec.queueName follows and the job starts."""
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 1), local_queue("main", "cq"))
    start_controller()
    job = cluster.job("test-job", "1", duration="600s", labels={LABEL: "missing"})
    waiting = eventually(lambda: cluster.workload_of(job), what="the job's workload")
    assert waiting["spec"]["queueName"] == "missing"
    assert cluster.get("jobs", "test-job", "default")["spec"]["suspend"] is True

    cluster.admin.patch(JOBS, "test-job", {"metadata": {"labels": {LABEL: "main"}}}, "default")
    eventually(
        lambda: cluster.get("jobs", "test-job", "default")["spec"]["suspend"] is False,
        what="the job to start from LocalQueue main",
    )
    assert cluster.workload_of(job)["spec"]["queueName"] == "main"

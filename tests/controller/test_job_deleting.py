"""A job being deleted, through the API double: as Kueue's reconciler, Tower only lets it go.
It is not suspended when its Workload goes first (a foreground deletion deletes dependents
first), and it gets no new Workload."""

from __future__ import annotations

import time

from extender.kube.api import resources as r
from tests.controller.conftest import eventually
from tests.controller.test_seed import CQ, FLAVOR, LQ


def job_writes(cluster, name: str) -> int:
    path = f"/apis/batch/v1/namespaces/default/jobs/{name}"
    return sum(1 for m, p, _ in list(cluster.api.requests) if m in ("PATCH", "PUT") and p == path)


def test_a_job_being_deleted_is_neither_suspended_nor_queued_again(cluster, start_controller):
    cluster.apply(FLAVOR, CQ, LQ)
    start_controller()
    job = cluster.job("going", "1", duration="600s")
    eventually(lambda: cluster.get("jobs", "going", "default")["spec"]["suspend"] is False,
               what="the job admitted and started")  # fmt: skip
    wl = cluster.workload_of(job)
    # What a foreground deletion leaves for a moment: the job held (its finalizer), marked
    # deleted, its Workload gone first.
    cluster.admin.patch(r.JOBS, "going", {"metadata": {"finalizers": ["foregroundDeletion"]}},
                        "default")  # fmt: skip
    cluster.admin.delete(r.JOBS, "going", "default")
    cluster.admin.delete(r.WORKLOADS, wl["metadata"]["name"], "default")
    eventually(lambda: cluster.workload_of(job) is None, what="the Workload gone")
    before = job_writes(cluster, "going")
    time.sleep(2)
    assert job_writes(cluster, "going") == before, "the job being deleted was written"
    assert cluster.get("jobs", "going", "default")["spec"]["suspend"] is False
    assert cluster.workload_of(job) is None, "a Workload made for a job being deleted"

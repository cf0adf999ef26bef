"""Preemption through the API: the preempted Job is suspended and its template restored."""

from __future__ import annotations

from extender.kube.api.resources import CLUSTER_QUEUES, WORKLOADS
from tests.controller.conftest import eventually


def flavor(name, labels=None, tolerations=None):
    spec = {}
    if labels:
        spec["nodeLabels"] = labels
    if tolerations:
        spec["tolerations"] = tolerations
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": spec,
    }


def cluster_queue(name, cpu, *, cohort=None, preemption=None):
    spec = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "pool-a",
                        "resources": [
                            {"name": "cpu", "nominalQuota": cpu},
                            {"name": "memory", "nominalQuota": "64Gi"},
                        ],
                    }
                ],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    if preemption:
        spec["preemption"] = preemption
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def local_queue(name, cq):
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"namespace": "default", "name": name},
        "spec": {"clusterQueue": cq},
    }


def priority(name, value):
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


TOLERATION = {"key": "pool", "operator": "Equal", "value": "a", "effect": "NoSchedule"}


def running(cluster, name):
    job = cluster.get("jobs", name, "default")
    return job is not None and job["spec"]["suspend"] is False


def conditions(workload):
    return {c["type"]: c for c in (workload.get("status") or {}).get("conditions") or []}


def priority_preemption_setup(tolerations=None):
    """One ClusterQueue of 4 cpu where `high` preempts `low` (withinClusterQueue)."""
    return [
        flavor("pool-a", {"pool": "a"}, tolerations),
        cluster_queue("cq", 4, preemption={"withinClusterQueue": "LowerPriority"}),
        local_queue("user-queue", "cq"),
        priority("low", 10),
        priority("high", 100),
    ]


def test_higher_priority_preempts_and_the_template_is_restored(cluster, start_controller):
    cluster.apply(*priority_preemption_setup([TOLERATION]))
    start_controller()
    low = cluster.job("low", "4", duration="600s", labels={"kueue.x-k8s.io/priority-class": "low"})
    eventually(lambda: running(cluster, "low"), what="the low job to start")
    pod = cluster.get("jobs", "low", "default")["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "a"}
    assert pod["tolerations"] == [TOLERATION]

    cluster.job("high", "4", duration="600s", labels={"kueue.x-k8s.io/priority-class": "high"})
    eventually(lambda: running(cluster, "high"), what="the high job to start")
    stopped = cluster.get("jobs", "low", "default")
    assert stopped["spec"]["suspend"] is True
    pod = stopped["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod
    assert "tolerations" not in pod
    assert "startTime" not in stopped["status"]
    wl = cluster.workload_of(low)
    assert conditions(wl)["Evicted"]["reason"] == "Preempted"
    assert conditions(wl)["Preempted"]["reason"] == "InClusterQueue"
    assert conditions(wl)["QuotaReserved"]["status"] == "False"
    assert "admission" not in wl["status"]


def test_cohort_reclaim_takes_back_lent_quota(cluster, start_controller):
    cluster.apply(
        flavor("pool-a"),
        cluster_queue("team-a", 2, cohort="team"),
        cluster_queue("team-b", 2, cohort="team", preemption={"reclaimWithinCohort": "Any"}),
        local_queue("queue-a", "team-a"),
        local_queue("queue-b", "team-b"),
    )
    start_controller()
    borrower = cluster.job("borrower", "4", queue="queue-a", duration="600s")
    eventually(lambda: running(cluster, "borrower"), what="the borrowing job to start")
    cluster.job("owner", "2", queue="queue-b", duration="600s")
    eventually(lambda: running(cluster, "owner"), what="team-b's job to start")
    assert cluster.get("jobs", "borrower", "default")["spec"]["suspend"] is True
    wl = cluster.workload_of(borrower)
    assert conditions(wl)["Preempted"]["reason"] == "InCohortReclamation"
    eventually(
        lambda: (
            (cluster.get("clusterqueues", "team-a").get("status") or {}).get("pendingWorkloads")
            == 1
        ),
        what="team-a to count its preempted workload as pending",
    )


def test_deactivating_an_admitted_workload_stops_its_job(cluster, start_controller):
    cluster.apply(
        flavor("pool-a", {"pool": "a"}), cluster_queue("cq", 4), local_queue("user-queue", "cq")
    )
    start_controller()
    job = cluster.job("paused", "2", duration="600s")
    eventually(lambda: running(cluster, "paused"), what="the job to start")
    wl = cluster.workload_of(job)
    cluster.admin.patch(WORKLOADS, wl["metadata"]["name"], {"spec": {"active": False}}, "default")
    eventually(
        lambda: cluster.get("jobs", "paused", "default")["spec"]["suspend"] is True,
        what="the job to be stopped",
    )
    wl = eventually(
        lambda: (w := cluster.workload_of(job)) and "admission" not in w["status"] and w,
        what="the quota to be released",
    )
    assert conditions(wl)["Evicted"]["reason"] == "Deactivated"
    other = cluster.job("next", "4", duration="600s")
    eventually(lambda: running(cluster, "next"), what="the freed quota to be used")
    assert cluster.get("jobs", "paused", "default")["spec"]["suspend"] is True
    assert other["metadata"]["name"] == "next"


def test_hold_and_drain_stops_running_jobs_until_resumed(cluster, start_controller):
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 4), local_queue("user-queue", "cq"))
    start_controller()
    job = cluster.job("drained", "2", duration="600s")
    eventually(lambda: running(cluster, "drained"), what="the job to start")
    cluster.admin.patch(CLUSTER_QUEUES, "cq", {"spec": {"stopPolicy": "HoldAndDrain"}})
    eventually(
        lambda: cluster.get("jobs", "drained", "default")["spec"]["suspend"] is True,
        what="the job to be drained",
    )
    wl = cluster.workload_of(job)
    assert conditions(wl)["Evicted"]["reason"] == "ClusterQueueStopped"

    def active_condition():
        cq = cluster.get("clusterqueues", "cq")
        found = [
            c for c in (cq.get("status") or {}).get("conditions") or [] if c["type"] == "Active"
        ]
        return found[0] if found else None

    eventually(
        lambda: (active_condition() or {}).get("reason") == "Stopped",
        what="the ClusterQueue to say it is stopped",
    )
    assert active_condition()["status"] == "False"
    cluster.admin.patch(CLUSTER_QUEUES, "cq", {"spec": {"stopPolicy": "None"}})
    eventually(lambda: running(cluster, "drained"), what="the job to run again")


def test_a_missing_flavor_makes_the_cluster_queue_inactive_until_it_exists(
    cluster, start_controller
):
    cluster.apply(cluster_queue("cq", 4), local_queue("user-queue", "cq"))
    start_controller()
    job = cluster.job("waiting", "1", duration="600s")

    def active():
        cq = cluster.get("clusterqueues", "cq")
        found = [
            c for c in (cq.get("status") or {}).get("conditions") or [] if c["type"] == "Active"
        ]
        return found[0] if found else {}

    eventually(lambda: active().get("reason") == "FlavorNotFound", what="FlavorNotFound")
    assert active()["status"] == "False"
    reason = eventually(
        lambda: conditions(cluster.workload_of(job) or {}).get("QuotaReserved"),
        what="the pending reason",
    )
    assert "pool-a" in reason["message"]
    cluster.apply(flavor("pool-a"))
    eventually(lambda: running(cluster, "waiting"), what="the job to start")
    eventually(lambda: active().get("reason") == "Ready", what="the ClusterQueue to be Ready")

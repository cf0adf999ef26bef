"""AdmissionChecks of a controller that is not Tower's, end to end over HTTP: the test plays
that controller, setting the check's Active condition and each Workload's check state as an
external controller would (kubectl patch --subresource=status)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest

from extender.kube.api.resources import ADMISSION_CHECKS, CLUSTER_QUEUES, JOBS, WORKLOADS
from tests.controller.conftest import eventually

CHECK = "my-check"
NOW = "2026-12-01T00:00:00Z"


def setup(cluster: Any) -> None:
    cluster.apply(
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
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": 9},
                                    {"name": "memory", "nominalQuota": "36Gi"},
                                ],
                            }
                        ],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK}]},
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "user-queue", "namespace": "default"},
            "spec": {"clusterQueue": "cluster-queue"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": CHECK},
            "spec": {"controllerName": "example.com/my-controller"},
        },
    )


def activate(cluster: Any) -> None:
    """The external controller says it is there."""
    condition = {
        "type": "Active",
        "status": "True",
        "reason": "Active",
        "message": "The admission check is active",
        "lastTransitionTime": NOW,
    }
    cluster.admin.patch(
        ADMISSION_CHECKS, CHECK, {"status": {"conditions": [condition]}}, subresource="status"
    )


def set_check(cluster: Any, workload: dict[str, Any], **entry: Any) -> None:
    """The external controller sets its check's state on the Workload."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"name": CHECK, "lastTransitionTime": now, "message": "", **entry}
    cluster.admin.patch(
        WORKLOADS,
        workload["metadata"]["name"],
        {"status": {"admissionChecks": [body]}},
        "default",
        subresource="status",
    )


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return {}


@pytest.fixture
def reserved(cluster, start_controller):
    """A Job whose Workload holds quota and waits for its check, Pending."""
    setup(cluster)
    running = start_controller()
    job = cluster.job("sample", "1")
    eventually(
        lambda: (
            "references inactive AdmissionCheck(s): my-check"
            in condition(cluster.get("clusterqueues", "cluster-queue"), "Active").get("message", "")
        ),
        what="the ClusterQueue inactive while its check is",
    )
    activate(cluster)

    def waiting() -> dict[str, Any] | None:
        wl = cluster.workload_of(job)
        if wl is None or condition(wl, "QuotaReserved").get("status") != "True":
            return None
        return wl

    workload = eventually(waiting, what="quota reserved")
    [entry] = workload["status"]["admissionChecks"]
    assert (entry["name"], entry["state"], entry["message"]) == (CHECK, "Pending", "")
    assert condition(workload, "Admitted").get("status") != "True"
    assert cluster.get("jobs", "sample", "default")["spec"]["suspend"] is True
    cluster.running = running  # the metrics of the controller, for the tests below
    return job, workload


def test_a_job_starts_once_its_check_is_ready_with_the_checks_pod_set_updates(cluster, reserved):
    job, workload = reserved
    set_check(
        cluster,
        workload,
        state="Ready",
        podSetUpdates=[
            {
                "name": "main",
                "nodeSelector": {"example.com/pool": "p1"},
                "annotations": {"example.com/ticket": "t-1"},
            }
        ],
    )
    started = eventually(
        lambda: (j := cluster.get("jobs", "sample", "default"))["spec"]["suspend"] is False and j,
        what="the job to start",
    )
    pod = started["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {"example.com/pool": "p1"}
    assert pod["metadata"]["annotations"]["example.com/ticket"] == "t-1"
    admitted = cluster.workload_of(job)
    assert condition(admitted, "Admitted")["reason"] == "Admitted"


def test_a_check_in_retry_gives_the_quota_back_and_the_job_queues_again(cluster, reserved):
    job, workload = reserved
    asked = time.monotonic()
    set_check(cluster, workload, state="Retry", message="no capacity", requeueAfterSeconds=3)

    def again() -> dict[str, Any] | None:
        wl = cluster.workload_of(job)
        [entry] = (wl.get("status") or {}).get("admissionChecks") or [{}]
        evicted = condition(wl, "Evicted")
        if evicted.get("status") != "False" or entry.get("retryCount") != 1:
            return None  # not evicted yet, or evicted and not reserved again yet
        return wl if condition(wl, "QuotaReserved").get("status") == "True" else None

    wl = eventually(again, timeout=20, what="the quota given back, then reserved again")
    # The reservation was given back at once; the Workload queued again only after the
    # check's requeueAfterSeconds (counted from the check's lastTransitionTime, in seconds).
    assert time.monotonic() - asked >= 2
    assert condition(wl, "Evicted")["message"] == (
        'Previously: Evicted due to AdmissionCheck in Retry state: "my-check" (no capacity)'
    )
    [entry] = wl["status"]["admissionChecks"]
    assert entry["state"] == "Pending"
    assert entry["message"] == "Reset to Pending after eviction. Previously: Retry"
    assert condition(wl, "Requeued")["reason"] == "BackoffFinished"
    assert cluster.get("jobs", "sample", "default")["spec"]["suspend"] is True


def test_a_rejected_check_deactivates_the_workload(cluster, reserved):
    job, workload = reserved
    set_check(cluster, workload, state="Rejected", message="quota exceeded")

    def deactivated() -> dict[str, Any] | None:
        wl = cluster.workload_of(job)
        evicted = condition(wl, "Evicted")
        done = wl["spec"].get("active") is False and evicted.get("status") == "True"
        return wl if done and condition(wl, "QuotaReserved").get("status") == "False" else None

    wl = eventually(deactivated, what="deactivation")
    evicted = condition(wl, "Evicted")
    assert evicted["reason"] == "DeactivatedDueToAdmissionCheck"
    assert evicted["message"] == (
        'The workload is deactivated due to AdmissionCheck in Rejected state: "my-check" '
        "(quota exceeded)"
    )
    assert cluster.get("jobs", "sample", "default")["spec"]["suspend"] is True
    assert cluster.admin.get(JOBS, "sample", "default")["spec"]["suspend"] is True
    # Counted as Kueue counts a deactivation: reason Deactivated, its cause beside it.
    registry = cluster.running.controller.metrics.registry
    labels = {
        "cluster_queue": "cluster-queue",
        "reason": "Deactivated",
        "underlying_cause": "AdmissionCheck",
        "priority_class": "",
        "replica_role": "standalone",
    }
    assert registry.get_sample_value("kueue_evicted_workloads_total", labels) == 1


def test_a_check_removed_from_the_cluster_queue_no_longer_holds_the_job_back(cluster, reserved):
    """The admin drops the check while a Workload waits for it: the reservation does not
    wait forever for a check no one asks for any longer."""
    job, _ = reserved
    cluster.admin.patch(
        CLUSTER_QUEUES, "cluster-queue", {"spec": {"admissionChecksStrategy": None}}
    )
    eventually(
        lambda: cluster.get("jobs", "sample", "default")["spec"]["suspend"] is False,
        what="the job to start without the check",
    )
    admitted = cluster.workload_of(job)
    assert condition(admitted, "Admitted")["status"] == "True"
    assert not admitted["status"].get("admissionChecks")

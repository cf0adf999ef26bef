"""Kueue's admission-gated-by annotation on the API double: a gated Job waits however much
quota is free, the Job behind it in its queue runs, and taking the gates off admits it; the
Workload's condition and the Events are Kueue's."""

from __future__ import annotations

from typing import Any

import pytest

from extender.kube.api.resources import JOBS, PODS
from tests.controller.conftest import eventually
from tests.controller.test_kubectl_tower import tower
from tests.controller.test_pods import GATE, example_pod, setup, ungated
from tests.controller.test_preemption import cluster_queue, flavor, local_queue

GATED_BY = "kueue.x-k8s.io/admission-gated-by"
GATES = "example.com/controller1,example.com/controller2"


def gated_job(cluster, name: str, cpu: str, gates: str) -> dict[str, Any]:
    """A Job made as the conftest's, created with the annotation (it cannot be added later)."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
            "annotations": {"tower.dev/sim-duration": "600s", GATED_BY: gates},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "worker",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                        }
                    ],
                }
            },
        },
    }
    return cluster.admin.create(JOBS, job, "default")


def quota_reserved(workload: dict[str, Any] | None) -> dict[str, Any]:
    for cond in ((workload or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "QuotaReserved":
            return cond
    return {}


def events_of(cluster, name: str) -> list[tuple[str, str, str]]:
    return [
        (e.get("type"), e.get("reason"), e.get("message"))
        for e in cluster.api.list("events", "default")
        if (e.get("involvedObject") or {}).get("name") == name
    ]


def told(cluster, name: str, event: tuple[str, str, str]) -> None:
    """Events are sent apart from the writes: looked for until they come."""
    eventually(lambda: event in events_of(cluster, name), what=f"the Event {event}")


def suspended(cluster, name: str) -> bool:
    return cluster.get("jobs", name, "default")["spec"]["suspend"] is True


@pytest.mark.parametrize("strict", [False, True], ids=["BestEffortFIFO", "StrictFIFO"])
def test_a_gated_job_waits_the_one_behind_it_runs_and_ungating_admits_it(
    cluster, start_controller, strict
):
    """Kueue's scheduler_test.go "Should gate workload admission with AdmissionGatedBy
    annotation and admit when removed", through a Job as the jobframework propagates it."""
    cq = cluster_queue("cq", 4)
    if strict:
        cq["spec"]["queueingStrategy"] = "StrictFIFO"
    cluster.apply(flavor("pool-a"), cq, local_queue("user-queue", "cq"))
    start_controller()
    gated = gated_job(cluster, "gated", "1", GATES)
    wl = eventually(lambda: cluster.workload_of(gated), what="the gated Job's Workload")
    assert wl["metadata"]["annotations"][GATED_BY] == GATES
    wl = eventually(
        lambda: (
            quota_reserved(cluster.workload_of(gated)).get("reason") == "AdmissionGated"
            and cluster.workload_of(gated)
        ),
        what="QuotaReserved=False, AdmissionGated",
    )
    cond = quota_reserved(wl)
    assert (cond["status"], cond["message"]) == ("False", f"Admission is gated by: {GATES}")
    wl_name = wl["metadata"]["name"]
    told(cluster, wl_name, ("Normal", "AdmissionGated", f"Workload admission is gated by: {GATES}"))

    behind = cluster.job("behind", "1", duration="600s")  # created later, same queue
    eventually(lambda: not suspended(cluster, "behind"), what="the Job behind it to start")
    assert suspended(cluster, "gated")
    assert not (cluster.workload_of(gated).get("status") or {}).get("admission")
    why = tower(cluster, "why", "gated", "-n", "default")
    assert why.returncode == 0, why.stderr
    assert why.stdout.splitlines() == [
        f"Job default/gated  (Workload {wl_name})",
        "State:       Pending — AdmissionGated: held by an admission gate: "
        "example.com/controller1, example.com/controller2 (each controller named in "
        f"{GATED_BY} takes its own name off; it is queued once none is left)",
    ]

    # One controller takes its gate off: still gated by the other.
    one_left = {"metadata": {"annotations": {GATED_BY: "example.com/controller2"}}}
    cluster.admin.patch(JOBS, "gated", one_left, "default")
    eventually(
        lambda: (
            quota_reserved(cluster.workload_of(gated)).get("message")
            == "Admission is gated by: example.com/controller2"
        ),
        what="the Workload gated by the one gate left",
    )
    assert suspended(cluster, "gated")
    updated = 'Updated workload AdmissionGatedBy to "example.com/controller2"'
    told(cluster, "gated", ("Normal", "UpdatedWorkload", updated))

    # The last gate off: admitted (3 of 4 cpu are free).
    cluster.admin.patch(JOBS, "gated", {"metadata": {"annotations": {GATED_BY: None}}}, "default")
    eventually(lambda: not suspended(cluster, "gated"), what="the ungated Job to start")
    wl = cluster.workload_of(gated)
    assert GATED_BY not in (wl["metadata"].get("annotations") or {})
    assert quota_reserved(wl)["status"] == "True"
    told(cluster, "gated", ("Normal", "UpdatedWorkload", 'Updated workload AdmissionGatedBy to ""'))
    told(cluster, wl_name, ("Normal", "AdmissionGateCleared", CLEARED_EVENT))
    assert not suspended(cluster, behind["metadata"]["name"])  # it kept running


CLEARED_EVENT = "Admission gate cleared, workload is now admissible"


def test_a_gate_taken_off_while_quota_is_short_says_so_as_kueue_does(cluster, start_controller):
    """Kueue's workload_controller_test.go "workload with AdmissionGatedBy annotation removed
    should clear the gate and emit event": QuotaReserved=False, Pending, "AdmissionGatedBy
    cleared, waiting for quota reservation", until a cycle says why it still waits."""
    cluster.apply(flavor("pool-a"), cluster_queue("cq", 1), local_queue("user-queue", "cq"))
    start_controller()
    cluster.job("holder", "1", duration="600s")
    eventually(lambda: not suspended(cluster, "holder"), what="the holder to start")
    gated = gated_job(cluster, "gated", "1", "example.com/controller1")
    wl = eventually(
        lambda: (
            quota_reserved(cluster.workload_of(gated)).get("reason") == "AdmissionGated"
            and cluster.workload_of(gated)
        ),
        what="QuotaReserved=False, AdmissionGated",
    )
    cluster.admin.patch(JOBS, "gated", {"metadata": {"annotations": {GATED_BY: None}}}, "default")
    told(cluster, wl["metadata"]["name"], ("Normal", "AdmissionGateCleared", CLEARED_EVENT))
    cond = eventually(
        lambda: (
            quota_reserved(cluster.workload_of(gated)).get("reason") != "AdmissionGated"
            and quota_reserved(cluster.workload_of(gated))
        ),
        what="the gate's condition replaced",
    )
    assert cond["status"] == "False"
    assert cond["reason"] in ("Pending", "WaitingForQuota"), cond  # a cycle may say more first
    if cond["reason"] == "Pending":
        assert cond["message"] == "AdmissionGatedBy cleared, waiting for quota reservation"
    assert suspended(cluster, "gated")


def test_a_pods_admission_gate_reaches_its_workload_and_holds_the_pod(cluster, start_controller):
    """A pod's Workload is made by the group room: the annotation goes with it, as Kueue's
    pod controller propagates it; the pod keeps its scheduling gate while quota is free."""
    setup(cluster)
    start_controller()
    body = example_pod()
    body["metadata"].setdefault("annotations", {})[GATED_BY] = "example.com/controller1"
    created = cluster.admin.create(PODS, body, "default")
    wl = eventually(
        lambda: (
            quota_reserved(cluster.workload_of(created)).get("reason") == "AdmissionGated"
            and cluster.workload_of(created)
        ),
        what="the pod's Workload gated",
    )
    assert wl["metadata"]["annotations"][GATED_BY] == "example.com/controller1"
    assert ungated(cluster, created) is None
    assert (
        GATE
        in cluster.get("pods", created["metadata"]["name"], "default")["spec"]["schedulingGates"]
    )

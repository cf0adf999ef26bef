"""Kueue's ProvisioningRequest admission check, with Kueue's documentation example applied
unchanged, end to end over HTTP. cluster-autoscaler does not run here: the test sets the
ProvisioningRequests' conditions as it would."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extender.kube.api import resources as r
from extender.kube.api.resources import JOBS, PROVISIONING_REQUESTS
from tests import yamlc
from tests.controller.conftest import CRDS, eventually

DATA = Path(__file__).resolve().parents[1] / "data"
EXAMPLES = DATA / "kueue-v0.19.2" / "examples"
PR_CRD = DATA / "autoscaler" / "autoscaling.x-k8s.io_provisioningrequests.yaml"
PRC = r.PROVISIONING_REQUEST_CONFIGS


def load(path: Path) -> list[dict[str, Any]]:
    return [d for d in yamlc.safe_load_all(path.read_text()) if d]


def apply(cluster: Any, objs: list[dict[str, Any]]) -> None:
    for obj in objs:
        if obj["kind"] == "ProvisioningRequestConfig":
            cluster.admin.create(PRC, obj)
        else:
            cluster.apply(obj)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return {}


def set_condition(cluster: Any, name: str, kind: str, message: str = "", **status: Any) -> None:
    """cluster-autoscaler's part: a condition on the ProvisioningRequest."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = {
        "type": kind,
        "status": "True",
        "reason": kind,
        "message": message,
        "lastTransitionTime": now,
    }
    cluster.admin.patch(
        PROVISIONING_REQUESTS,
        name,
        {"status": {"conditions": [entry], **status}},
        "default",
        subresource="status",
    )


@pytest.fixture
def example(cluster, start_controller):
    """provisioning_request.md's setup and sample job, applied unchanged."""
    cluster.admin.create(CRDS, yamlc.safe_load(PR_CRD.read_text()))
    apply(cluster, load(EXAMPLES / "provisioning" / "provisioning-setup.yaml"))
    start_controller()
    [job] = load(EXAMPLES / "provisioning" / "sample-job.yaml")
    created = cluster.admin.create(JOBS, job, "default")

    def requested() -> tuple[dict[str, Any], dict[str, Any]] | None:
        wl = cluster.workload_of(created)
        if wl is None:
            return None
        name = f"{wl['metadata']['name']}-sample-prov-1"
        pr = cluster.get("provisioningrequests", name, "default")
        return (wl, pr) if pr is not None else None

    wl, pr = eventually(requested, what="the ProvisioningRequest of the first attempt")
    return created, wl, pr


def test_the_example_asks_cluster_autoscaler_for_the_jobs_three_gpu_pods(cluster, example):
    job, wl, pr = example
    check = cluster.get("admissionchecks", "sample-prov")
    assert condition(check, "Active")["reason"] == "Active"
    assert condition(wl, "QuotaReserved")["status"] == "True"
    assert condition(wl, "Admitted").get("status") != "True"
    [state] = wl["status"]["admissionChecks"]
    assert (state["name"], state["state"]) == ("sample-prov", "Pending")
    assert pr["spec"]["provisioningClassName"] == "check-capacity.autoscaling.x-k8s.io"
    # The job's provreq.kueue.x-k8s.io/ annotation is a parameter of the request.
    assert pr["spec"]["parameters"] == {"maxRunDurationSeconds": "600"}
    name = pr["metadata"]["name"]
    assert pr["spec"]["podSets"] == [{"podTemplateRef": {"name": f"ppt-{name}-main"}, "count": 3}]
    assert pr["metadata"]["labels"] == {"kueue.x-k8s.io/managed": "true"}
    assert pr["metadata"]["ownerReferences"][0]["name"] == wl["metadata"]["name"]
    # Made owned by the Workload, then passed to the request (which it then goes with).
    template = eventually(
        lambda: (
            (t := cluster.get("podtemplates", f"ppt-{name}-main", "default"))
            and t["metadata"]["ownerReferences"][0]["kind"] == "ProvisioningRequest"
            and t
        ),
        what="the PodTemplate owned by its request",
    )
    [container] = template["template"]["spec"]["containers"]
    assert container["image"] == "registry.k8s.io/e2e-test-images/agnhost:2.53"
    assert container["resources"]["requests"]["nvidia.com/gpu"] == 1
    assert cluster.get("jobs", job["metadata"]["name"], "default")["spec"]["suspend"] is True


def test_a_provisioned_request_starts_the_job_on_the_capacity_it_booked(cluster, example):
    job, _wl, pr = example
    name = pr["metadata"]["name"]
    set_condition(cluster, name, "Provisioned", "Provisioned")
    started = eventually(
        lambda: (
            (j := cluster.get("jobs", job["metadata"]["name"], "default"))["spec"]["suspend"]
            is False
            and j
        ),
        what="the job to start",
    )
    annotations = started["spec"]["template"]["metadata"]["annotations"]
    assert annotations["autoscaling.x-k8s.io/consume-provisioning-request"] == name
    assert (
        annotations["autoscaling.x-k8s.io/provisioning-class-name"]
        == "check-capacity.autoscaling.x-k8s.io"
    )
    admitted = cluster.workload_of(job)
    [state] = admitted["status"]["admissionChecks"]
    assert state["state"] == "Ready"
    assert condition(admitted, "Admitted")["status"] == "True"


def test_a_failed_request_is_retried_then_rejected_past_the_limit(cluster, example):
    """The example's retryStrategy: backoffLimitCount 2, backoffBaseSeconds 0. Attempts 1 and
    2 fail and are retried at once with a new request; attempt 3 failing rejects the check,
    and the Workload is deactivated."""
    job, wl, _pr = example
    wl_name = wl["metadata"]["name"]
    for attempt in (1, 2):
        set_condition(cluster, f"{wl_name}-sample-prov-{attempt}", "Failed", "no capacity")
        eventually(
            lambda a=attempt: cluster.get(
                "provisioningrequests", f"{wl_name}-sample-prov-{a + 1}", "default"
            ),
            timeout=20,
            what=f"attempt {attempt + 1}",
        )
        again = cluster.workload_of(job)
        assert condition(again, "Evicted")["message"] == (
            "Previously: Evicted due to AdmissionCheck in Retry state: "
            '"sample-prov" (Retrying after failure: no capacity)'
        )
        [state] = again["status"]["admissionChecks"]
        assert state["retryCount"] == attempt
        # The failed attempt's request is deleted once the next one exists.
        eventually(
            lambda a=attempt: (
                cluster.get("provisioningrequests", f"{wl_name}-sample-prov-{a}", "default") is None
            ),
            what="the failed request deleted",
        )
    set_condition(cluster, f"{wl_name}-sample-prov-3", "Failed", "still no capacity")

    def deactivated() -> dict[str, Any] | None:
        current = cluster.workload_of(job)
        gone = current["spec"].get("active") is False
        return current if gone and condition(current, "Evicted").get("status") == "True" else None

    final = eventually(deactivated, timeout=20, what="deactivation")
    assert condition(final, "Evicted")["reason"] == "DeactivatedDueToAdmissionCheck"
    assert "still no capacity" in condition(final, "Evicted")["message"]
    assert cluster.get("jobs", job["metadata"]["name"], "default")["spec"]["suspend"] is True


def test_kueues_sample_admission_check_names_no_controller_so_its_queue_stays_inactive(
    cluster, start_controller
):
    """sample-admission-check.yaml's controllerName is `ProvisioningRequestController`: no
    controller is Kueue's or Tower's by that name, so the check never becomes Active."""
    cluster.admin.create(CRDS, yamlc.safe_load(PR_CRD.read_text()))
    apply(cluster, load(EXAMPLES / "sample-admission-check.yaml"))
    setup = load(EXAMPLES / "provisioning" / "provisioning-setup.yaml")
    for obj in setup:
        if obj["kind"] == "ClusterQueue":
            obj["spec"]["admissionChecksStrategy"] = {"admissionChecks": [{"name": "prov-test"}]}
    apply(
        cluster,
        [o for o in setup if o["kind"] not in ("AdmissionCheck", "ProvisioningRequestConfig")],
    )
    start_controller()
    cq = eventually(
        lambda: (
            (c := cluster.get("clusterqueues", "cluster-queue"))
            and condition(c, "Active").get("reason") == "AdmissionCheckInactive"
            and c
        ),
        what="the ClusterQueue inactive",
    )
    assert condition(cq, "Active")["message"] == (
        "Can't admit new workloads: references inactive AdmissionCheck(s): prov-test."
    )
    assert condition(cluster.get("admissionchecks", "prov-test"), "Active") == {}


def test_without_the_autoscalers_crd_the_check_says_what_to_install(cluster, start_controller):
    apply(cluster, load(EXAMPLES / "provisioning" / "provisioning-setup.yaml"))
    start_controller()
    check = eventually(
        lambda: condition(cluster.get("admissionchecks", "sample-prov"), "Active") or None,
        what="the check's Active condition",
    )
    assert check["status"] == "False"
    assert check["reason"] == "ProvisioningRequestsNotServed"
    assert "install cluster-autoscaler's ProvisioningRequest CRD" in check["message"]
    # Installed later, it is taken up without a restart.
    cluster.admin.create(CRDS, yamlc.safe_load(PR_CRD.read_text()))
    eventually(
        lambda: (
            condition(cluster.get("admissionchecks", "sample-prov"), "Active").get("status")
            == "True"
        ),
        timeout=20,
        what="the check Active once the CRD is served",
    )

"""Kueue's ProvisioningRequest admission check on a real control plane, with cluster-autoscaler's
CRD (tests/data/autoscaler/) and Kueue's documentation example: a Job waits with quota
reserved until its ProvisioningRequest is Provisioned, then starts; a Failed request follows
the config's retry strategy (a new request per attempt, then Rejected and deactivated).

cluster-autoscaler does not run here: the test sets the requests' conditions as it would.
The example's queues are applied unchanged; its Job is created with `spec.suspend: true`,
as the webhook leaves it (this test does not depend on the webhook being reachable).
"""

from __future__ import annotations

import json
import signal
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes import config as k8s_config

from tests import yamlc
from tests.e2e.conftest import KUBECONFIG, controller_process, kubectl, wait

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples" / "provisioning"
PR_CRD = ROOT / "tests" / "data" / "autoscaler" / "autoscaling.x-k8s.io_provisioningrequests.yaml"
GROUP, VERSION = "autoscaling.x-k8s.io", "v1"

pytestmark = pytest.mark.e2e


@pytest.fixture
def example():
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("apply", "-f", str(PR_CRD))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    setup = EXAMPLE / "provisioning-setup.yaml"
    kubectl("apply", "-f", str(setup))
    # No node here has the example's GPUs: quota and the check decide, not placement.
    proc = controller_process("--physical-resources", "none")
    created: list[str] = []
    yield k8s_config.new_client_from_config(config_file=KUBECONFIG), created
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    for name in created:
        kubectl("delete", "job", name, "-n", "default", "--wait=false", check=False)
    kubectl("delete", "pods", "-n", "default", "-l", "batch.kubernetes.io/job-name", "--force",
            "--grace-period=0", check=False)  # fmt: skip
    kubectl("delete", "provisioningrequests", "--all", "-n", "default", check=False)
    kubectl("delete", "-f", str(setup), check=False)


def create_job(created: list[str]) -> str:
    [job] = yamlc.safe_load_all((EXAMPLE / "sample-job.yaml").read_text())
    job["metadata"]["generateName"] = f"sample-job-{uuid.uuid4().hex[:4]}-"
    job["spec"]["suspend"] = True
    name = kubectl("create", "-f", "-", "-o", "name", input=json.dumps(job)).strip()
    name = name.removeprefix("job.batch/")
    created.append(name)
    return name


def workload_of(custom: client.CustomObjectsApi, job_name: str) -> dict[str, Any] | None:
    for wl in custom.list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "default", "workloads"
    )["items"]:
        if any(o.get("name") == job_name for o in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return {}


def request(custom: client.CustomObjectsApi, name: str) -> dict[str, Any] | None:
    try:
        return dict(
            custom.get_namespaced_custom_object(
                GROUP, VERSION, "default", "provisioningrequests", name
            )
        )
    except client.ApiException as err:
        if err.status == 404:
            return None
        raise


def autoscaler_says(custom: client.CustomObjectsApi, name: str, kind: str, message: str) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {
        "status": {
            "conditions": [
                {
                    "type": kind,
                    "status": "True",
                    "reason": kind,
                    "message": message,
                    "lastTransitionTime": now,
                }
            ]
        }
    }
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", "provisioningrequests", name, body
    )


def first_request(custom: client.CustomObjectsApi, job: str) -> tuple[dict[str, Any], str]:
    def found() -> tuple[dict[str, Any], str] | None:
        wl = workload_of(custom, job)
        if wl is None:
            return None
        name = f"{wl['metadata']['name']}-sample-prov-1"
        return (wl, name) if request(custom, name) is not None else None

    return wait(found, timeout=60, what="the first ProvisioningRequest")


def test_a_job_waits_with_quota_reserved_and_starts_once_provisioned(example):
    api, created = example
    custom, batch = client.CustomObjectsApi(api), client.BatchV1Api(api)
    wait(
        lambda: (
            condition(
                custom.get_cluster_custom_object(
                    "kueue.x-k8s.io", "v1beta2", "admissionchecks", "sample-prov"
                ),
                "Active",
            ).get("status")
            == "True"
        ),
        timeout=60,
        what="the AdmissionCheck Active",
    )
    job = create_job(created)
    _, name = first_request(custom, job)
    pr = request(custom, name)
    assert pr is not None
    assert pr["spec"]["podSets"] == [{"podTemplateRef": {"name": f"ppt-{name}-main"}, "count": 3}]
    assert pr["spec"]["parameters"] == {"maxRunDurationSeconds": "600"}
    assert condition(workload_of(custom, job), "QuotaReserved")["status"] == "True"
    assert batch.read_namespaced_job(job, "default").spec.suspend is True
    core = client.CoreV1Api(api)
    wait(
        lambda: (
            core.read_namespaced_pod_template(f"ppt-{name}-main", "default")
            .metadata.owner_references[0]
            .kind
            == "ProvisioningRequest"
        ),
        timeout=30,
        what="the PodTemplate owned by its request",
    )

    autoscaler_says(custom, name, "Provisioned", "capacity is ready")
    wait(
        lambda: batch.read_namespaced_job(job, "default").spec.suspend is False,
        timeout=60,
        what="the Job to start",
    )
    started = batch.read_namespaced_job(job, "default")
    annotations = started.spec.template.metadata.annotations or {}
    assert annotations["autoscaling.x-k8s.io/consume-provisioning-request"] == name
    assert condition(workload_of(custom, job), "Admitted")["status"] == "True"


def test_a_failed_request_is_retried_then_rejected(example):
    """The example's retryStrategy: backoffLimitCount 2, backoffBaseSeconds 0."""
    api, created = example
    custom, batch = client.CustomObjectsApi(api), client.BatchV1Api(api)
    job = create_job(created)
    _, first = first_request(custom, job)
    prefix = first.removesuffix("1")
    for attempt in (1, 2):
        autoscaler_says(custom, f"{prefix}{attempt}", "Failed", "no capacity")
        wait(
            lambda a=attempt: request(custom, f"{prefix}{a + 1}") is not None,
            timeout=60,
            what=f"attempt {attempt + 1}",
        )
    autoscaler_says(custom, f"{prefix}3", "Failed", "still no capacity")

    def deactivated() -> dict[str, Any] | None:
        current = workload_of(custom, job)
        evicted = condition(current, "Evicted")
        if current is None or current["spec"].get("active") is not False:
            return None
        return current if evicted.get("reason") == "DeactivatedDueToAdmissionCheck" else None

    final = wait(deactivated, timeout=60, what="deactivation past backoffLimitCount")
    assert "still no capacity" in condition(final, "Evicted")["message"]
    assert batch.read_namespaced_job(job, "default").spec.suspend is True
    # The evicted Workload's requests are deleted.
    wait(lambda: request(custom, f"{prefix}3") is None, timeout=60, what="requests deleted")

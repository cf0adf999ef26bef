"""Kueue v0.19.2's DRA e2e cases (test/e2e/dra/whole-device/dra_test.go) on the API double.

Kueue runs them on kind with Kubernetes v1.34 and the dra-example-driver; the real v1.32
control plane here serves no resource.k8s.io/v1, so they run against the double serving it,
with the Configuration of test/e2e/config/dra/whole-device (two deviceClassMappings). Each
test names its Go case. Jobs "run" for a second (BehaviorExitFast) or until deleted.

Two cases differ, on purpose and said in docs/kueue.md (DRA): "Should not admit a job with
unsatisfiable CEL selectors" (Tower evaluates no CEL against ResourceSlices, so it admits the
job and its pods wait for a device), and "Late DeviceClass creation" (Tower reads no
DeviceClass, so an extended resource is counted under its own name, never the mapped one).
"""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.config.kueue_config import parse
from extender.kube.api.resources import JOBS, RESOURCE_CLAIM_TEMPLATES
from tests.apidouble import resource
from tests.controller.conftest import eventually
from tests.controller.test_dra import condition, started

CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {
        "deviceClassMappings": [
            {"name": "gpu", "deviceClassNames": ["gpu.example.com"]},
            {"name": "gpu-late-dc", "deviceClassNames": ["gpu-late-dc.example.com"]},
        ]
    },
}
EXTENDED = "example.com/gpu"


def queues() -> list[dict[str, Any]]:
    quota = [
        {"name": "cpu", "nominalQuota": 4},
        {"name": EXTENDED, "nominalQuota": 4},
        {"name": "gpu", "nominalQuota": 4},
    ]
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "dra-flavor"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "dra-cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [q["name"] for q in quota],
                        "flavors": [{"name": "dra-flavor", "resources": quota}],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "dra-lq", "namespace": "default"},
            "spec": {"clusterQueue": "dra-cq"},
        },
    ]


def claim_template(name: str, count: int, cel: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": "gpu.example.com", "count": count}
    if cel is not None:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu-request", "exactly": exactly}]}}},
    }


def job(
    name: str,
    *,
    template: str | None = None,
    extended: str | None = None,
    parallelism: int = 1,
    exits_fast: bool = True,
) -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": "200m"}
    if extended is not None:
        requests[EXTENDED] = extended
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/e2e-test-images/agnhost:2.53",
                "resources": {
                    "requests": requests,
                    "limits": dict(requests),
                    **({"claims": [{"name": "gpu"}]} if template else {}),
                },
            }
        ],
    }
    if template is not None:
        pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    meta: dict[str, Any] = {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "dra-lq"}}
    if exits_fast:
        meta["annotations"] = {"tower.dev/sim-duration": "1s"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {"spec": pod},
        },
    }


@pytest.fixture
def dra(cluster, start_controller):
    resource.serve(cluster.api)
    cluster.apply(*queues())
    start_controller(resource_policy=parse(CONFIG).resource_policy)
    return cluster


def create(cluster: Any, *objs: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for obj in objs:
        kind = RESOURCE_CLAIM_TEMPLATES if obj["kind"] == "ResourceClaimTemplate" else JOBS
        out.append(cluster.admin.create(kind, obj, "default"))
    return out


def usage(cluster: Any, created: dict[str, Any]) -> dict[str, str] | None:
    """The admitted podSet's count and resourceUsage (None until it holds quota)."""
    workload = cluster.workload_of(created) or {}
    admission = (workload.get("status") or {}).get("admission")
    if not admission:
        return None
    [assigned] = admission["podSetAssignments"]
    return {"count": str(assigned.get("count")), **assigned["resourceUsage"]}


def finished(cluster: Any, created: dict[str, Any]) -> bool:
    return condition(cluster.workload_of(created), "Finished").get("status") == "True"


@pytest.mark.parametrize(
    ("template", "cel"),
    [("gpu-template", None), ("cel-gpu-template", 'device.driver == "gpu.example.com"')],
    ids=[
        "Should admit and run a job with DRA resource claim template",
        "Should admit and run a job with CEL selectors in resource claim template",
    ],
)
def test_a_job_claiming_one_gpu_is_charged_one_and_runs_to_the_end(dra, template, cel):
    [_, created] = create(dra, claim_template(template, 1, cel), job("dra-job", template=template))
    got = eventually(lambda: usage(dra, created), what="quota reserved")
    assert got["gpu"] == "1"
    eventually(lambda: finished(dra, created), what="the workload to finish")


def test_should_keep_job_suspended_when_dra_quota_is_exceeded(dra):
    [_, created] = create(
        dra,
        claim_template("large-gpu-template", 10),
        job("large-dra-job", template="large-gpu-template", exits_fast=False),
    )
    message = eventually(
        lambda: condition(dra.workload_of(created), "QuotaReserved").get("message"),
        what="its reason",
    )
    assert "gpu" in message
    assert not started(dra, created)
    assert usage(dra, created) is None


def test_should_admit_multiple_jobs_that_together_fit_within_dra_quota(dra):
    created = create(
        dra,
        claim_template("gpu-template-1", 2),
        claim_template("gpu-template-2", 2),
        job("dra-job-1", template="gpu-template-1", exits_fast=False),
        job("dra-job-2", template="gpu-template-2", exits_fast=False),
    )[2:]
    for one in created:
        assert eventually(lambda one=one: usage(dra, one), what="quota reserved")["gpu"] == "2"


def test_should_queue_third_job_when_dra_quota_is_full_and_admit_it_after_quota_is_freed(dra):
    jobs = create(
        dra,
        *(claim_template(f"gpu-template-{x}", 2) for x in "abc"),
        *(job(f"dra-job-{x}", template=f"gpu-template-{x}") for x in "abc"),
    )[3:]
    eventually(lambda: finished(dra, jobs[2]), timeout=20, what="the third job to run in turn")
    assert all(finished(dra, j) for j in jobs)


def test_should_correctly_calculate_dra_resources_for_multi_pod_jobs(dra):
    [_, created] = create(
        dra,
        claim_template("multi-pod-gpu-template", 1),
        job("multi-pod-dra-job", template="multi-pod-gpu-template", parallelism=2),
    )
    got = eventually(lambda: usage(dra, created), what="quota reserved")
    assert (got["count"], got["gpu"]) == ("2", "2")


# ----- "Creating Jobs with Extended Resources backed by DRA": the extended resource is the
# quota key in Kueue (the DeviceClass's extendedResourceName); Tower counts the request as it
# is written, under the same name, and never sees the claim kube-scheduler makes for it (so
# "Should not double-count extended resource when translated to DRA logical resource" is the
# first case below: 1, not 2).


def test_should_admit_and_run_a_job_using_extended_resource_backed_by_dra(dra):
    [created] = create(dra, job("ext-res-dra-job", extended="1"))
    assert eventually(lambda: usage(dra, created), what="quota reserved")[EXTENDED] == "1"
    eventually(lambda: finished(dra, created), what="the workload to finish")


def test_should_keep_job_suspended_when_extended_resource_dra_quota_is_exceeded(dra):
    [created] = create(dra, job("large-ext-res-dra-job", extended="10", exits_fast=False))
    eventually(
        lambda: EXTENDED in condition(dra.workload_of(created), "QuotaReserved").get("message", ""),
        what="its reason",
    )
    assert not started(dra, created)


def test_should_correctly_mix_resource_claim_template_and_extended_resource_jobs(dra):
    [_, by_template, by_extended] = create(
        dra,
        claim_template("gpu-template", 2),
        job("rct-job", template="gpu-template", exits_fast=False),
        job("ext-job", extended="2", exits_fast=False),
    )
    assert eventually(lambda: usage(dra, by_template), what="the RCT job")["gpu"] == "2"
    assert eventually(lambda: usage(dra, by_extended), what="the ER job")[EXTENDED] == "2"


def test_should_track_resource_claim_template_and_extended_resource_requests_separately(dra):
    [_, created] = create(
        dra,
        claim_template("gpu-template", 2),
        job("mixed-job", template="gpu-template", extended="1"),
    )
    got = eventually(lambda: usage(dra, created), what="quota reserved")
    assert (got["gpu"], got[EXTENDED]) == ("2", "1")


def test_differs_a_job_with_unsatisfiable_cel_selectors_is_admitted(dra):
    """ "Should not admit a job with unsatisfiable CEL selectors to prevent quota leak": Kueue
    finds no device of the cluster's ResourceSlices matching `nonexistent-driver` and keeps it
    out ("insufficient matching devices for CEL selector"). Tower evaluates no CEL, so it
    charges the two GPUs asked for; its pods would wait for kube-scheduler to find a device."""
    cel = 'device.driver == "nonexistent-driver.example.com"'
    [_, created] = create(
        dra,
        claim_template("unmatchable-cel-template", 2, cel),
        job("unmatchable-cel-job", template="unmatchable-cel-template", exits_fast=False),
    )
    assert eventually(lambda: usage(dra, created), what="quota reserved")["gpu"] == "2"

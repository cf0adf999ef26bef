"""Kueue's DRA device quota in the controller, on the API double serving resource.k8s.io/v1
(the real v1.32 control plane does not serve it): Kueue's examples applied unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from extender.core.config.kueue_config import parse
from extender.kube.api.resources import JOBS, RESOURCE_CLAIM_TEMPLATES
from tests import yamlc
from tests.apidouble import resource
from tests.controller.conftest import eventually
from tests.controller.test_kubectl_tower import tower

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "kueue-v0.19.2" / "examples" / "dra"

# The Configuration of tasks/manage/setup_dra.md, step 1.
CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {
        "deviceClassMappings": [
            {"name": "example.com/gpu", "deviceClassNames": ["gpu.example.com"]}
        ]
    },
}


@pytest.fixture
def dra_cluster(cluster):
    resource.serve(cluster.api)
    cluster.apply(*yamlc.safe_load_all((EXAMPLES / "sample-dra-queues.yaml").read_text()))
    return cluster


def example() -> tuple[dict[str, Any], dict[str, Any]]:
    template, job = yamlc.safe_load_all((EXAMPLES / "sample-dra-rct-job.yaml").read_text())
    return template, job


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return {}


def started(cluster: Any, job: dict[str, Any]) -> bool:
    found = cluster.get("jobs", job["metadata"]["name"], "default")
    return found is not None and found["spec"]["suspend"] is False


def test_kueues_dra_example_runs_eight_jobs_on_eight_gpus_and_the_ninth_waits(
    dra_cluster, start_controller
):
    """dra.md's Job, one GPU each, in setup_dra.md's ClusterQueue of 8: eight run and the
    ninth waits for example.com/gpu (not cpu: 9 of 40 would fit), until one is gone."""
    cluster = dra_cluster
    template, job = example()
    cluster.admin.create(RESOURCE_CLAIM_TEMPLATES, template, "default")
    start_controller(resource_policy=parse(CONFIG).resource_policy)
    jobs = [cluster.admin.create(JOBS, job, "default") for _ in range(9)]

    eventually(lambda: sum(started(cluster, j) for j in jobs) == 8, what="eight Jobs to start")
    [waiting] = [j for j in jobs if not started(cluster, j)]
    message = eventually(
        lambda: condition(cluster.workload_of(waiting), "QuotaReserved").get("message"),
        what="the ninth Job's reason",
    )
    assert "example.com/gpu" in message
    admitted = [cluster.workload_of(j) for j in jobs if j is not waiting]
    for workload in admitted:
        [assigned] = workload["status"]["admission"]["podSetAssignments"]
        assert assigned["resourceUsage"]["example.com/gpu"] == "1"
    assert cluster.workload_of(waiting)["spec"]["podSets"][0]["template"]["spec"][
        "resourceClaims"
    ] == [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]

    cluster.admin.delete(JOBS, jobs[0]["metadata"]["name"] if jobs[0] is not waiting
                         else jobs[1]["metadata"]["name"], "default")  # fmt: skip
    eventually(lambda: started(cluster, waiting), what="the ninth Job to start on a freed GPU")


def unmapped_template() -> dict[str, Any]:
    template, _ = example()
    template["metadata"]["name"] = "other-gpu"
    template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = (
        "other.example.com"
    )
    return template


def test_a_claim_of_a_device_class_no_mapping_names_is_inadmissible_and_why_says_so(
    dra_cluster, start_controller
):
    cluster = dra_cluster
    cluster.admin.create(RESOURCE_CLAIM_TEMPLATES, unmapped_template(), "default")
    start_controller(resource_policy=parse(CONFIG).resource_policy)
    _, job = example()
    job["spec"]["template"]["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = "other-gpu"
    created = cluster.admin.create(JOBS, job, "default")
    want = (
        "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: "
        '"DeviceClass other.example.com is not mapped in DRA configuration for podset main"'
    )
    written = eventually(
        lambda: (
            condition(cluster.workload_of(created), "QuotaReserved").get("message") == want
            and condition(cluster.workload_of(created), "QuotaReserved")
        ),
        what="Kueue's message on the Workload",
    )
    assert (written["status"], written["reason"]) == ("False", "Inadmissible")
    assert not started(cluster, created)

    answer = json.loads(tower(cluster, "why", created["metadata"]["name"], "-o", "json").stdout)
    assert (answer["state"], answer["reason"], answer["message"]) == (
        "Pending",
        "Inadmissible",
        want,
    )
    assert "positionInClusterQueue" not in answer  # it waits in no queue
    text = tower(cluster, "why", created["metadata"]["name"]).stdout.splitlines()
    assert text[1] == f"State:       Pending — Inadmissible: {want}"
    assert not any(line.startswith("Position:") for line in text)


def test_a_template_created_after_its_job_is_counted_then(dra_cluster, start_controller):
    cluster = dra_cluster
    start_controller(resource_policy=parse(CONFIG).resource_policy)
    template, job = example()
    created = cluster.admin.create(JOBS, job, "default")
    eventually(
        lambda: (
            'resourceclaimtemplates.resource.k8s.io "single-gpu" not found'
            in condition(cluster.workload_of(created), "QuotaReserved").get("message", "")
        ),
        what="the missing template named",
    )
    cluster.admin.create(RESOURCE_CLAIM_TEMPLATES, template, "default")
    eventually(lambda: started(cluster, created), what="the Job to start once it is there")
    [assigned] = cluster.workload_of(created)["status"]["admission"]["podSetAssignments"]
    assert assigned["resourceUsage"]["example.com/gpu"] == "1"


def test_a_pod_naming_a_resource_claim_is_inadmissible_with_kueues_message(
    dra_cluster, start_controller
):
    cluster = dra_cluster
    start_controller(resource_policy=parse(CONFIG).resource_policy)
    _, job = example()
    job["spec"]["template"]["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimName": "shared-gpu"}
    ]
    created = cluster.admin.create(JOBS, job, "default")
    eventually(
        lambda: (
            condition(cluster.workload_of(created), "QuotaReserved").get("message")
            == "KueueDRAIntegration feature does not support use of resource claims"
        ),
        what="Kueue's message",
    )
    assert not started(cluster, created)


def test_with_the_integration_off_claims_are_not_counted(dra_cluster, start_controller):
    """KueueDRAIntegration and KueueDRARejectWorkloadsWhenDRADisabled off: Kueue ignores the
    claim, so the Job runs with no device quota charged."""
    cluster = dra_cluster
    template, job = example()
    cluster.admin.create(RESOURCE_CLAIM_TEMPLATES, template, "default")
    gates = {
        "KueueDRAIntegration": False,
        "KueueDRAIntegrationExtendedResource": False,
        "KueueDRAIntegrationPartitionableDevices": False,
        "KueueDRARejectWorkloadsWhenDRADisabled": False,
    }
    config = parse({**CONFIG, "featureGates": gates})
    start_controller(resource_policy=config.resource_policy, feature_gates=gates)
    created = cluster.admin.create(JOBS, job, "default")
    eventually(lambda: started(cluster, created), what="the Job to start")
    [assigned] = cluster.workload_of(created)["status"]["admission"]["podSetAssignments"]
    assert "example.com/gpu" not in assigned["resourceUsage"]


def test_where_the_api_server_does_not_serve_v1_a_claim_waits_until_it_does(
    cluster, start_controller
):
    """As on the real v1.32 control plane: no resource.k8s.io/v1, so no template can be read
    (Kueue's client says it in these words); once served (an upgrade), the job runs."""
    cluster.apply(*yamlc.safe_load_all((EXAMPLES / "sample-dra-queues.yaml").read_text()))
    start_controller(resource_policy=parse(CONFIG).resource_policy)
    template, job = example()
    created = cluster.admin.create(JOBS, job, "default")
    eventually(
        lambda: (
            'no matches for kind "ResourceClaimTemplate" in version "resource.k8s.io/v1"'
            in condition(cluster.workload_of(created), "QuotaReserved").get("message", "")
        ),
        what="the kind named as not served",
    )
    resource.serve(cluster.api)
    cluster.admin.create(RESOURCE_CLAIM_TEMPLATES, template, "default")
    eventually(lambda: started(cluster, created), what="the Job to start once v1 is served")

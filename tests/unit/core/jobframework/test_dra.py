"""Kueue's DRA device quota as a policy: a pod set's claims counted, or refused in its words."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.jobframework import dra
from extender.core.jobframework.dra import DevicePolicy, Devices
from extender.core.jobframework.workloads import workload as parse_workload
from extender.core.scheduling.cycle import INADMISSIBLE, ClusterState

MAPPED = DevicePolicy(classes={"gpu.example.com": "example.com/gpu"})


def template(*requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def exactly(device_class: str = "gpu.example.com", **fields: Any) -> dict[str, Any]:
    return {"name": "gpu", "exactly": {"deviceClassName": device_class, **fields}}


def workload(*pod_sets: tuple[str, int, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "default", "uid": "u1"},
        "spec": {
            "queueName": "user-queue",
            "podSets": [
                {
                    "name": name,
                    "count": count,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                            "resourceClaims": claims,
                        }
                    },
                }
                for name, count, claims in pod_sets
            ],
        },
    }


def by_template(name: str = "single-gpu") -> dict[str, Any]:
    return {"name": "gpu", "resourceClaimTemplateName": name}


def found(templates: dict[str, dict[str, Any]]) -> dra.TemplateLookup:
    def lookup(name: str) -> dict[str, Any] | str:
        return templates.get(name) or f'resourceclaimtemplates.resource.k8s.io "{name}" not found'

    return lookup


def devices_of(
    obj: dict[str, Any], templates: dict[str, dict[str, Any]], policy: DevicePolicy = MAPPED
) -> Devices | None:
    return dra.devices(dra.claims(obj), found(templates), policy)


@pytest.mark.parametrize(
    ("requests", "want"),
    [
        ([exactly()], 1),
        ([exactly(count=2)], 2),
        ([exactly(allocationMode="ExactCount", count=3)], 3),
        ([exactly(count=1), {**exactly(count=2), "name": "more"}], 3),
    ],
    ids=[
        "one device when count is left to its default",
        "an exact count of two",
        "allocationMode ExactCount as written",
        "two requests of one class add up",
    ],
)
def test_each_pod_is_charged_the_devices_its_template_asks_for(requests, want):
    obj = workload(("main", 3, [by_template()]))
    got = devices_of(obj, {"single-gpu": template(*requests)})
    assert got == Devices(per_pod={"main": {"example.com/gpu": want}})


def test_the_devices_are_added_to_each_pod_and_counted_for_every_pod_of_the_set():
    obj = workload(("main", 3, [by_template()]), ("other", 1, []))
    got = devices_of(obj, {"single-gpu": template(exactly(count=2))})
    assert got is not None
    model = dra.with_devices(parse_workload(obj), got)
    main, other = model.pod_sets
    assert main.requests == {"cpu": 1000, "example.com/gpu": 2}
    assert main.total() == {"cpu": 3000, "example.com/gpu": 6}
    assert main.pod_requests == {"cpu": 1000}  # a node is asked for no "example.com/gpu"
    assert other.requests == {"cpu": 1000}


def test_two_classes_mapped_to_one_resource_share_its_quota():
    policy = DevicePolicy(classes={"a100.example.com": "gpu", "h100.example.com": "gpu"})
    obj = workload(("main", 1, [by_template("a"), {**by_template("h"), "name": "h"}]))
    templates = {
        "a": template(exactly("a100.example.com")),
        "h": template(exactly("h100.example.com")),
    }
    assert devices_of(obj, templates, policy) == Devices(per_pod={"main": {"gpu": 2}})


def test_a_workload_without_claims_is_left_alone():
    assert devices_of(workload(("main", 1, [])), {}) is None


PATH = "spec.podSets[0].template.spec.resourceClaims[0]"


@pytest.mark.parametrize(
    ("request_", "want"),
    [
        (
            exactly("other.example.com"),
            f'{PATH}.resourceClaimTemplateName: Not found: "DeviceClass other.example.com is '
            'not mapped in DRA configuration for podset main"',
        ),
        (
            exactly(allocationMode="All"),
            f'{PATH}.devices.requests[0].exactly.allocationMode: Invalid value: "All": '
            "ResourceClaimTemplate single-gpu: AllocationMode 'All' is not supported",
        ),
        (
            exactly(adminAccess=True),
            f"{PATH}.devices.requests[0].exactly.adminAccess: Invalid value: null: "
            "ResourceClaimTemplate single-gpu: AdminAccess is not supported",
        ),
        (
            {"name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": "x"}]},
            f"{PATH}.devices.requests[0]: Invalid value: null: ResourceClaimTemplate "
            "single-gpu: FirstAvailable device selection is not supported",
        ),
    ],
    ids=[
        "a device class no mapping names",
        "allocationMode All",
        "admin access",
        "a prioritized list (firstAvailable)",
    ],
)
def test_a_claim_kueue_cannot_count_makes_the_workload_inadmissible(request_, want):
    obj = workload(("main", 1, [by_template()]))
    assert devices_of(obj, {"single-gpu": template(request_)}) == Devices(refusal=want)


def test_a_missing_template_is_said_with_the_clients_words():
    obj = workload(("main", 1, [by_template("gone")]))
    got = devices_of(obj, {})
    assert got == Devices(
        refusal=f"{PATH}: Internal error: failed to get claim spec for ResourceClaimTemplate "
        'gone in podset main: resourceclaimtemplates.resource.k8s.io "gone" not found'
    )


def test_a_named_resource_claim_is_not_supported():
    obj = workload(("main", 1, [by_template(), {"name": "shared", "resourceClaimName": "c"}]))
    got = devices_of(obj, {"single-gpu": template(exactly())})
    assert got == Devices(refusal=dra.CLAIMS_MESSAGE)
    assert (
        dra.CLAIMS_MESSAGE == "KueueDRAIntegration feature does not support use of resource claims"
    )


@pytest.mark.parametrize(
    ("gates", "want"),
    [
        ({"KueueDRAIntegration": False}, Devices(refusal=dra.DISABLED_MESSAGE)),
        (
            {"KueueDRAIntegration": False, "KueueDRARejectWorkloadsWhenDRADisabled": False},
            None,
        ),
    ],
    ids=[
        "gate off: inadmissible, as KueueDRARejectWorkloadsWhenDRADisabled says by default",
        "gate off and rejection off: claims ignored, no device quota",
    ],
)
def test_with_the_integration_off_claims_are_refused_or_ignored(gates, want):
    obj = workload(("main", 1, [by_template()]))
    policy = DevicePolicy.of(gates, MAPPED.classes)
    assert devices_of(obj, {"single-gpu": template(exactly())}, policy) == want


def test_a_refused_workload_waits_inadmissible_with_kueues_message():
    obj = workload(("main", 1, [by_template()]))
    got = devices_of(obj, {"single-gpu": template(exactly("other.example.com"))})
    assert got is not None
    model = dra.with_devices(parse_workload(obj), got)
    state = ClusterState()
    state.add_workload(model)
    status = state.pending_status(model.key)
    assert status.reason == INADMISSIBLE
    assert "DeviceClass other.example.com is not mapped" in status.message


def test_the_cache_indexes_workloads_by_the_templates_they_claim_through():
    obj = workload(("main", 1, [by_template("a")]), ("w", 2, [by_template("b"), by_template("a")]))
    assert dra.template_keys(obj) == ["default/a", "default/b"]
    assert dra.template_keys(object()) == []

"""Kueue's ProvisioningRequest admission check as a policy (extender/core/admission/provisioning.py):
the config, the names, what is asked for, and how the request's conditions set the check."""

from __future__ import annotations

from typing import Any

import pytest

from extender.core.admission import checks as ac
from extender.core.admission import provisioning as p
from extender.core.admission.checks import CheckState
from extender.core.api.parse import ManifestError

CONFIG = p.ProvisioningConfig(
    "cfg",
    "check-capacity.autoscaling.x-k8s.io",
    {"a": "1"},
    frozenset({"nvidia.com/gpu"}),
    p.RetryStrategy(limit=2, base=10, cap=25),
    (("cloud.example/pool", "PoolName"),),
)


def config_obj(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ProvisioningRequestConfig",
        "metadata": {"name": "cfg"},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", **spec},
    }


def test_a_config_gets_kueues_retry_defaults():
    config = p.parse_config(config_obj())
    assert config.retry == p.RetryStrategy(3, 60, 1800)
    assert config.managed_resources == frozenset()
    assert config.merge_policy is None


@pytest.mark.parametrize(
    ("spec", "path"),
    [
        ({"provisioningClassName": ""}, "spec.provisioningClassName"),
        ({"retryStrategy": {"backoffLimitCount": -1}}, "spec.retryStrategy.backoffLimitCount"),
        ({"podSetMergePolicy": "Anything"}, "spec.podSetMergePolicy"),
        ({"podSetUpdates": {"nodeSelector": [{"key": "k"}]}}, "spec.podSetUpdates.nodeSelector[0]"),
        ({"parameters": ["a"]}, "spec.parameters"),
    ],
)
def test_a_bad_config_names_the_field(spec, path):
    with pytest.raises(ManifestError) as err:
        p.parse_config(config_obj(**spec))
    assert err.value.path == path


@pytest.mark.parametrize(
    ("parameters", "error"),
    [
        (None, "missing parameters reference"),
        (
            ("kueue.x-k8s.io", "ProvisioningRequestConfig", ""),
            "empty name: bad parameters reference",
        ),
        (
            ("bad.group", "ProvisioningRequestConfig", "cfg"),
            'wrong group "bad.group", expecting "kueue.x-k8s.io": bad parameters reference',
        ),
        (
            ("kueue.x-k8s.io", "BadKind", "cfg"),
            'wrong kind "BadKind", expecting "ProvisioningRequestConfig": bad parameters reference',
        ),
        (("kueue.x-k8s.io", "ProvisioningRequestConfig", "cfg"), None),
    ],
)
def test_the_parameters_reference(parameters, error):
    assert p.parameters_ref_error(parameters) == error


def test_names_and_attempts():
    assert p.request_name("wl", "check", 3) == "wl-check-3"
    assert p.template_name("wl-check-3", "main") == "ppt-wl-check-3-main"
    assert p.attempt_of("wl-check-3", "wl", "check") == 3
    assert p.attempt_of("wl-other-3", "wl", "check") is None
    assert p.attempt_of("wl-check-x", "wl", "check") is None
    long = p.request_name("w" * 250, "check", 1)
    assert len(long) == 253
    assert long[:247] == ("w" * 250 + "-check-1")[:247]


def pod_set(name: str, count: int, resources: dict[str, Any], **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "resources": resources}
    return {"name": name, "count": count, "template": {"spec": {"containers": [container], **spec}}}


GPU = {"limits": {"nvidia.com/gpu": 1}}
CPU = {"requests": {"cpu": "1"}}


def test_only_pod_sets_with_admitted_pods_that_use_a_managed_resource_are_asked_for():
    sets = [pod_set("a", 2, GPU), pod_set("b", 3, CPU), pod_set("c", 4, GPU)]
    got = p.requested_pod_sets(sets, {"a": 2, "b": 3, "c": 0}, CONFIG)
    assert [(g.name, g.count) for g in got] == [("a", 2)]
    everything = p.ProvisioningConfig("cfg", "x", {})
    got = p.requested_pod_sets(sets, {"a": 2, "b": 3, "c": 4}, everything)
    assert [(g.name, g.count) for g in got] == [("a", 2), ("b", 3), ("c", 4)]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (None, [("a", 1), ("b", 2), ("c", 3)]),
        (p.IDENTICAL_TEMPLATES, [("a", 3), ("c", 3)]),
        (p.IDENTICAL_REQUIREMENTS, [("a", 6)]),  # names and images aside, they ask alike
    ],
)
def test_pod_sets_are_merged_by_the_configs_policy(policy, expected):
    sets = [
        pod_set("a", 1, GPU),
        pod_set("b", 2, GPU),
        {
            **pod_set("c", 3, GPU),
            "template": {"spec": {"containers": [{"name": "other", "resources": GPU}]}},
        },
    ]
    config = p.ProvisioningConfig("cfg", "x", {}, merge_policy=policy)
    got = p.requested_pod_sets(sets, {"a": 1, "b": 2, "c": 3}, config)
    assert [(g.name, g.count) for g in got] == expected


def test_annotations_override_the_configs_parameters():
    annotations = {"provreq.kueue.x-k8s.io/a": "2", "provreq.kueue.x-k8s.io/b": "3", "x": "y"}
    assert p.effective_parameters(CONFIG, annotations) == {"a": "2", "b": "3"}


def request(*conditions: tuple[str, str, str], details: dict[str, str] | None = None) -> dict:
    return {
        "metadata": {"name": "wl-check-1"},
        "spec": {"provisioningClassName": CONFIG.class_name, "parameters": {"a": "1"}},
        "status": {
            "conditions": [{"type": t, "status": s, "message": m} for t, s, m in conditions],
            "provisioningClassDetails": details or {},
        },
    }


REQUESTED = [p.RequestedPodSet("main", {}, 3)]
PENDING = CheckState("check")


@pytest.mark.parametrize(
    ("current", "req", "attempt", "admitted", "expected"),
    [
        (PENDING, request(), 1, False, p.StateChange(ac.PENDING, "")),
        (
            PENDING,
            request(("Accepted", "True", ""), ("Provisioned", "False", "ETA 10:36")),
            1,
            False,
            p.StateChange(ac.PENDING, "ETA 10:36"),
        ),
        (PENDING, request(("Accepted", "True", "")), 1, False, None),
        (
            PENDING,
            request(("Failed", "True", "no capacity")),
            1,
            False,
            p.StateChange(ac.RETRY, "Retrying after failure: no capacity", 10),
        ),
        (  # the second retry waits twice as long
            CheckState("check", retry_count=1),
            request(("Failed", "True", "no capacity")),
            2,
            False,
            p.StateChange(ac.RETRY, "Retrying after failure: no capacity", 20),
        ),
        (  # past backoffLimitCount: rejected
            CheckState("check", retry_count=2),
            request(("Failed", "True", "no capacity")),
            3,
            False,
            p.StateChange(ac.REJECTED, "no capacity"),
        ),
        (  # an old attempt's failure after the eviction counted it: only the message
            CheckState("check", retry_count=1),
            request(("Failed", "True", "old")),
            1,
            False,
            p.StateChange(ac.PENDING, "Retrying after failure: old"),
        ),
        (
            PENDING,
            request(("BookingExpired", "True", "expired")),
            1,
            False,
            p.StateChange(ac.RETRY, "Retrying after booking expired: expired", 10),
        ),
        (  # once admitted, an expired booking no longer matters
            CheckState("check", ac.READY),
            request(("Provisioned", "True", ""), ("BookingExpired", "True", "expired")),
            1,
            True,
            None,
        ),
        (  # revoked capacity rejects even a running workload
            CheckState("check", ac.READY),
            request(("Provisioned", "True", ""), ("CapacityRevoked", "True", "revoked")),
            1,
            True,
            p.StateChange(ac.REJECTED, "revoked"),
        ),
        (CheckState("check", ac.READY), request(("Provisioned", "True", "")), 1, True, None),
    ],
)
def test_the_requests_conditions_set_the_check(current, req, attempt, admitted, expected):
    got = p.check_state(
        current, req, attempt, CONFIG, admitted=admitted, active=True, requested=REQUESTED
    )
    assert got == expected


def test_a_provisioned_request_makes_the_pods_consume_it():
    got = p.check_state(
        PENDING,
        request(("Provisioned", "True", "ok"), details={"PoolName": "pool-7"}),
        1,
        CONFIG,
        admitted=False,
        active=True,
        requested=REQUESTED,
    )
    assert got == p.StateChange(
        ac.READY,
        "ok",
        None,
        (
            {
                "name": "main",
                "annotations": {
                    p.CONSUME_ANNOTATION: "wl-check-1",
                    p.CLASS_ANNOTATION: CONFIG.class_name,
                },
                "nodeSelector": {"cloud.example/pool": "pool-7"},
            },
        ),
    )


def test_backoff_doubles_up_to_the_cap():
    retry = p.RetryStrategy(limit=5, base=10, cap=25)
    assert [p.backoff_seconds(retry, n) for n in range(4)] == [10, 20, 25, 25]
    assert p.backoff_seconds(p.RetryStrategy(2, 0, 1800), 3) == 0


def test_a_pod_template_carries_the_flavors_placement_and_requests_its_limits():
    template = {
        "spec": {
            "nodeSelector": {"zone": "a"},
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}],
        }
    }
    out = p.template_for(template, {"pool": "gpu"}, [{"key": "gpu", "operator": "Exists"}])
    assert out["spec"]["nodeSelector"] == {"zone": "a", "pool": "gpu"}
    assert out["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": 1}
    assert "requests" not in template["spec"]["containers"][0]["resources"]  # not changed
    with pytest.raises(ManifestError):
        p.template_for(template, {"zone": "b"}, [])

"""kueuectl's flag values as `kubectl tower` reads them, kubectl's AGE and pod STATUS."""

from __future__ import annotations

import pytest

from extender.kube.plugin.output import CliError, human_duration
from extender.kube.plugin.pods import pod_status
from extender.kube.plugin.specs import (
    canonical_quantity,
    key_values,
    resource_groups,
    taints,
    tolerations,
)


@pytest.mark.parametrize(
    ("given", "want"),
    [
        ("9", "9"), ("1000m", "1"), ("1.5", "1500m"), ("0.1", "100m"), ("1500", "1500"),
        ("2000000", "2M"), ("1k", "1k"), ("36Gi", "36Gi"), ("1024Mi", "1Gi"),
        ("1536Mi", "1536Mi"), ("0.5Gi", "512Mi"), ("1Ki", "1Ki"), ("1023Ki", "1023Ki"),
        ("512Mi", "512Mi"), ("1e3", "1e3"), ("12e2", "1200"), ("1.5e3", "1500"), ("0", "0"),
        ("1E", "1E"), ("100n", "100n"),
    ],
)  # fmt: skip
def test_a_quantity_is_spelled_as_gos_resource_quantity_spells_it(given, want):
    assert canonical_quantity(given) == want


def test_quotas_of_one_flavor_merge_and_flavors_of_the_same_resources_share_a_group():
    groups = resource_groups(
        {
            "nominal-quota": [
                "alpha:cpu=9;memory=36Gi,beta:cpu=18;memory=72Gi",
                "gpu:nvidia.com/gpu=8",
            ],
            "borrowing-limit": ["alpha:memory=1Gi;cpu=1"],
            "lending-limit": ["gpu:nvidia.com/gpu=2"],
        }
    )
    assert groups == [
        {"coveredResources": ["cpu", "memory"], "flavors": [
            {"name": "alpha", "resources": [
                {"name": "cpu", "nominalQuota": "9", "borrowingLimit": "1"},
                {"name": "memory", "nominalQuota": "36Gi", "borrowingLimit": "1Gi"}]},
            {"name": "beta", "resources": [
                {"name": "cpu", "nominalQuota": "18"}, {"name": "memory", "nominalQuota": "72Gi"}]},
        ]},
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [
            {"name": "gpu", "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": "8", "lendingLimit": "2"}]}]},
    ]  # fmt: skip


def test_a_limit_without_a_nominal_quota_has_kueuectls_zero_quota():
    assert resource_groups({"borrowing-limit": ["alpha:cpu=2"]})[0]["flavors"][0] == {
        "name": "alpha",
        "resources": [{"name": "cpu", "nominalQuota": "0", "borrowingLimit": "2"}],
    }


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        ({"nominal-quota": ["alpha:cpu=1;memory=1Gi", "beta:cpu=1"]},
         "--nominal-quota: flavor beta covers cpu and flavor alpha covers cpu, memory: flavors "
         "share all of their resources or none"),
        ({"nominal-quota": ["alpha:cpu=1;cpu=2"]}, "--nominal-quota alpha:cpu=1;cpu=2: cpu is "
         "named twice"),
        ({"nominal-quota": ["alpha:cpu=-1"]}, "--nominal-quota alpha:cpu=-1: cpu must not be "
         "negative"),
        ({"nominal-quota": ["Alpha:cpu=1"]}, "--nominal-quota Alpha:cpu=1: must be "
         "FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...]"),
        ({"lending-limit": ["alpha:cpu=1mb"]}, "--lending-limit alpha:cpu=1mb: 1mb is not a "
         "quantity"),
    ],
)  # fmt: skip
def test_a_bad_quota_names_the_flag_and_the_value(flags, error):
    with pytest.raises(CliError) as raised:
        resource_groups(flags)
    assert str(raised.value) == error


def test_taints_and_tolerations_read_as_kueuectl_reads_them():
    assert taints(["key1=value:NoSchedule,key2:NoExecute"]) == [
        {"key": "key1", "value": "value", "effect": "NoSchedule"},
        {"key": "key2", "effect": "NoExecute"},
    ]
    assert tolerations(
        ["key1=value:NoSchedule,key2:NoExecute,key3=value,key4,:PreferNoSchedule"]
    ) == [
        {"key": "key1", "operator": "Equal", "value": "value", "effect": "NoSchedule"},
        {"key": "key2", "operator": "Exists", "effect": "NoExecute"},
        {"key": "key3", "operator": "Equal", "value": "value"},
        {"key": "key4", "operator": "Exists"},
        {"operator": "Exists", "effect": "PreferNoSchedule"},
    ]
    assert key_values("node-labels", ["kubernetes.io/arch=arm64,kubernetes.io/os=linux"]) == {
        "kubernetes.io/arch": "arm64",
        "kubernetes.io/os": "linux",
    }


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: taints(["gpu"]), "--node-taints gpu: invalid taint spec (KEY[=VALUE]:EFFECT)"),
        (lambda: taints(["a:NoSchedule,a=b:NoSchedule"]), "--node-taints a=b:NoSchedule: a taint "
         "with key a and effect NoSchedule is given twice"),
        (lambda: tolerations(["a:b:c"]), "--tolerations a:b:c: invalid spec (KEY[=VALUE]:EFFECT)"),
        (lambda: key_values("node-labels", ["zone"]), "--node-labels zone: zone must be "
         "KEY=VALUE"),
        (lambda: key_values("node-labels", ["-bad=x"]), "--node-labels -bad=x: -bad is not a "
         "valid label key"),
        (lambda: key_values("node-labels", ["ok=not ok"]), "--node-labels ok=not ok: not ok is "
         "not a valid label value"),
    ],
)  # fmt: skip
def test_a_bad_taint_toleration_or_label_names_the_flag_and_the_value(call, error):
    with pytest.raises(CliError) as raised:
        call()
    assert str(raised.value) == error


@pytest.mark.parametrize(
    ("seconds", "want"),
    [
        (-5, "<invalid>"), (-1, "0s"), (46, "46s"), (119, "119s"), (303, "5m3s"), (600, "10m"),
        (7800, "130m"), (7830, "130m"), (11400, "3h10m"), (28800, "8h"), (3 * 86400, "3d"),
        (3 * 86400 + 4 * 3600, "3d4h"), (10 * 86400 + 12 * 3600, "10d"),
        (800 * 86400, "2y70d"), (3000 * 86400, "8y"),
    ],
)  # fmt: skip
def test_age_is_spelled_as_kubectl_spells_it(seconds, want):
    assert human_duration(seconds) == want


def _pod(**status):
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}, "status": status}


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        (_pod(phase="Pending", conditions=[{"type": "PodScheduled", "status": "False",
                                            "reason": "SchedulingGated"}]), "SchedulingGated"),
        (_pod(phase="Pending", containerStatuses=[{"name": "c", "state": {"waiting": {
            "reason": "ContainerCreating"}}}]), "ContainerCreating"),
        (_pod(phase="Running", containerStatuses=[{"name": "c", "ready": True,
                                                   "state": {"running": {}}}]), "Running"),
        (_pod(phase="Failed", containerStatuses=[{"name": "c", "state": {"terminated": {
            "exitCode": 137, "signal": 9}}}]), "Signal:9"),
        (_pod(phase="Succeeded", containerStatuses=[{"name": "c", "state": {"terminated": {
            "exitCode": 0, "reason": "Completed"}}}]), "Completed"),
        ({"metadata": {"name": "p"}, "spec": {"initContainers": [{"name": "i"}],
          "containers": [{"name": "c"}]}, "status": {"phase": "Pending",
          "initContainerStatuses": [{"name": "i", "state": {"running": {}}}]}}, "Init:0/1"),
        ({"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
          "status": {"phase": "Running"}}, "Terminating"),
    ],
)  # fmt: skip
def test_pod_status_is_kubectls(pod, want):
    assert pod_status(pod) == want

"""The feature-gate table against Kueue v0.19.2's own source, and the gates resolved as asked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from extender.core.config.feature_gates import BY_NAME, GATES, Stage, Stand
from extender.core.config.gates import DEPENDENCIES, defaults, merge, parse_flag, resolve
from extender.core.config.schema import ConfigError

SOURCE = Path(__file__).resolve().parents[3] / "data" / "kueue-features" / "kube_features.go"
_CONST = re.compile(r"^\t(\w+) featuregate\.Feature = \"(\w+)\"", re.M)
_ENTRY = re.compile(r"^\t(\w+): \{\n(.*?)^\t\},", re.M | re.S)
_SPEC = re.compile(
    r"\{Version: version\.MustParse\(\"([\d.]+)\"\), Default: (true|false), "
    r"PreRelease: featuregate\.(\w+)(, LockToDefault: true)?\}"
)


def kueue_gates() -> dict[str, tuple[bool, str, bool]]:
    """Each gate of the Go source: (default, stage, locked) at its last versioned spec, the one
    in force at v0.19 and since."""
    text = SOURCE.read_text()
    names = dict(_CONST.findall(text))
    table = text[text.index("var defaultVersionedFeatureGates") :]
    gates = {}
    for const, body in _ENTRY.findall(table):
        specs = _SPEC.findall(body)
        assert specs, const
        _version, default, stage, locked = specs[-1]
        gates[names[const]] = (default == "true", stage, bool(locked))
    assert set(gates) == set(names.values())  # every const has its specs
    return gates


def test_the_table_has_every_gate_of_kueue_with_its_default_stage_and_lock():
    want = kueue_gates()
    assert len(want) > 80  # the parse found the table, not a fragment of it
    got = {g.name: (g.default, str(g.stage), g.locked) for g in GATES}
    assert got == want
    assert [g.name for g in GATES] == list(BY_NAME)  # no name twice


def test_every_gate_says_what_tower_does_and_the_dependencies_name_real_gates():
    for gate in GATES:
        assert gate.tower, gate.name
        assert not gate.tower.endswith("."), gate.name
    for name, needs in DEPENDENCIES:
        assert name in BY_NAME
        assert all(n in BY_NAME for n in needs)


def test_the_gates_tower_acts_on_are_the_metrics_and_node_failure_ones():
    assert {g.name for g in GATES if g.stand is Stand.IMPLEMENTED} == {
        "LocalQueueMetrics",
        "MetricsForCohorts",
        "MetricForWorkloadCreationLatency",
        "TASReplaceNodeOnPodTermination",
        "TASReplaceNodeOnNodeTaints",
        "TASReplaceNodeDueToNotReadyOverFixedTime",
        "SkipReassignmentForPodOwnedWorkloads",
        "DisableWaitForPodsReady",
        "FairSharingPreemptWithinNominal",
        "QuotaCheckStrategy",
        "WorkloadPriorityClassDefaulting",
        "ReclaimablePods",
        "KueueDRAIntegration",
        "KueueDRARejectWorkloadsWhenDRADisabled",
        "ElasticJobsViaWorkloadSlices",
        "FlavorFungibilityPreserveScanProgress",
        "CustomMetricLabels",
        "FailureRecoveryPolicy",
        "MultiKueueClusterProfile",
        "SparkApplicationIntegration",
        "ConcurrentAdmission",
        "MultiKueueManagerQuotaAutomation",
        "WorkloadIdentifierAnnotations",
        "MultiKueueOrchestratedPreemption",
    }


@pytest.mark.parametrize(
    ("flag", "want"),
    [
        ("", {}),
        ("LocalQueueMetrics=false", {"LocalQueueMetrics": False}),
        (" A = true ,B=false,", {"A": True, "B": False}),
        ("A=1,B=F,C=TRUE,D=f", {"A": True, "B": False, "C": True, "D": False}),
    ],
    ids=["nothing", "one gate", "spaces and a trailing comma", "Go's other booleans"],
)
def test_the_flag_is_read_as_component_base_reads_it(flag, want):
    assert parse_flag(flag) == want


@pytest.mark.parametrize(
    ("flag", "want_error"),
    [
        ("LocalQueueMetrics", "missing bool value for LocalQueueMetrics"),
        (
            "LocalQueueMetrics=yes",
            'invalid value of LocalQueueMetrics=yes, err: strconv.ParseBool: parsing "yes": '
            "invalid syntax",
        ),
    ],
    ids=["no value", "not a Go boolean"],
)
def test_a_flag_kueue_cannot_read_is_refused_in_its_words(flag, want_error):
    with pytest.raises(ConfigError) as err:
        parse_flag(flag)
    assert str(err.value) == want_error


@pytest.mark.parametrize(
    ("asked", "want_changed"),
    [
        ({}, {}),
        ({"LocalQueueMetrics": False}, {"LocalQueueMetrics": False}),
        (
            {"TASReplaceNodeDueToNotReadyOverFixedTime": True},
            {"TASReplaceNodeDueToNotReadyOverFixedTime": True},
        ),
        ({"PartialAdmission": True, "HierarchicalCohorts": True}, {}),
        ({"ElasticJobsViaWorkloadSlices": False}, {"ElasticJobsViaWorkloadSlices": False}),
        ({"TASCacheTopologyTree": True}, {"TASCacheTopologyTree": True}),
        ({"AllAlpha": False}, {}),
        ({"ObjectRetentionPolicies": True, "ReclaimablePods": False}, {"ReclaimablePods": False}),
    ],
    ids=[
        "nothing asked: Kueue's defaults",
        "an implemented gate off",
        "an implemented gate on",
        "gates asked to be what Tower does anyway",
        "an absent gate asked off",
        "an internal gate either way",
        "AllAlpha=false: every alpha gate is off already",
        "a GA gate Tower follows asked on, an implemented Beta gate off",
    ],
)
def test_gates_tower_can_honour_are_resolved(asked, want_changed):
    got = resolve(asked)
    assert set(got) == set(BY_NAME)
    assert {n: v for n, v in got.items() if v != BY_NAME[n].default} == want_changed


@pytest.mark.parametrize(
    ("asked", "want_error"),
    [
        ({"NoSuchGate": True}, "unrecognized feature gate: NoSuchGate"),
        (
            {"ManagedJobsNamespaceSelectorAlwaysRespected": False},
            "cannot set feature gate ManagedJobsNamespaceSelectorAlwaysRespected to false, "
            "feature is locked to true",
        ),
        (
            {"MultiKueueAllowInsecureKubeconfigs": True},
            "cannot set feature gate MultiKueueAllowInsecureKubeconfigs to true, "
            "feature is locked to false",
        ),
        (
            {"TopologyAwareScheduling": False},
            "TASHandleOverlappingFlavors requires TopologyAwareScheduling to be enabled",
        ),
        (
            {"UnadmittedWorkloadsExplicitStatus": True},
            "UnadmittedWorkloadsExplicitStatus requires UnadmittedWorkloadsObservability "
            "to be enabled",
        ),
        (
            {"ElasticJobsViaWorkloadSlicesWithTAS": True},
            "feature gate ElasticJobsViaWorkloadSlicesWithTAS=true is not supported: Tower "
            "places a scale-up slice's pods on topology domains afresh (the old slice's kept)",
        ),
        (
            {"PartialAdmission": False},
            "feature gate PartialAdmission=false is not supported: Tower admits down to a "
            "podSet's minCount",
        ),
        (
            {"AllBeta": False},
            "feature gate PartialAdmission=false (from AllBeta=false) is not supported: Tower "
            "admits down to a podSet's minCount",
        ),
    ],
    ids=[
        "an unknown name: Kueue's error",
        "a GA gate locked on, asked off: Kueue's error",
        "a deprecated gate locked off, asked on: Kueue's error",
        "a gate whose dependents are on: Kueue's error",
        "a gate whose dependency is off: Kueue's error",
        "an absent gate asked on",
        "an always gate asked away from its default",
        "AllBeta=false reaches a gate Tower cannot turn off",
    ],
)
def test_gates_kueue_or_tower_refuses_are_one_line(asked, want_error):
    with pytest.raises(ConfigError) as err:
        resolve(asked)
    assert str(err.value) == want_error


def test_the_flag_wins_over_the_file_gate_by_gate():
    file = {"LocalQueueMetrics": False, "MetricsForCohorts": False}
    got = resolve(merge(file, parse_flag("MetricsForCohorts=true")))
    assert (got["LocalQueueMetrics"], got["MetricsForCohorts"]) == (False, True)


def test_every_gate_tower_honours_only_one_way_refuses_the_other():
    for gate in GATES:
        if gate.locked:  # Kueue refuses the other way first
            continue
        can = gate.tower_value
        dependents_on = [
            d for d, needs in DEPENDENCIES if gate.name in needs and BY_NAME[d].default
        ]
        if can is None:
            if gate.default and dependents_on:  # KueueDRAIntegration: its sub-gates need it
                with pytest.raises(ConfigError, match=" requires "):
                    resolve({gate.name: False})
                continue
            assert resolve({gate.name: not gate.default})[gate.name] is (not gate.default)
            continue
        if can != gate.default and dependents_on:
            # As in Kueue, turning it off may leave a gate that needs it on (DRA's sub-gates).
            with pytest.raises(ConfigError, match=" requires "):
                resolve({gate.name: can})
        else:
            assert resolve({gate.name: can})[gate.name] is can
        with pytest.raises(ConfigError, match=f"^(feature gate {gate.name}=|.* requires )"):
            resolve({gate.name: not can})


def test_without_asking_every_gate_is_at_kueues_default():
    assert resolve({}) == defaults()
    assert all(g.locked for g in GATES if g.stage is Stage.GA)  # Kueue locks its GA gates

"""Kueue's feature gates as asked (featureGates, --feature-gates), checked and resolved per gate.

Kueue's own refusals come first, in k8s.io/component-base's words: an unknown name, a gate
locked to its default asked the other way, a gate whose dependency is off. Then Tower's: a gate
asked to be what Tower cannot do is one line naming it and what Tower does instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from extender.core.config.feature_gates import BY_NAME, GATES, Stage
from extender.core.config.schema import ConfigError

# component-base's special gates: each sets every gate of its stage that is not named.
_ALL = {"AllAlpha": Stage.ALPHA, "AllBeta": Stage.BETA}

# Kueue's LoadAndValidateFeatureGates (pkg/config/validation.go): a gate that needs others on.
DEPENDENCIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("TASHandleOverlappingFlavors", ("TopologyAwareScheduling",)),
    ("TASFailedNodeReplacement", ("TopologyAwareScheduling",)),
    ("TASFailedNodeReplacementFailFast", ("TopologyAwareScheduling", "TASFailedNodeReplacement")),
    ("TASReplaceNodeOnPodTermination", ("TopologyAwareScheduling", "TASFailedNodeReplacement")),
    (
        "TASReplaceNodeDueToNotReadyOverFixedTime",
        ("TopologyAwareScheduling", "TASFailedNodeReplacement"),
    ),
    ("TASBalancedPlacement", ("TopologyAwareScheduling",)),
    ("TASReplaceNodeOnNodeTaints", ("TopologyAwareScheduling",)),
    ("TASMultiLayerTopology", ("TopologyAwareScheduling",)),
    ("TASRespectNodeAffinityPreferred", ("TopologyAwareScheduling",)),
    ("TASRecomputeAssignmentWithinSchedulingCycle", ("TopologyAwareScheduling",)),
    ("UnadmittedWorkloadsExplicitStatus", ("UnadmittedWorkloadsObservability",)),
    (
        "ElasticJobsViaWorkloadSlicesWithTAS",
        ("ElasticJobsViaWorkloadSlices", "TopologyAwareScheduling"),
    ),
    ("KueueDRAIntegrationExtendedResource", ("KueueDRAIntegration",)),
    ("KueueDRAIntegrationPartitionableDevices", ("KueueDRAIntegration",)),
    ("KueueDRAIntegrationConsumableCapacity", ("KueueDRAIntegration",)),
)

_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def defaults() -> dict[str, bool]:
    """Every gate of Kueue v0.19.2 at its default."""
    return {g.name: g.default for g in GATES}


def parse_flag(text: str) -> dict[str, bool]:
    """`Name=true,Other=false` as component-base's feature gate flag reads it (Go's booleans)."""
    asked: dict[str, bool] = {}
    for item in text.split(","):
        if not item:
            continue
        name, eq, raw = item.partition("=")
        name = name.strip()
        if not eq:
            raise ConfigError(f"missing bool value for {name}")
        value = raw.strip()
        if value not in _TRUE + _FALSE:
            raise ConfigError(
                f'invalid value of {name}={value}, err: strconv.ParseBool: parsing "{value}": '
                "invalid syntax"
            )
        asked[name] = value in _TRUE
    return asked


def _word(value: bool) -> str:
    return "true" if value else "false"


def resolve(asked: Mapping[str, bool]) -> dict[str, bool]:
    """Every gate's value once `asked` is applied to the defaults; ConfigError (one line) if
    Kueue would refuse what is asked, or if Tower cannot do it."""
    for name, value in asked.items():
        gate = BY_NAME.get(name)
        if gate is None and name not in _ALL:
            raise ConfigError(f"unrecognized feature gate: {name}")
        if gate is not None and gate.locked and value != gate.default:
            raise ConfigError(
                f"cannot set feature gate {name} to {_word(value)}, feature is locked to "
                f"{_word(gate.default)}"
            )
    values = defaults()
    origin = {name: f"{name}={_word(v)}" for name, v in asked.items()}
    for special, stage in _ALL.items():
        if special in asked:
            for g in GATES:
                if g.stage is stage and g.name not in asked:
                    values[g.name] = asked[special]
                    origin[g.name] = f"{special}={_word(asked[special])}"
    values.update((n, v) for n, v in asked.items() if n not in _ALL)
    for gate_name, needs in DEPENDENCIES:
        for need in needs:
            if values[gate_name] and not values[need]:
                raise ConfigError(f"{gate_name} requires {need} to be enabled")
    for gate in GATES:
        can = gate.tower_value
        if gate.name in origin and can is not None and values[gate.name] != can:
            via = origin[gate.name]
            why = "" if via.startswith(gate.name + "=") else f" (from {via})"
            raise ConfigError(
                f"feature gate {gate.name}={_word(values[gate.name])}{why} is not supported: "
                f"Tower {gate.tower}"
            )
    return values


def merge(file: Mapping[str, bool], flag: Mapping[str, bool]) -> dict[str, bool]:
    """The file's gates with the flag's on top, gate by gate (Kueue refuses both at once;
    Tower lets a flag override the file, as every other flag does)."""
    return {**file, **flag}

"""The Configuration file's schema: every field Kueue v0.19.2 reads, checked as its decoder does.

Kueue decodes the file strictly: a field it does not have, or a value of the wrong type,
refuses the whole file. `check` does the same, with one line that names the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from extender.core.api.quantity import QuantityError, parse_quantity

GROUP = "config.kueue.x-k8s.io"
V1BETA2 = f"{GROUP}/v1beta2"
V1BETA1 = f"{GROUP}/v1beta1"
KIND = "Configuration"


class ConfigError(ValueError):
    """A Configuration Tower refuses: one line naming the field."""


# The schema: a leaf checks one value; a dict is a struct (its keys are the only fields
# allowed, as Kueue's strict decoder allows no others); ListOf and MapOf hold their items'.
@dataclass(frozen=True, slots=True)
class Leaf:
    what: str  # "a string": how an error names what was expected
    ok: Callable[[Any], bool]


@dataclass(frozen=True, slots=True)
class ListOf:
    item: Spec


@dataclass(frozen=True, slots=True)
class MapOf:
    value: Spec


Spec = Leaf | ListOf | MapOf | dict[str, Any]

# Go's time.ParseDuration: "1h30m", "5m", "0.5s", "0"; a bare number other than 0 is refused.
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1,
    "m": 60,
    "h": 3600,
}


def duration_seconds(text: str) -> float | None:
    """Seconds of a Go duration string, or None when it is not one."""
    sign, body = (-1.0, text[1:]) if text[:1] == "-" else (1.0, text.removeprefix("+"))
    if body == "0":
        return 0.0
    total, at = 0.0, 0
    for match in _DURATION_PART.finditer(body):
        if match.start() != at:
            return None
        total += float(match[1]) * _UNIT_SECONDS[match[2]]
        at = match.end()
    return sign * total if body and at == len(body) else None


def _is_int(v: Any) -> bool:
    # YAML's true is a Python int; Go's decoder refuses a bool, and a float, for an integer.
    return isinstance(v, int) and not isinstance(v, bool) and -(2**31) <= v < 2**31


def _is_quantity(v: Any) -> bool:
    try:
        parse_quantity(v)
    except QuantityError:
        return False
    return True


STR = Leaf("a string", lambda v: isinstance(v, str))
BOOL = Leaf("true or false", lambda v: isinstance(v, bool))
INT = Leaf("a whole number", _is_int)
INT64 = Leaf("a whole number", lambda v: isinstance(v, int) and not isinstance(v, bool))
NUMBER = Leaf(
    "a number", lambda v: isinstance(v, int | float) and not isinstance(v, bool) and v == v
)
DURATION = Leaf(
    "a duration such as 90s or 5m",
    lambda v: isinstance(v, str) and duration_seconds(v) is not None,
)
QUANTITY = Leaf("a quantity such as 5Gi", _is_quantity)
OPAQUE = Leaf("a mapping", lambda v: isinstance(v, Mapping))  # checked by no one here
STRINGS = ListOf(STR)

LABEL_SELECTOR: dict[str, Any] = {
    "matchLabels": MapOf(STR),
    "matchExpressions": ListOf({"key": STR, "operator": STR, "values": STRINGS}),
}
_CLUSTER_PROFILE_PROVIDER = {"name": STR, "execConfig": OPAQUE}
_DEVICE_SOURCE = {"name": STR, "driver": STR, "deviceSelector": OPAQUE}

# Kueue v0.19.2's apis/config/v1beta2 Configuration, ControllerManager inlined.
V1BETA2_SCHEMA: dict[str, Any] = {
    "apiVersion": STR,
    "kind": STR,
    # Not Kueue's: its strict decoder refuses the file, yet its own documentation's example
    # (opt-in namespace management) carries it; Tower takes it, with a warning.
    "metadata": OPAQUE,
    "namespace": STR,
    "manageJobsWithoutQueueName": BOOL,
    "managedJobsNamespaceSelector": LABEL_SELECTOR,
    "internalCertManagement": {
        "enable": BOOL,
        "webhookServiceName": STR,
        "webhookSecretName": STR,
    },
    "waitForPodsReady": {
        "timeout": DURATION,
        "blockAdmission": BOOL,
        "requeuingStrategy": {
            "timestamp": STR,
            "backoffLimitCount": INT,
            "backoffBaseSeconds": INT,
            "backoffMaxSeconds": INT,
        },
        "recoveryTimeout": DURATION,
    },
    "clientConnection": {"qps": NUMBER, "burst": INT},
    "integrations": {
        "frameworks": STRINGS,
        "externalFrameworks": STRINGS,
        "labelKeysToCopy": STRINGS,
    },
    "multiKueue": {
        "gcInterval": DURATION,
        "origin": STR,
        "workerLostTimeout": DURATION,
        "dispatcherName": STR,
        "externalFrameworks": ListOf({"name": STR}),
        "clusterProfile": {
            "accessProviders": ListOf(_CLUSTER_PROFILE_PROVIDER),
            "credentialsProviders": ListOf(_CLUSTER_PROFILE_PROVIDER),
        },
        "incrementalDispatcherConfig": {"stepSize": INT},
    },
    "fairSharing": {"preemptionStrategies": STRINGS},
    "admissionFairSharing": {
        "usageHalfLifeTime": DURATION,
        "usageSamplingInterval": DURATION,
        "resourceWeights": MapOf(NUMBER),
    },
    "resources": {
        "quotaCheckStrategy": STR,
        "excludeResourcePrefixes": STRINGS,
        "transformations": ListOf(
            {"input": STR, "strategy": STR, "multiplyBy": STR, "outputs": MapOf(QUANTITY)}
        ),
        "deviceClassMappings": ListOf(
            {
                "name": STR,
                "deviceClassNames": STRINGS,
                "sources": ListOf({"counter": _DEVICE_SOURCE, "capacity": _DEVICE_SOURCE}),
            }
        ),
    },
    "featureGates": MapOf(BOOL),
    "objectRetentionPolicies": {
        "workloads": {"afterFinished": DURATION, "afterDeactivatedByKueue": DURATION}
    },
    "visibilityServer": {"bindAddress": STR, "bindPort": INT},
    "webhook": {"port": INT, "host": STR, "certDir": STR},
    "leaderElection": {
        "leaderElect": BOOL,
        "leaseDuration": DURATION,
        "renewDeadline": DURATION,
        "retryPeriod": DURATION,
        "resourceLock": STR,
        "resourceName": STR,
        "resourceNamespace": STR,
    },
    "metrics": {
        "bindAddress": STR,
        "enableClusterQueueResources": BOOL,
        "customLabels": ListOf(
            {
                "name": STR,
                "sourceLabelKey": STR,
                "sourceAnnotationKey": STR,
                "sourceKind": STR,
                "trackedValues": STRINGS,
            }
        ),
        "localQueueMetrics": {"enable": BOOL, "localQueueSelector": LABEL_SELECTOR},
    },
    "health": {
        "healthProbeBindAddress": STR,
        "readinessEndpointName": STR,
        "livenessEndpointName": STR,
    },
    "pprofBindAddress": STR,
    # A Go time.Duration, not metav1.Duration: JSON carries it as nanoseconds.
    "controller": {"groupKindConcurrency": MapOf(INT), "cacheSyncTimeout": INT64},
    "tls": {"minVersion": STR, "cipherSuites": STRINGS, "curvePreferences": ListOf(INT)},
}


def _v1beta1_schema() -> dict[str, Any]:
    """v1beta1: the same, less v1beta2's additions, plus its `enable` switches and the
    fields v1beta2 dropped."""
    schema = dict(V1BETA2_SCHEMA)
    del schema["visibilityServer"]
    schema["waitForPodsReady"] = {"enable": BOOL, **V1BETA2_SCHEMA["waitForPodsReady"]}
    schema["fairSharing"] = {"enable": BOOL, **V1BETA2_SCHEMA["fairSharing"]}
    schema["integrations"] = {
        **V1BETA2_SCHEMA["integrations"],
        "podOptions": {"namespaceSelector": LABEL_SELECTOR, "podSelector": LABEL_SELECTOR},
    }
    multi = dict(V1BETA2_SCHEMA["multiKueue"])
    del multi["clusterProfile"], multi["incrementalDispatcherConfig"]
    schema["multiKueue"] = multi
    resources = dict(V1BETA2_SCHEMA["resources"])
    del resources["quotaCheckStrategy"]
    resources["deviceClassMappings"] = ListOf({"name": STR, "deviceClassNames": STRINGS})
    schema["resources"] = resources
    metrics = dict(V1BETA2_SCHEMA["metrics"])
    labels = dict(metrics["customLabels"].item)
    del labels["sourceKind"], labels["trackedValues"]
    metrics["customLabels"] = ListOf(labels)
    schema["metrics"] = metrics
    schema["queueVisibility"] = {
        "clusterQueues": {"maxCount": INT},
        "updateIntervalSeconds": INT,
    }
    return schema


V1BETA1_SCHEMA = _v1beta1_schema()


def check(value: Any, spec: Spec, path: str) -> None:
    """Refuse a field the schema does not have, or a value of the wrong type."""
    if value is None:  # null: not set, as Go's decoder leaves a nil pointer
        return
    if isinstance(spec, dict):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: {show(value)} is not a mapping of fields")
        for key, sub in value.items():
            here = f"{path}.{key}" if path else str(key)
            if key not in spec:
                raise ConfigError(f"{here}: unknown field")
            check(sub, spec[key], here)
    elif isinstance(spec, ListOf):
        if not isinstance(value, list):
            raise ConfigError(f"{path}: {show(value)} is not a list")
        for i, item in enumerate(value):
            check(item, spec.item, f"{path}[{i}]")
    elif isinstance(spec, MapOf):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{path}: {show(value)} is not a mapping")
        for key, sub in value.items():
            if not isinstance(key, str):
                raise ConfigError(f"{path}: the key {show(key)} is not a string")
            check(sub, spec.value, f"{path}[{key}]")
    elif not spec.ok(value):
        raise ConfigError(f"{path}: {show(value)} is not {spec.what}")


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# fairSharing.preemptionStrategies: Kueue's default, and the lists it accepts.
DEFAULT_PREEMPTION_STRATEGIES = ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
PREEMPTION_STRATEGY_SETS = (
    ["LessThanOrEqualToFinalShare"],
    ["LessThanInitialShare"],
    DEFAULT_PREEMPTION_STRATEGIES,
)

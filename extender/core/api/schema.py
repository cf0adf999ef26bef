"""Kueue's API as Tower serves it: one declarative table of schemas, per kind and version.

Every field of the eleven kinds is named here once, with its type, enum, default, limits, list
keys and CEL rules (Kueue v0.19.2's, checked path by path by
tests/unit/core/api/test_kueue_schema.py). The CRDs are rendered from it
(extender/kube/generators/crds.py); the parsers take their enums and defaults from it (`enum`,
`default`), and the conversion webhook its version renames (`RENAMES`).
"""

from __future__ import annotations

import copy
import functools
import re
from enum import StrEnum
from typing import Any

from extender.core.api.models import (
    FungibilityPolicy,
    QueueingStrategy,
    ReclaimWithinCohort,
    StopPolicy,
    WithinClusterQueue,
)

Schema = dict[str, Any]

# What v1beta1 calls differently, per kind: (v1beta1 path, v1beta2 path) of a field renamed as
# is, and (path, v1beta1 value, v1beta2 value) of an enum value renamed. The conversion webhook
# applies them; the schemas below name each field by its version's name from here.
RENAMES: dict[str, tuple[tuple[str, str], ...]] = {
    "ClusterQueue": (("spec.cohort", "spec.cohortName"),),
    "LocalQueue": (("status.flavorUsage", "status.flavorsUsage"),),
    "Workload": (
        (
            "status.accumulatedPastExexcutionTimeSeconds",
            "status.accumulatedPastExecutionTimeSeconds",
        ),
    ),
}
VALUE_RENAMES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "ClusterQueue": (
        ("spec.flavorFungibility.whenCanBorrow", "Borrow", FungibilityPolicy.MAY_STOP_SEARCH),
        ("spec.flavorFungibility.whenCanPreempt", "Preempt", FungibilityPolicy.MAY_STOP_SEARCH),
    ),
}


def name_at(kind: str, path: str, version: str) -> str:
    """The last name of a v1beta2 field's path as `version` spells it."""
    if version == "v1beta1":
        for old, new in RENAMES.get(kind, ()):
            if new == path:
                return old.rsplit(".", 1)[-1]
    return path.rsplit(".", 1)[-1]


def _values_at(kind: str, path: str, version: str, values: type[StrEnum]) -> list[str]:
    """An enum's values, with the names v1beta1 also accepts."""
    out = [str(v) for v in values]
    if version == "v1beta1":
        out += [old for p, old, _ in VALUE_RENAMES.get(kind, ()) if p == path]
    return out


def _str(**extra: Any) -> Schema:
    return {"type": "string", **extra}


def _int(**extra: Any) -> Schema:
    return {"type": "integer", "format": "int32", **extra}


def _enum(values: list[str], default: str | None = None) -> Schema:
    out: Schema = {"type": "string", "enum": [str(v) for v in values]}
    if default is not None:
        out["default"] = str(default)
    return out


def _obj(
    properties: dict[str, Schema], required: list[str] | None = None, /, **extra: Any
) -> Schema:
    out: Schema = {"type": "object", "properties": properties, **extra}
    if required:
        out["required"] = required
    return out


def _list(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def _map(values: Schema, **extra: Any) -> Schema:
    return {"type": "object", "additionalProperties": values, **extra}


_QUANTITY: Schema = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",  # noqa: E501
    "x-kubernetes-int-or-string": True,
}
_OPAQUE: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
# Kubernetes' own name rules: a DNS subdomain (object names) and a DNS label (podSet names).
_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# A qualified label name: an optional DNS-subdomain prefix and a name (a node label's key).
_LABEL_KEY = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)


def _name(max_length: int = 253, **extra: Any) -> Schema:
    """The name of another object (a flavor, queue, cohort...)."""
    return _str(maxLength=max_length, pattern=_SUBDOMAIN, **extra)


def _quantities() -> Schema:
    return _map(_QUANTITY)


_CONDITION = _obj(
    {
        "type": _str(
            maxLength=316,
            pattern=_LABEL_KEY,
        ),
        "status": _enum(["True", "False", "Unknown"]),
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        "lastTransitionTime": _str(format="date-time"),
        "reason": _str(
            maxLength=1024, minLength=1, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
        ),
        "message": _str(maxLength=32768),
    },
    ["type", "status", "lastTransitionTime", "reason", "message"],
)
_CONDITIONS = _list(
    _CONDITION,
    maxItems=16,
    **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
)
_CONDITIONS_V1BETA1 = {k: v for k, v in _CONDITIONS.items() if k != "maxItems"}

_LABEL_SELECTOR = _obj(
    {
        "matchLabels": _map(_str()),
        "matchExpressions": _list(
            _obj(
                {
                    "key": _str(),
                    "operator": _str(),
                    "values": _list(_str(), **{"x-kubernetes-list-type": "atomic"}),
                },
                ["key", "operator"],
            ),
            **{"x-kubernetes-list-type": "atomic"},
        ),
    },
    **{"x-kubernetes-map-type": "atomic"},
)

_TAINT = _obj(
    {
        "key": _str(),
        "value": _str(),
        "effect": _str(),
        "timeAdded": _str(format="date-time"),
    },
    ["key", "effect"],
)
_TOLERATION = _obj(
    {
        "key": _str(),
        "operator": _str(),
        "value": _str(),
        "effect": _str(),
        "tolerationSeconds": {"type": "integer", "format": "int64"},
    }
)


def _cel(*rules: tuple[str, str]) -> dict[str, Any]:
    """CEL rules kube-apiserver checks, each with the message a refusal carries. They are
    Tower's own wording of the checks Kueue's CRDs make at the same place
    (tests/unit/core/api/test_cel_rules.py checks both give the same verdicts)."""
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


_EFFECTS = "{0} == 'NoSchedule' || {0} == 'PreferNoSchedule' || {0} == 'NoExecute'"
_TOLERATION_RULES = _cel(
    (
        "self.all(t, has(t.key) || (has(t.operator) && t.operator == 'Exists'))",
        "a toleration without a key must have operator Exists (it then tolerates every taint)",
    ),
    (
        "self.all(t, !has(t.tolerationSeconds) || (has(t.effect) && t.effect == 'NoExecute'))",
        "tolerationSeconds needs effect NoExecute",
    ),
    (
        "self.all(t, !has(t.operator) || t.operator == 'Equal' || t.operator == 'Exists')",
        "a toleration's operator must be Equal (the default) or Exists",
    ),
    (
        "self.all(t, !(has(t.operator) && t.operator == 'Exists' && has(t.value)))",
        "a toleration with operator Exists must have no value",
    ),
    (
        "self.all(t, !has(t.effect) || " + _EFFECTS.format("t.effect") + ")",
        "a toleration's effect must be NoSchedule, PreferNoSchedule or NoExecute",
    ),
)


def _resource_groups(version: str) -> Schema:
    quota = _obj(
        {
            "name": _str(),
            "nominalQuota": _QUANTITY,
            "borrowingLimit": _QUANTITY,
            "lendingLimit": _QUANTITY,
        },
        ["name", "nominalQuota"],
    )
    flavor = _obj(
        {
            "name": _name(),
            "resources": _list(
                quota,
                minItems=1,
                maxItems=64,
                **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
            ),
        },
        ["name", "resources"],
    )
    group = _obj(
        {
            "coveredResources": _list(
                _str(),
                minItems=1,
                maxItems=64,
                **({} if version == "v1beta1" else {"x-kubernetes-list-type": "atomic"}),
            ),
            "flavors": _list(
                flavor,
                minItems=1,
                maxItems=64,
                **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
            ),
        },
        ["coveredResources", "flavors"],
        **{
            "x-kubernetes-validations": [
                {
                    "rule": "self.flavors.all(x, size(x.resources) == size(self.coveredResources))",
                    "message": "flavors must have the same number of resources as the "
                    "coveredResources",
                }
            ]
        },
    )
    return _list(group, maxItems=16, **{"x-kubernetes-list-type": "atomic"})


def _flavor_usage(with_borrowed: bool) -> Schema:
    usage: dict[str, Schema] = {"name": _str(), "total": _QUANTITY}
    if with_borrowed:
        usage["borrowed"] = _QUANTITY
    return _list(
        _obj(
            {
                "name": _name(),
                "resources": _list(
                    _obj(usage, ["name"]),
                    maxItems=64,
                    **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
                ),
            },
            ["name", "resources"],
        ),
        maxItems=64,
        **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


_FAIR_SHARING_SPEC = _obj({"weight": {**_QUANTITY, "default": 1}})
_FAIR_SHARING_STATUS = _obj(
    {"weightedShare": {"type": "integer", "format": "int64"}}, ["weightedShare"]
)
_FAIR_SHARING_STATUS_V1BETA1 = _obj(
    {
        "weightedShare": {"type": "integer", "format": "int64"},
        "admissionFairSharingStatus": _obj(
            {"consumedResources": _quantities(), "lastUpdate": _str(format="date-time")},
            ["consumedResources", "lastUpdate"],
        ),
    },
    ["weightedShare"],
)
_STOP_POLICY = _enum(list(StopPolicy), StopPolicy.NONE)
_COUNTS = {
    "pendingWorkloads": _int(),
    "reservingWorkloads": _int(),
    "admittedWorkloads": _int(),
}


def _cluster_queue(version: str) -> Schema:
    v1 = version == "v1beta1"
    fungibility = "spec.flavorFungibility"
    borrow = _values_at("ClusterQueue", f"{fungibility}.whenCanBorrow", version, FungibilityPolicy)
    preempt = _values_at(
        "ClusterQueue", f"{fungibility}.whenCanPreempt", version, FungibilityPolicy
    )
    cohort = name_at("ClusterQueue", "spec.cohortName", version)
    spec: dict[str, Schema] = {
        "resourceGroups": _resource_groups(version),
        cohort: _name(),
        "queueingStrategy": _enum(list(QueueingStrategy), QueueingStrategy.BEST_EFFORT_FIFO),
        "namespaceSelector": _LABEL_SELECTOR,
        "flavorFungibility": _obj(
            {
                "whenCanBorrow": _enum(borrow, FungibilityPolicy.MAY_STOP_SEARCH),
                "whenCanPreempt": _enum(preempt, FungibilityPolicy.TRY_NEXT_FLAVOR),
                "preference": _enum(["BorrowingOverPreemption", "PreemptionOverBorrowing"]),
            },
            default={},
            **_cel(
                (
                    "has(self.preference) ? self.whenCanBorrow == 'TryNextFlavor' && "
                    "self.whenCanPreempt == 'TryNextFlavor' : true",
                    "preference needs whenCanBorrow and whenCanPreempt both TryNextFlavor",
                )
            ),
        ),
        "preemption": _obj(
            {
                "withinClusterQueue": _enum(list(WithinClusterQueue), WithinClusterQueue.NEVER),
                "reclaimWithinCohort": _enum(list(ReclaimWithinCohort), ReclaimWithinCohort.NEVER),
                "borrowWithinCohort": _obj(
                    {
                        "policy": _enum(["Never", "LowerPriority"], "Never"),
                        "maxPriorityThreshold": _int(),
                    },
                    default={},
                ),
            },
            default={},
            **{
                "x-kubernetes-validations": [
                    {
                        "rule": "!(self.reclaimWithinCohort == 'Never' && "
                        "has(self.borrowWithinCohort) && self.borrowWithinCohort.policy != "
                        "'Never')",
                        "message": "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
                    }
                ]
            },
        ),
        "admissionChecksStrategy": _admission_checks_strategy(v1),
        "stopPolicy": _STOP_POLICY,
        "fairSharing": _FAIR_SHARING_SPEC,
        "admissionScope": _obj(
            {
                "admissionMode": _enum(["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"])
                if not v1
                else _str()
            },
            ["admissionMode"],
        ),
    }
    if v1:
        spec["admissionChecks"] = _list(_str(maxLength=316))
    else:
        spec["concurrentAdmissionPolicy"] = _obj(
            {
                "migration": _obj(
                    {
                        "mode": _enum(["TryPreferredFlavors", "RetainFirstAdmission"])
                        | {"maxLength": 253},
                        "constraints": _obj({"lastAcceptableFlavorName": _name()}),
                    },
                    ["mode"],
                )
            },
            ["migration"],
        )
    status: dict[str, Schema] = {
        "conditions": _CONDITIONS_V1BETA1 if v1 else _CONDITIONS,
        "flavorsReservation": _flavor_usage(True),
        "flavorsUsage": _flavor_usage(True),
        **_COUNTS,
        "fairSharing": _FAIR_SHARING_STATUS_V1BETA1 if v1 else _FAIR_SHARING_STATUS,
    }
    if v1:
        status["pendingWorkloadsStatus"] = _obj(
            {
                "clusterQueuePendingWorkload": _list(
                    _obj({"name": _str(), "namespace": _str()}, ["name", "namespace"]),
                    **{"x-kubernetes-list-type": "atomic"},
                ),
                "lastChangeTime": _str(format="date-time"),
            },
            ["lastChangeTime"],
        )
    cohort = name_at("ClusterQueue", "spec.cohortName", version)
    spec_rules = _cel(
        (
            f"has(self.{cohort}) || !has(self.resourceGroups) || self.resourceGroups.all(g, "
            "g.flavors.all(f, f.resources.all(q, !has(q.borrowingLimit))))",
            f"a borrowingLimit needs a cohort: set spec.{cohort}, or remove the borrowingLimit",
        )
    )
    return _root(_obj(spec, None, **spec_rules), _obj(status))


def _admission_checks_strategy(v1: bool) -> Schema:
    if v1:
        check = _obj({"name": _str(maxLength=316), "onFlavors": _list(_name())}, ["name"])
        return _obj({"admissionChecks": _list(check)})
    check = _obj(
        {
            "name": _str(maxLength=316, minLength=1),
            "onFlavors": _list(_name(), maxItems=64, **{"x-kubernetes-list-type": "set"}),
        },
        ["name"],
    )
    checks = _list(
        check,
        minItems=1,
        maxItems=64,
        **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    return _obj({"admissionChecks": checks}, ["admissionChecks"])


def _local_queue(version: str) -> Schema:
    v1 = version == "v1beta1"
    spec = _obj(
        {
            "clusterQueue": {
                **_name(),
                "x-kubernetes-validations": [
                    {"rule": "self == oldSelf", "message": "field is immutable"}
                ],
            },
            "stopPolicy": _STOP_POLICY,
            "fairSharing": _FAIR_SHARING_SPEC,
        }
    )
    status: dict[str, Schema] = {
        "conditions": _CONDITIONS_V1BETA1 if v1 else _CONDITIONS,
        **_COUNTS,
        "flavorsReservation": _flavor_usage(False),
        name_at("LocalQueue", "status.flavorsUsage", version): _flavor_usage(False),
        "fairSharing": _FAIR_SHARING_STATUS_V1BETA1,
    }
    if v1:
        flavor = _obj(
            {
                "name": _name(),
                "nodeLabels": _map(_str(), maxProperties=8, **{"x-kubernetes-map-type": "atomic"}),
                "nodeTaints": _list(_TAINT, maxItems=8, **{"x-kubernetes-list-type": "atomic"}),
                "resources": _list(_str(), maxItems=64, **{"x-kubernetes-list-type": "set"}),
                "topology": _obj(
                    {
                        "name": _name(),
                        "levels": _list(
                            _str(), minItems=1, maxItems=16, **{"x-kubernetes-list-type": "atomic"}
                        ),
                    },
                    ["name", "levels"],
                ),
            },
            ["name"],
        )
        status["flavors"] = _list(
            flavor,
            maxItems=64,
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        )
    return _root(spec, _obj(status))


def _workload(version: str) -> Schema:
    v1 = version == "v1beta1"
    pod_set = _obj(
        {
            "name": _str(maxLength=63, pattern=_LABEL, default="main"),
            "template": _OPAQUE,
            "count": _int(minimum=0, default=1),
            "minCount": _int(minimum=1),
            "topologyRequest": _topology_request(v1),
        },
        ["count", "template"] if v1 else ["template"],
        **_cel(
            ("!has(self.minCount) || self.minCount <= self.count", "minCount must not exceed count")
        ),
    )
    spec: dict[str, Schema] = {
        "podSets": _list(
            pod_set,
            minItems=1,
            maxItems=18,
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        ),
        "queueName": _name(),
        "priority": _int(),
        "active": {"type": "boolean", "default": True},
        "maximumExecutionTimeSeconds": _int(minimum=1),
    }
    if v1:
        spec["priorityClassName"] = _name()
        spec["priorityClassSource"] = _enum(
            [
                "kueue.x-k8s.io/workloadpriorityclass",
                "scheduling.k8s.io/priorityclass",
                "",
            ],
            "",
        )
    else:
        spec["priorityClassRef"] = _obj(
            {
                "group": _enum(["kueue.x-k8s.io", "scheduling.k8s.io"]),
                "kind": _enum(["WorkloadPriorityClass", "PriorityClass"]),
                "name": _name(minLength=1),
            },
            ["group", "kind", "name"],
            **_cel(
                (
                    "self.group != 'scheduling.k8s.io' || self.kind == 'PriorityClass'",
                    "the group scheduling.k8s.io has only the kind PriorityClass",
                ),
                (
                    "self.group != 'kueue.x-k8s.io' || self.kind == 'WorkloadPriorityClass'",
                    "the group kueue.x-k8s.io has only the kind WorkloadPriorityClass",
                ),
            ),
        )
        spec["preemptionGates"] = _list(
            _obj({"name": _str(maxLength=63, minLength=1)}, ["name"]),
            maxItems=8,
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        )
    assignment = _obj(
        {
            "name": _str(maxLength=63, pattern=_LABEL, default="main"),
            "flavors": _map(_name()),
            "resourceUsage": _quantities(),
            "count": _int(minimum=0),
            "topologyAssignment": _topology_assignment(v1),
            "delayedTopologyRequest": _str()
            if v1
            else _enum(["Pending", "Ready"]) | {"maxLength": 7},
        },
        ["name"] if v1 else None,
    )
    by_name = {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
    pod_set_update = _obj(
        {
            "name": _str(maxLength=63, pattern=_LABEL),
            "labels": _map(_str()),
            "annotations": _map(_str()),
            "nodeSelector": _map(_str()),
            "tolerations": _list(
                _TOLERATION,
                maxItems=8,
                **({} if v1 else {"x-kubernetes-list-type": "atomic"}),
                **_TOLERATION_RULES,
            ),
        },
        ["name"],
    )
    admission_check = _obj(
        {
            "name": _str(maxLength=316, **({} if v1 else {"minLength": 1})),
            "state": _enum(["Pending", "Ready", "Retry", "Rejected"]),
            "lastTransitionTime": _str(format="date-time"),
            "message": _str(maxLength=32768),
            "podSetUpdates": _list(
                pod_set_update, maxItems=18, **{"x-kubernetes-list-type": "atomic"}
            ),
            "requeueAfterSeconds": _int(minimum=0),
            "retryCount": _int(minimum=0),
        },
        ["name", "state", "lastTransitionTime", "message"],
    )
    evictions = _list(
        _obj(
            {
                "reason": _str(maxLength=316),
                "underlyingCause": _str(maxLength=316),
                "count": _int(minimum=0),
            },
            ["reason", "underlyingCause", "count"],
        ),
        **({} if v1 else {"maxItems": 256}),
        **{
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["reason", "underlyingCause"],
        },
    )
    status: dict[str, Schema] = {
        "conditions": _CONDITIONS_V1BETA1 if v1 else _CONDITIONS,
        "admission": _obj(
            {
                "clusterQueue": _name(),
                "podSetAssignments": _list(assignment, maxItems=18, **by_name),
            },
            ["clusterQueue", "podSetAssignments"] if v1 else None,
        ),
        "requeueState": _obj({"count": _int(minimum=0), "requeueAt": _str(format="date-time")}),
        "reclaimablePods": _list(
            _obj(
                {"name": _str(maxLength=63, pattern=_LABEL), "count": _int(minimum=0)},
                ["name", "count"],
            ),
            maxItems=18,
            **by_name,
        ),
        "admissionChecks": _list(admission_check, maxItems=8, **by_name),
        "resourceRequests": _list(
            _obj(
                {"name": _str(maxLength=63, pattern=_LABEL), "resources": _quantities()},
                ["name"],
            ),
            maxItems=18,
            **by_name,
        ),
        "schedulingStats": _obj({"evictions": evictions}),
        "clusterName": _str() if v1 else _str(maxLength=256),
        "nominatedClusterNames": _list(
            _str() if v1 else _str(maxLength=256),
            maxItems=20,
            **{"x-kubernetes-list-type": "atomic"},
        ),
        "unhealthyNodes": _list(_obj({"name": _str()}, ["name"]))
        if v1
        else _list(_obj({"name": _str(maxLength=63)}, ["name"]), maxItems=8, **by_name),
        name_at("Workload", "status.accumulatedPastExecutionTimeSeconds", version): _int(),
    }
    if not v1:
        status["preemptionGates"] = _list(
            _obj(
                {
                    "name": _str(maxLength=63, minLength=1),
                    "position": _enum(["Closed", "Open"]),
                    "lastTransitionTime": _str(format="date-time"),
                },
                ["name", "position", "lastTransitionTime"],
            ),
            maxItems=8,
            **by_name,
        )
    ref = "priorityClassName" if v1 else "priorityClassRef"
    spec_rules = _cel(
        (f"!has(self.{ref}) || has(self.priority)", f"priority must be set with {ref}")
    )
    status_rules = _cel(
        (
            "!has(self.clusterName) || !has(oldSelf.clusterName) || "
            "self.clusterName == oldSelf.clusterName",
            "clusterName cannot change once set",
        ),
        (
            "!has(self.clusterName) || !has(self.nominatedClusterNames) || "
            "size(self.nominatedClusterNames) == 0",
            "clusterName and nominatedClusterNames cannot both be set",
        ),
    )
    return _root(
        _obj(spec, ["podSets"] if v1 else None, **spec_rules),
        _obj(status, None, **status_rules),
        _workload_rules(v1),
    )


def _holds(who: str, condition: str = "QuotaReserved") -> str:
    return (
        f"(has({who}.status) && has({who}.status.conditions) && {who}.status.conditions.exists("
        f"c, c.type == '{condition}' && c.status == 'True'))"
    )


def _workload_rules(v1: bool) -> dict[str, Any]:
    """Whole-object rules: an admission covers every podSet, and what decided the admission
    does not change under it."""
    held_before, held_now = _holds("oldSelf"), _holds("self")
    rules = [
        (
            f"!({held_now} && has(self.status.admission)) || "
            "size(self.status.admission.podSetAssignments) == size(self.spec.podSets)",
            "status.admission needs one podSetAssignment for each podSet of the spec",
        )
    ]
    if v1:
        both = "has(oldSelf.spec.priorityClassSource) && has(self.spec.priorityClassSource)"
        rules += [
            (
                f"!({held_before} && {both}) || "
                "self.spec.priorityClassSource == oldSelf.spec.priorityClassSource",
                "priorityClassSource cannot change while the workload holds quota",
            ),
            (
                f"!({held_before} && {both} && self.spec.priorityClassSource != "
                "'kueue.x-k8s.io/workloadpriorityclass' && has(oldSelf.spec.priorityClassName) "
                "&& has(self.spec.priorityClassName)) || "
                "self.spec.priorityClassName == oldSelf.spec.priorityClassName",
                "priorityClassName cannot change while the workload holds quota, unless it names "
                "a WorkloadPriorityClass",
            ),
        ]
    else:
        both = "has(oldSelf.spec.priorityClassRef) && has(self.spec.priorityClassRef)"
        rules += [
            (
                f"!{held_before} || "
                "has(self.spec.priorityClassRef) == has(oldSelf.spec.priorityClassRef)",
                "priorityClassRef cannot be set or removed while the workload holds quota",
            ),
            (
                f"!({held_before} && {both}) || "
                "self.spec.priorityClassRef.group == oldSelf.spec.priorityClassRef.group",
                "priorityClassRef.group cannot change while the workload holds quota",
            ),
            (
                f"!({held_before} && {both}) || "
                "self.spec.priorityClassRef.kind == oldSelf.spec.priorityClassRef.kind",
                "priorityClassRef.kind cannot change while the workload holds quota",
            ),
            (
                f"!({held_before} && {both} && self.spec.priorityClassRef.group == "
                "'scheduling.k8s.io' && self.spec.priorityClassRef.kind == 'PriorityClass') || "
                "self.spec.priorityClassRef.name == oldSelf.spec.priorityClassRef.name",
                "a PriorityClass named by priorityClassRef cannot change while the workload holds "
                "quota",
            ),
        ]
    admitted_before, admitted_now = _holds("oldSelf", "Admitted"), _holds("self", "Admitted")
    seconds = (
        "(has({0}.spec.maximumExecutionTimeSeconds) ? {0}.spec.maximumExecutionTimeSeconds : 0)"
    )
    rules += [
        (
            f"!({held_before} && {held_now}) || (has(self.spec.queueName) ? "
            "has(oldSelf.spec.queueName) && self.spec.queueName == oldSelf.spec.queueName : "
            "!has(oldSelf.spec.queueName))",
            "queueName cannot change while the workload holds quota",
        ),
        (
            f"!({admitted_before} && {admitted_now}) || "
            f"{seconds.format('self')} == {seconds.format('oldSelf')}",
            "maximumExecutionTimeSeconds cannot change while the workload is admitted",
        ),
    ]
    return _cel(*rules)


def _topology_request(v1: bool) -> Schema:
    def text(max_length: int) -> Schema:
        return _str() if v1 else _str(maxLength=max_length)

    request: dict[str, Schema] = {
        "required": text(63),
        "preferred": text(63),
        "unconstrained": {"type": "boolean"},
        "podIndexLabel": text(317),
        "subGroupIndexLabel": text(317),
        "subGroupCount": _int(),
        "podSetGroupName": text(256),
        "podSetSliceRequiredTopology": text(63),
        "podSetSliceSize": _int(),
    }
    if not v1:
        request["podsetSliceRequiredTopologyConstraints"] = _list(
            _obj(
                {"topology": _str(maxLength=63, minLength=1), "size": _int(minimum=1)},
                ["topology", "size"],
            ),
            maxItems=3,
            **{"x-kubernetes-list-type": "atomic"},
        )
    return _obj(request)


def _topology_assignment(v1: bool) -> Schema:
    atomic = {"x-kubernetes-list-type": "atomic"}
    if v1:
        levels = _list(_str(), minItems=1, maxItems=16, **atomic)
        domain = _obj(
            {"values": _list(_str(), minItems=1, maxItems=16, **atomic), "count": _int(minimum=1)},
            ["values", "count"],
        )
        return _obj({"levels": levels, "domains": _list(domain)}, ["levels", "domains"])
    many = {"minItems": 1, "maxItems": 100000, **atomic}
    one_of = _cel(
        (
            "has(self.universal) != has(self.individual)",
            "set exactly one of universal and individual",
        )
    )
    values = _obj(
        {
            "universal": _str(maxLength=63),
            "individual": _obj(
                {
                    "prefix": _str(maxLength=63),
                    "suffix": _str(maxLength=63),
                    "roots": _list(_str(maxLength=63), **many),
                },
                ["roots"],
            ),
        },
        None,
        **one_of,
    )
    slice_ = _obj(
        {
            "domainCount": _int(minimum=1),
            "valuesPerLevel": _list(values, minItems=1, maxItems=16, **atomic),
            "podCounts": _obj(
                {"universal": _int(minimum=1), "individual": _list(_int(minimum=1), **many)},
                None,
                **one_of,
            ),
        },
        ["domainCount", "valuesPerLevel", "podCounts"],
        **_cel(
            (
                "!has(self.podCounts.individual) || "
                "size(self.podCounts.individual) == self.domainCount",
                "podCounts.individual needs one count per domain (domainCount)",
            ),
            (
                "self.valuesPerLevel.all(v, !has(v.individual) || "
                "size(v.individual.roots) == self.domainCount)",
                "valuesPerLevel[].individual.roots needs one root per domain (domainCount)",
            ),
        ),
    )
    return _obj(
        {
            "levels": _list(_str(maxLength=317), minItems=1, maxItems=16, **atomic),
            "slices": _list(slice_, maxItems=1000, **atomic),
        },
        ["levels", "slices"],
        **_cel(
            (
                "self.slices.all(s, size(s.valuesPerLevel) == size(self.levels))",
                "each slice needs one valuesPerLevel entry per level",
            )
        ),
    )


def _resource_flavor(version: str) -> Schema:
    spec = _obj(
        {
            "nodeLabels": _map(_str(), maxProperties=8, **{"x-kubernetes-map-type": "atomic"}),
            "nodeTaints": _list(
                _TAINT,
                maxItems=8,
                **{"x-kubernetes-list-type": "atomic"},
                **_cel(
                    (
                        "self.all(t, " + _EFFECTS.format("t.effect") + ")",
                        "a taint's effect must be NoSchedule, PreferNoSchedule or NoExecute",
                    )
                ),
            ),
            "tolerations": _list(
                _TOLERATION, maxItems=8, **{"x-kubernetes-list-type": "atomic"}, **_TOLERATION_RULES
            ),
            "topologyName": _name(),
        },
        None,
        **_cel(
            (
                "has(self.topologyName) ? has(self.nodeLabels) && size(self.nodeLabels) > 0 : true",
                "topologyName needs at least one nodeLabel",
            ),
            (
                "has(oldSelf.topologyName) ? (has(self.nodeLabels) ? has(oldSelf.nodeLabels) && "
                "self.nodeLabels == oldSelf.nodeLabels : !has(oldSelf.nodeLabels)) : true",
                "nodeLabels cannot change once topologyName is set",
            ),
            (
                "has(oldSelf.topologyName) ? (has(self.tolerations) ? has(oldSelf.tolerations) && "
                "self.tolerations == oldSelf.tolerations : !has(oldSelf.tolerations)) : true",
                "tolerations cannot change once topologyName is set",
            ),
            (
                "has(oldSelf.topologyName) ? has(self.topologyName) && "
                "self.topologyName == oldSelf.topologyName : true",
                "topologyName cannot change once set",
            ),
        ),
    )
    return _root(spec, None)


def _cohort(version: str) -> Schema:
    spec = _obj(
        {
            "parentName": _name(),
            "resourceGroups": _resource_groups(version),
            "fairSharing": _FAIR_SHARING_SPEC,
        }
    )
    fair = _FAIR_SHARING_STATUS_V1BETA1 if version == "v1beta1" else _FAIR_SHARING_STATUS
    return _root(spec, _obj({"conditions": _CONDITIONS, "fairSharing": fair}))


def _workload_priority_class(version: str) -> Schema:
    return {
        "type": "object",
        "properties": {
            "apiVersion": _str(),
            "kind": _str(),
            "metadata": {"type": "object"},
            "value": _int(),
            "description": _str(maxLength=2048),
        },
        "required": ["value"],
    }


def _admission_check(version: str) -> Schema:
    v1 = version == "v1beta1"
    least = {} if v1 else {"minLength": 1}
    spec: dict[str, Schema] = {
        "controllerName": _str(
            **({} if v1 else {"maxLength": 253, "minLength": 1}),
            **_cel(("self == oldSelf", "field is immutable")),
        ),
        "parameters": _obj(
            {
                "apiGroup": _str(maxLength=253, pattern=_SUBDOMAIN, **least),
                "kind": _str(maxLength=63, pattern=r"^(?i)[a-z]([-a-z0-9]*[a-z0-9])?$", **least),
                "name": _str(maxLength=63, pattern=_LABEL, **least),
            },
            ["apiGroup", "kind", "name"],
        ),
    }
    if v1:
        # Dropped in v1beta2; Kueue's checks never read it.
        spec["retryDelayMinutes"] = {"type": "integer", "format": "int64", "default": 15}
    conditions = _CONDITIONS_V1BETA1 if v1 else _CONDITIONS
    return _root(_obj(spec, ["controllerName"]), _obj({"conditions": conditions}))


def _provisioning_request_config(version: str) -> Schema:
    v1 = version == "v1beta1"
    node_selector = _list(
        _obj(
            {
                "key": _str(
                    maxLength=317,
                    minLength=1,
                    pattern=_LABEL_KEY,
                ),
                "valueFromProvisioningClassDetail": _str(maxLength=32768, minLength=1),
            },
            ["key", "valueFromProvisioningClassDetail"],
        ),
        maxItems=8,
        **({} if v1 else {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["key"]}),
    )
    backoff = {
        "backoffLimitCount": {**_int(), "default": 3},
        "backoffBaseSeconds": {**_int(), "default": 60},
        "backoffMaxSeconds": {**_int(), "default": 1800},
    }
    spec = _obj(
        {
            "provisioningClassName": _str(
                maxLength=253, pattern=_SUBDOMAIN, **({} if v1 else {"minLength": 1})
            ),
            "parameters": _map(_str(maxLength=255), maxProperties=100),
            "managedResources": _list(_str(), maxItems=100, **{"x-kubernetes-list-type": "set"}),
            "retryStrategy": _obj(
                backoff,
                default={
                    "backoffLimitCount": 3,
                    "backoffBaseSeconds": 60,
                    "backoffMaxSeconds": 1800,
                },
            ),
            "podSetUpdates": _obj({"nodeSelector": node_selector}),
            "podSetMergePolicy": _enum(
                ["IdenticalPodTemplates", "IdenticalWorkloadSchedulingRequirements"]
            ),
        },
        ["provisioningClassName"],
    )
    return _root(spec, None)


HOSTNAME_LABEL = "kubernetes.io/hostname"


def _topology(version: str) -> Schema:
    level = _obj({"nodeLabel": _str(maxLength=316, minLength=1, pattern=_LABEL_KEY)}, ["nodeLabel"])
    levels = _list(
        level,
        maxItems=16,
        minItems=1,
        **{"x-kubernetes-list-type": "atomic"},
        **_cel(
            ("self == oldSelf", "levels cannot change once set"),
            (
                "self.all(a, self.filter(b, b.nodeLabel == a.nodeLabel).size() == 1)",
                "each level must name a different node label",
            ),
            (
                f"!self.exists(l, l.nodeLabel == '{HOSTNAME_LABEL}') || "
                f"self[self.size() - 1].nodeLabel == '{HOSTNAME_LABEL}'",
                f"{HOSTNAME_LABEL} may only be the last (lowest) level",
            ),
        ),
    )
    return _root(_obj({"levels": levels}, ["levels"]), None)


def _multikueue_cluster(version: str) -> Schema:
    v1 = version == "v1beta1"
    profile = _obj({"name": _str(maxLength=256, minLength=1)}, ["name"])
    location = _str() if v1 else _str(maxLength=256, minLength=1)
    kube_config = _obj(
        {"location": location, "locationType": _enum(["Secret", "Path"], "Secret")},
        ["location", "locationType"] if v1 else ["location"],
    )
    conditions = _CONDITIONS_V1BETA1 if v1 else _CONDITIONS
    status = _obj({"conditions": conditions})
    if v1:
        spec = _obj({"kubeConfig": kube_config, "clusterProfileRef": profile}, ["kubeConfig"])
        return _root(spec, status)
    source = _obj(
        {"kubeConfig": kube_config, "clusterProfileRef": profile},
        **_cel(
            (
                "has(self.kubeConfig) != has(self.clusterProfileRef)",
                "set one of kubeConfig and clusterProfileRef, not both",
            )
        ),
    )
    return _root(_obj({"clusterSource": source}, ["clusterSource"]), status)


def _multikueue_config(version: str) -> Schema:
    if version == "v1beta1":
        clusters = _list(_str(), maxItems=20, minItems=1, **{"x-kubernetes-list-type": "set"})
        return _root(_obj({"clusters": clusters}, ["clusters"]), None)
    clusters = _list(
        _str(maxLength=256),
        maxItems=20,
        minItems=1,
        **{"x-kubernetes-list-type": "atomic"},
        **_cel(
            ("self.all(c, self.filter(d, d == c).size() == 1)", "each cluster may be named once")
        ),
    )
    spec = _obj(
        {"clusters": clusters, "quotaManagement": _enum(["Manual", "Automated"])}, ["clusters"]
    )
    return _root(spec, None)


def _root(spec: Schema, status: Schema | None, extra: dict[str, Any] | None = None) -> Schema:
    properties: dict[str, Schema] = {
        "apiVersion": _str(),
        "kind": _str(),
        "metadata": {"type": "object"},
        "spec": spec,
    }
    if status is not None:
        properties["status"] = status
    return {"type": "object", "properties": properties, **(extra or {})}


_BUILDERS = {
    "ResourceFlavor": _resource_flavor,
    "ClusterQueue": _cluster_queue,
    "Cohort": _cohort,
    "LocalQueue": _local_queue,
    "Workload": _workload,
    "WorkloadPriorityClass": _workload_priority_class,
    "AdmissionCheck": _admission_check,
    "ProvisioningRequestConfig": _provisioning_request_config,
    "Topology": _topology,
    "MultiKueueConfig": _multikueue_config,
    "MultiKueueCluster": _multikueue_cluster,
}
KINDS = tuple(_BUILDERS)
VERSIONS = ("v1beta2", "v1beta1")  # stored first


@functools.cache
def _described(kind: str, version: str) -> Schema:
    return _BUILDERS[kind](version)


def schema(kind: str, version: str) -> Schema:
    """The openAPIV3Schema of one kind at one version (a copy: callers may change it)."""
    return copy.deepcopy(_BUILDERS[kind](version))


@functools.cache
def field(kind: str, version: str, path: str) -> Schema:
    """The schema of one field: `spec.flavorFungibility.whenCanBorrow`, `[]` for list items.
    Read-only: it is the description itself (the parsers ask on every manifest)."""
    node = _described(kind, version)
    for part in re.findall(r"[^.\[\]]+|\[\]", path):
        found = node.get("items") if part == "[]" else (node.get("properties") or {}).get(part)
        if not isinstance(found, dict):
            raise KeyError(f"{kind} {version} has no field {path}")
        node = found
    return node


def enum(kind: str, version: str, path: str) -> tuple[str, ...]:
    """The values a field accepts at a version, in the schema's order."""
    return tuple(field(kind, version, path)["enum"])


def default(kind: str, version: str, path: str) -> Any:
    """What the API server fills in when the field is left out (None: nothing)."""
    return field(kind, version, path).get("default")


def value_renames(kind: str, path: str) -> dict[str, str]:
    """v1beta1's values of an enum that v1beta2 spells differently: old -> new."""
    return {old: new for p, old, new in VALUE_RENAMES.get(kind, ()) if p == path}

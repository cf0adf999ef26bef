"""Kueue's CustomResourceDefinitions, generated from this one source (deploy/crds/ is its output).

Names, scopes, short names, subresources, printer columns, enums, defaults and list limits
follow Kueue v0.19; v1beta2 is served and stored, v1beta1 is served and converted by the
webhook's /convert. Pod templates inside Workloads are kept as opaque objects
(x-kubernetes-preserve-unknown-fields) instead of Kueue's copy of the full PodTemplateSpec
schema: the API server stores them as sent, and Tower reads only what it needs.
"""

from __future__ import annotations

from typing import Any

import yaml

from extender.kube.resources import KUEUE_GROUP

Schema = dict[str, Any]

CONVERSION_SERVICE = {"name": "tower-webhook", "namespace": "tower-system", "path": "/convert"}
CA_INJECTION = "cert-manager.io/inject-ca-from"


def _str(**extra: Any) -> Schema:
    return {"type": "string", **extra}


def _int(**extra: Any) -> Schema:
    return {"type": "integer", "format": "int32", **extra}


def _enum(values: list[str], default: str | None = None) -> Schema:
    out: Schema = {"type": "string", "enum": values}
    if default is not None:
        out["default"] = default
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

_CONDITION = _obj(
    {
        "type": _str(maxLength=316),
        "status": _enum(["True", "False", "Unknown"]),
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        "lastTransitionTime": _str(format="date-time"),
        "reason": _str(maxLength=1024, minLength=1),
        "message": _str(maxLength=32768),
    },
    ["type", "status", "lastTransitionTime", "reason", "message"],
)
_CONDITIONS = _list(
    _CONDITION,
    maxItems=16,
    **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
)

_LABEL_SELECTOR = _obj(
    {
        "matchLabels": _map(_str()),
        "matchExpressions": _list(
            _obj(
                {"key": _str(), "operator": _str(), "values": _list(_str())},
                ["key", "operator"],
            )
        ),
    },
    **{"x-kubernetes-map-type": "atomic"},
)

_TAINT = _obj(
    {
        "key": _str(),
        "value": _str(),
        "effect": _enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        "timeAdded": _str(format="date-time"),
    },
    ["key", "effect"],
)
_TOLERATION = _obj(
    {
        "key": _str(),
        "operator": _enum(["Equal", "Exists"]),
        "value": _str(),
        "effect": _enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        "tolerationSeconds": {"type": "integer", "format": "int64"},
    }
)


def _resource_groups() -> Schema:
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
            "name": _str(maxLength=253),
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
            "coveredResources": _list(_str(), minItems=1, maxItems=64),
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
                "name": _str(),
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


_FAIR_SHARING_SPEC = _obj({"weight": _QUANTITY})
_FAIR_SHARING_STATUS = _obj(
    {"weightedShare": {"type": "integer", "format": "int64"}}, ["weightedShare"]
)
_STOP_POLICY = _enum(["None", "Hold", "HoldAndDrain"], "None")
_COUNTS = {
    "pendingWorkloads": _int(),
    "reservingWorkloads": _int(),
    "admittedWorkloads": _int(),
}


def _cluster_queue(version: str) -> Schema:
    v1 = version == "v1beta1"
    borrow = ["MayStopSearch", "TryNextFlavor"] + (["Borrow"] if v1 else [])
    preempt = ["MayStopSearch", "TryNextFlavor"] + (["Preempt"] if v1 else [])
    spec: dict[str, Schema] = {
        "resourceGroups": _resource_groups(),
        ("cohort" if v1 else "cohortName"): _str(maxLength=253),
        "queueingStrategy": _enum(["StrictFIFO", "BestEffortFIFO"], "BestEffortFIFO"),
        "namespaceSelector": _LABEL_SELECTOR,
        "flavorFungibility": _obj(
            {
                "whenCanBorrow": _enum(borrow, "MayStopSearch"),
                "whenCanPreempt": _enum(preempt, "TryNextFlavor"),
                "preference": _enum(["BorrowingOverPreemption", "PreemptionOverBorrowing"]),
            },
            default={},
        ),
        "preemption": _obj(
            {
                "withinClusterQueue": _enum(
                    ["Never", "LowerPriority", "LowerOrNewerEqualPriority"], "Never"
                ),
                "reclaimWithinCohort": _enum(["Never", "LowerPriority", "Any"], "Never"),
                "borrowWithinCohort": _obj(
                    {
                        "policy": _enum(["Never", "LowerPriority"], "Never"),
                        "maxPriorityThreshold": _int(),
                    }
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
        "admissionChecksStrategy": _obj(
            {
                "admissionChecks": _list(
                    _obj({"name": _str(), "onFlavors": _list(_str(), maxItems=64)}, ["name"]),
                    maxItems=64,
                )
            }
        ),
        "stopPolicy": _STOP_POLICY,
        "fairSharing": _FAIR_SHARING_SPEC,
        "admissionScope": _obj(
            {"admissionMode": _enum(["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"])},
            ["admissionMode"],
        ),
    }
    if v1:
        spec["admissionChecks"] = _list(_str(), maxItems=64)
    status: dict[str, Schema] = {
        "conditions": _CONDITIONS,
        "flavorsReservation": _flavor_usage(True),
        "flavorsUsage": _flavor_usage(True),
        **_COUNTS,
        "fairSharing": _FAIR_SHARING_STATUS,
    }
    if v1:
        status["pendingWorkloadsStatus"] = _OPAQUE
    return _root(_obj(spec), _obj(status))


def _local_queue(version: str) -> Schema:
    v1 = version == "v1beta1"
    spec = _obj(
        {
            "clusterQueue": _str(
                maxLength=253,
                **{
                    "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": "field is immutable"}
                    ]
                },
            ),
            "stopPolicy": _STOP_POLICY,
            "fairSharing": _FAIR_SHARING_SPEC,
        }
    )
    status: dict[str, Schema] = {
        "conditions": _CONDITIONS,
        **_COUNTS,
        "flavorsReservation": _flavor_usage(False),
        ("flavorUsage" if v1 else "flavorsUsage"): _flavor_usage(False),
    }
    if v1:
        status["flavors"] = _list(_OPAQUE)
    else:
        status["fairSharing"] = _OPAQUE
    return _root(spec, _obj(status))


def _workload(version: str) -> Schema:
    v1 = version == "v1beta1"
    pod_set = _obj(
        {
            "name": _str(maxLength=63, default="main"),
            "template": _OPAQUE,
            "count": _int(minimum=0, default=1),
            "minCount": _int(minimum=0),
            "topologyRequest": _OPAQUE,
        },
        ["template"],
    )
    spec: dict[str, Schema] = {
        "podSets": _list(
            pod_set,
            minItems=1,
            maxItems=18,
            **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
        ),
        "queueName": _str(maxLength=253),
        "priority": _int(),
        "active": {"type": "boolean", "default": True},
        "maximumExecutionTimeSeconds": _int(minimum=1),
    }
    if v1:
        spec["priorityClassName"] = _str(maxLength=253)
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
                "name": _str(maxLength=253),
            },
            ["group", "kind", "name"],
        )
        spec["preemptionGates"] = _list(_obj({"name": _str()}, ["name"]), maxItems=8)
    assignment = _obj(
        {
            "name": _str(),
            "flavors": _map(_str()),
            "resourceUsage": _map(_QUANTITY),
            "count": _int(minimum=0),
            "topologyAssignment": _OPAQUE,
            "delayedTopologyRequest": _str(),
        },
        ["name"],
    )
    status: dict[str, Schema] = {
        "conditions": _CONDITIONS,
        "admission": _obj(
            {
                "clusterQueue": _str(maxLength=253),
                "podSetAssignments": _list(
                    assignment,
                    maxItems=18,
                    **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
                ),
            },
            ["clusterQueue", "podSetAssignments"],
        ),
        "requeueState": _obj({"count": _int(), "requeueAt": _str(format="date-time")}),
        "reclaimablePods": _list(_obj({"name": _str(), "count": _int()}, ["name", "count"])),
        "admissionChecks": _list(_OPAQUE, maxItems=8),
        "resourceRequests": _list(_OPAQUE),
        "schedulingStats": _OPAQUE,
        (
            "accumulatedPastExexcutionTimeSeconds" if v1 else "accumulatedPastExecutionTimeSeconds"
        ): _int(),
    }
    return _root(_obj(spec), _obj(status))


def _resource_flavor(version: str) -> Schema:
    spec = _obj(
        {
            "nodeLabels": _map(_str(), maxProperties=8, **{"x-kubernetes-map-type": "atomic"}),
            "nodeTaints": _list(_TAINT, maxItems=8, **{"x-kubernetes-list-type": "atomic"}),
            "tolerations": _list(_TOLERATION, maxItems=8, **{"x-kubernetes-list-type": "atomic"}),
            "topologyName": _str(maxLength=253),
        }
    )
    return _root(spec, None)


def _cohort(version: str) -> Schema:
    spec = _obj(
        {
            "parentName": _str(maxLength=253),
            "resourceGroups": _resource_groups(),
            "fairSharing": _FAIR_SHARING_SPEC,
        }
    )
    return _root(spec, _obj({"conditions": _CONDITIONS, "fairSharing": _FAIR_SHARING_STATUS}))


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


def _root(spec: Schema, status: Schema | None) -> Schema:
    properties: dict[str, Schema] = {
        "apiVersion": _str(),
        "kind": _str(),
        "metadata": {"type": "object"},
        "spec": spec,
    }
    if status is not None:
        properties["status"] = status
    return {"type": "object", "properties": properties}


def _column(
    name: str, path: str, kind: str = "string", priority: int = 0, description: str = ""
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "jsonPath": path, "type": kind}
    if description:
        out["description"] = description
    if priority:
        out["priority"] = priority
    return out


def _cluster_queue_columns(cohort_path: str) -> list[dict[str, Any]]:
    return [
        _column("Cohort", cohort_path, description="Cohort that this ClusterQueue belongs to"),
        _column(
            "Strategy",
            ".spec.queueingStrategy",
            priority=1,
            description="The queueing strategy used to prioritize workloads",
        ),
        _column(
            "Pending Workloads",
            ".status.pendingWorkloads",
            "integer",
            description="Number of pending workloads",
        ),
        _column(
            "Admitted Workloads",
            ".status.admittedWorkloads",
            "integer",
            1,
            "Number of admitted workloads that haven't finished yet",
        ),
    ]


_KINDS: list[dict[str, Any]] = [
    {
        "kind": "ResourceFlavor",
        "plural": "resourceflavors",
        "scope": "Cluster",
        "shortNames": ["flavor", "flavors", "rf"],
        "schema": _resource_flavor,
        "status": False,
        "conversion": False,
        "columns": [],
    },
    {
        "kind": "ClusterQueue",
        "plural": "clusterqueues",
        "scope": "Cluster",
        "shortNames": ["cq"],
        "schema": _cluster_queue,
        "status": True,
        "conversion": True,
        "columns": {
            "v1beta2": _cluster_queue_columns(".spec.cohortName"),
            "v1beta1": _cluster_queue_columns(".spec.cohort"),
        },
    },
    {
        "kind": "Cohort",
        "plural": "cohorts",
        "scope": "Cluster",
        "shortNames": ["co"],
        "schema": _cohort,
        "status": True,
        "conversion": True,
        "columns": [],
    },
    {
        "kind": "LocalQueue",
        "plural": "localqueues",
        "scope": "Namespaced",
        "shortNames": ["queue", "queues", "lq"],
        "schema": _local_queue,
        "status": True,
        "conversion": True,
        "columns": [
            _column("ClusterQueue", ".spec.clusterQueue", description="Backing ClusterQueue"),
            _column(
                "Pending Workloads",
                ".status.pendingWorkloads",
                "integer",
                description="Number of pending workloads",
            ),
            _column(
                "Admitted Workloads",
                ".status.admittedWorkloads",
                "integer",
                description="Number of admitted workloads that haven't finished yet.",
            ),
        ],
    },
    {
        "kind": "Workload",
        "plural": "workloads",
        "scope": "Namespaced",
        "shortNames": ["kwl", "kueueworkload", "kueueworkloads"],
        "schema": _workload,
        "status": True,
        "conversion": True,
        "selectable": {"v1beta2": [{"jsonPath": ".status.admission.clusterQueue"}]},
        "columns": [
            _column(
                "Queue",
                ".spec.queueName",
                description="Name of the queue this workload was submitted to",
            ),
            _column(
                "Reserved in",
                ".status.admission.clusterQueue",
                description="Name of the ClusterQueue where the workload is reserving quota",
            ),
            _column(
                "Admitted",
                ".status.conditions[?(@.type=='Admitted')].status",
                description="Admission status",
            ),
            _column(
                "Finished",
                ".status.conditions[?(@.type=='Finished')].status",
                description="Workload finished",
            ),
            _column(
                "Age",
                ".metadata.creationTimestamp",
                "date",
                description="Time this workload was created",
            ),
        ],
    },
    {
        "kind": "WorkloadPriorityClass",
        "plural": "workloadpriorityclasses",
        "scope": "Cluster",
        "shortNames": ["wpc"],
        "schema": _workload_priority_class,
        "status": False,
        "conversion": False,
        "columns": [
            _column(
                "Value",
                ".value",
                "integer",
                description="Value of workloadPriorityClass's Priority",
            )
        ],
    },
]


def custom_resource_definitions() -> list[dict[str, Any]]:
    """Every CRD Tower serves, as the API server would be given it."""
    out = []
    for spec in _KINDS:
        versions = []
        for version in ("v1beta2", "v1beta1"):
            columns = spec["columns"]
            if isinstance(columns, dict):
                columns = columns[version]
            entry: dict[str, Any] = {
                "name": version,
                "served": True,
                "storage": version == "v1beta2",
                "schema": {"openAPIV3Schema": spec["schema"](version)},
            }
            if version == "v1beta1":
                entry["deprecated"] = True
                entry["deprecationWarning"] = "This version is deprecated. Use v1beta2 instead."
            if columns:
                entry["additionalPrinterColumns"] = columns
            if spec["status"]:
                entry["subresources"] = {"status": {}}
            selectable = spec.get("selectable", {}).get(version)
            if selectable:
                entry["selectableFields"] = selectable
            versions.append(entry)
        crd: dict[str, Any] = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{spec['plural']}.{KUEUE_GROUP}"},
            "spec": {
                "group": KUEUE_GROUP,
                "names": {
                    "kind": spec["kind"],
                    "listKind": f"{spec['kind']}List",
                    "plural": spec["plural"],
                    "singular": spec["kind"].lower(),
                    "shortNames": spec["shortNames"],
                    "categories": ["kueue"],
                },
                "scope": spec["scope"],
                "versions": versions,
            },
        }
        if spec["conversion"]:
            # With cert-manager (deploy/cert-manager, or the chart's certManager.enabled), its
            # cainjector fills the caBundle; without it, `python -m certs bootstrap` does and
            # the annotation does nothing.
            crd["metadata"]["annotations"] = {CA_INJECTION: "tower-system/tower-webhook"}
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"service": dict(CONVERSION_SERVICE)},
                },
            }
        out.append(crd)
    return out


def rendered() -> dict[str, str]:
    """File name → YAML text, exactly as written under deploy/crds/."""
    header = "# Generated by `python -m extender crds --out deploy/crds`; do not edit.\n"
    return {
        f"{crd['spec']['names']['plural']}.yaml": header
        + yaml.safe_dump(crd, sort_keys=False, width=100)
        for crd in custom_resource_definitions()
    }

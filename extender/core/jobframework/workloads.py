"""Workload objects (kueue.x-k8s.io v1beta2 and v1beta1) into core models.

The spec becomes a `Workload`; the status says whether it holds quota (its `QuotaReserved`
condition and `status.admission`) and whether it finished.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from extender.core.api.admission_gates import gated_by
from extender.core.api.models import Admission, PodSetAssignment, Workload
from extender.core.api.parse import ManifestError, as_map, check_version, name_of
from extender.core.api.quantity import QuantityError, to_amount
from extender.core.api.topology import decode, topology_request
from extender.core.api.unacted import blocking
from extender.core.jobframework import slices
from extender.core.jobframework.jobs import pod_set

_MAX_POD_SETS = 18

# Workload condition types (Kueue's).
QUOTA_RESERVED = "QuotaReserved"
FINISHED = "Finished"


def creation_seconds(value: Any, path: str = "metadata.creationTimestamp") -> float:
    """An RFC 3339 timestamp as seconds since the epoch (0 when absent)."""
    if value in (None, ""):
        return 0.0
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ManifestError(path, f"{value!r} is not an RFC 3339 time") from None


def workload(obj: Mapping[str, Any], *, creation_time: float | None = None) -> Workload:
    """A Workload manifest: podSets, queueName and priority, in either served version."""
    version = check_version(obj, "Workload")
    name = name_of(obj)
    meta = obj.get("metadata") or {}
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise ManifestError("spec", "is required")
    raw_sets = spec.get("podSets")
    if not isinstance(raw_sets, list) or not raw_sets:
        raise ManifestError("spec.podSets", "must list at least one pod set")
    if len(raw_sets) > _MAX_POD_SETS:
        raise ManifestError("spec.podSets", f"must have at most 18 items, got {len(raw_sets)}")
    sets = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_sets):
        path = f"spec.podSets[{i}]"
        if not isinstance(raw, Mapping):
            raise ManifestError(path, "must be an object")
        ps_name = str(raw.get("name") or "main")
        if ps_name in seen:
            raise ManifestError(f"{path}.name", f"pod set {ps_name!r} is listed twice")
        seen.add(ps_name)
        count = raw.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ManifestError(f"{path}.count", f"must be a non-negative integer, got {count!r}")
        template = raw.get("template")
        if not isinstance(template, Mapping):
            raise ManifestError(f"{path}.template", "is required")
        min_count = raw.get("minCount")
        if min_count is not None and (
            isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1
        ):
            # Kueue's schema says so; the cycle compares it with the count.
            raise ManifestError(
                f"{path}.minCount", f"must be a positive integer, got {min_count!r}"
            )
        sets.append(
            pod_set(
                ps_name,
                template,
                count,
                f"{path}.template",
                min_count,
                topology_request(raw.get("topologyRequest")),
            )
        )
    queue = spec.get("queueName")
    if not queue:
        raise ManifestError("spec.queueName", "is required")
    priority = spec.get("priority", 0)
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise ManifestError("spec.priority", f"must be an integer, got {priority!r}")
    if version.endswith("v1beta1"):
        class_name = spec.get("priorityClassName")
        source = str(spec.get("priorityClassSource") or "")
    else:
        ref = spec.get("priorityClassRef") or {}
        class_name = ref.get("name")
        source = {
            "WorkloadPriorityClass": "kueue.x-k8s.io/workloadpriorityclass",
            "PriorityClass": "scheduling.k8s.io/priorityclass",
        }.get(str(ref.get("kind")), "")
    owners = meta.get("ownerReferences") or []
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else {})
    return Workload(
        namespace=str(meta.get("namespace") or "default"),
        name=name,
        uid=str(meta.get("uid") or ""),
        queue_name=str(queue),
        pod_sets=tuple(sets),
        priority=priority,
        priority_class_name=str(class_name) if class_name else None,
        priority_class_source=source,
        creation_time=(
            creation_seconds(meta.get("creationTimestamp"))
            if creation_time is None
            else creation_time
        ),
        owner_kind=str(owner.get("kind") or ""),
        owner_name=str(owner.get("name") or ""),
        max_execution_seconds=_positive(spec.get("maximumExecutionTimeSeconds")),
        unacted=blocking("Workload", obj),
        admission_gated_by=gated_by(meta.get("annotations")),
        replacement_for=slices.replacement_for(meta.get("annotations")),
    )


def _positive(value: Any) -> int | None:
    """spec.maximumExecutionTimeSeconds: unset, or at least 1 (Kueue's schema)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ManifestError(
            "spec.maximumExecutionTimeSeconds", f"must be a positive integer, got {value!r}"
        )
    return value


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """One status condition of an object, by type (a malformed status has none)."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for entry in conditions if isinstance(conditions, list) else ():
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            return entry
    return None


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    """Whether a status condition is True."""
    entry = condition(obj, kind)
    return entry is not None and entry.get("status") == "True"


def condition_time(obj: Mapping[str, Any], kind: str, default: float) -> float:
    """When a status condition last changed (seconds since the epoch), else `default`."""
    entry = condition(obj, kind)
    if entry is None or not entry.get("lastTransitionTime"):
        return default
    return creation_seconds(entry["lastTransitionTime"], f"status.conditions[{kind}]")


def admission_of(obj: Mapping[str, Any]) -> Admission | None:
    """status.admission as an Admission (None when there is none or it is broken)."""
    status = obj.get("status")
    raw = status.get("admission") if isinstance(status, Mapping) else None
    if not isinstance(raw, Mapping) or not raw.get("clusterQueue"):
        return None
    try:
        assignments = []
        for entry in raw.get("podSetAssignments") or []:
            entry = as_map(entry, "status.admission.podSetAssignments[]")
            usage = {
                str(r): to_amount(str(r), v) for r, v in (entry.get("resourceUsage") or {}).items()
            }
            raw_topology = entry.get("topologyAssignment")
            assignments.append(
                PodSetAssignment(
                    str(entry.get("name", "main")),
                    {str(r): str(f) for r, f in (entry.get("flavors") or {}).items()},
                    usage,
                    int(entry.get("count") or 0),
                    decode(raw_topology) if isinstance(raw_topology, Mapping) else None,
                    entry.get("delayedTopologyRequest") or None,
                )
            )
    except (ManifestError, QuantityError, TypeError, ValueError, AttributeError, LookupError):
        return None
    return Admission(str(raw["clusterQueue"]), tuple(assignments))

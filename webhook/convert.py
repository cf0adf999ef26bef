"""CRD conversion between kueue.x-k8s.io/v1beta1 and v1beta2 (ConversionReview)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from extender.core.api import schema, topology
from webhook.reviews import ReviewError

GROUP = "kueue.x-k8s.io"
V1BETA1, V1BETA2 = f"{GROUP}/v1beta1", f"{GROUP}/v1beta2"
CONVERSION_VERSION = "apiextensions.k8s.io/v1"

_PRIORITY_SOURCES = {
    "kueue.x-k8s.io/workloadpriorityclass": ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}
_SOURCES_BY_KIND = {kind: source for source, (_, kind) in _PRIORITY_SOURCES.items()}

Obj = dict[str, Any]


def _parent(obj: Obj, path: str) -> tuple[Any, str]:
    """The object holding the last name of a dotted path (None when it is not there)."""
    *parents, last = path.split(".")
    node: Any = obj
    for name in parents:
        node = node.get(name) if isinstance(node, Mapping) else None
    return node, last


def _renamed(obj: Obj, kind: str, up: bool) -> None:
    """The fields and values v1beta1 spells differently (extender/core/api/schema.py), renamed."""
    for old, new in schema.RENAMES.get(kind, ()):
        source, target = (old, new) if up else (new, old)
        node, name = _parent(obj, source)
        if isinstance(node, dict) and name in node:
            node[target.rsplit(".", 1)[-1]] = node.pop(name)
    if up:  # v1beta1 accepts every v1beta2 value: only the way up has values to rename
        for path, old_value, new_value in schema.VALUE_RENAMES.get(kind, ()):
            node, name = _parent(obj, path)
            if isinstance(node, dict) and node.get(name) == old_value:
                node[name] = str(new_value)


def _cq_up(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    checks = spec.pop("admissionChecks", None)
    if checks and "admissionChecksStrategy" not in spec:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": c} for c in checks]}
    status = obj.get("status") or {}
    status.pop("pendingWorkloadsStatus", None)
    (status.get("fairSharing") or {}).pop("admissionFairSharingStatus", None)


def _unchanged(obj: Obj) -> None:
    """Nothing beyond the renames (`_renamed`)."""


def _lq_up(obj: Obj) -> None:
    (obj.get("status") or {}).pop("flavors", None)


def _wl_up(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    name = spec.pop("priorityClassName", None)
    source = spec.pop("priorityClassSource", None)
    if name:
        group, kind = _PRIORITY_SOURCES.get(str(source), ("scheduling.k8s.io", "PriorityClass"))
        spec["priorityClassRef"] = {"group": group, "kind": kind, "name": name}
    _topology_assignments(obj, topology.from_v1beta1)


def _topology_assignments(obj: Obj, form: Callable[[Mapping[str, Any]], Obj]) -> None:
    """Each podSet assignment's topologyAssignment in the other version's form (v1beta1 lists
    every domain; v1beta2 compacts them)."""
    admission = (obj.get("status") or {}).get("admission")
    if not isinstance(admission, Mapping):
        return
    for psa in admission.get("podSetAssignments") or ():
        if isinstance(psa, dict) and isinstance(psa.get("topologyAssignment"), Mapping):
            psa["topologyAssignment"] = form(psa["topologyAssignment"])


def _wl_down(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    ref = spec.pop("priorityClassRef", None)
    if isinstance(ref, Mapping) and ref.get("name"):
        spec["priorityClassName"] = ref["name"]
        spec["priorityClassSource"] = _SOURCES_BY_KIND.get(str(ref.get("kind")), "")
    spec.pop("preemptionGates", None)
    for pod_set in spec.get("podSets") or ():
        request = pod_set.get("topologyRequest") if isinstance(pod_set, dict) else None
        if isinstance(request, dict):
            # v1beta1 has no multi-layer slices; Kueue's conversion drops them too.
            request.pop("podsetSliceRequiredTopologyConstraints", None)
    (obj.get("status") or {}).pop("preemptionGates", None)
    _topology_assignments(obj, topology.to_v1beta1)


_CLUSTER_SOURCES = ("kubeConfig", "clusterProfileRef")


def _mkc_up(obj: Obj) -> None:
    """v1beta1 names where a worker's kubeconfig is at the top of spec; v1beta2 under
    spec.clusterSource."""
    spec = obj.setdefault("spec", {})
    source = {k: spec.pop(k) for k in _CLUSTER_SOURCES if k in spec}
    if source:
        spec["clusterSource"] = source


def _mkc_down(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    source = spec.pop("clusterSource", None)
    if isinstance(source, Mapping):
        spec.update({k: source[k] for k in _CLUSTER_SOURCES if k in source})


_CONVERTERS: dict[str, tuple[Callable[[Obj], None], Callable[[Obj], None]]] = {
    "ClusterQueue": (_cq_up, _unchanged),
    "LocalQueue": (_lq_up, _unchanged),
    "Workload": (_wl_up, _wl_down),
    "Cohort": (_unchanged, _unchanged),  # field-identical across versions
    "MultiKueueCluster": (_mkc_up, _mkc_down),
}


def convert_object(obj: Mapping[str, Any], desired: str) -> Obj:
    """One object converted to the desired apiVersion (a copy; the input is untouched)."""
    out: Obj = copy.deepcopy(dict(obj))
    current = out.get("apiVersion")
    kind = str(out.get("kind"))
    if current == desired:
        return out
    if {current, desired} != {V1BETA1, V1BETA2}:
        raise ValueError(f"cannot convert {kind} from {current!r} to {desired!r}")
    up, down = _CONVERTERS.get(kind, (_unchanged, _unchanged))
    (up if desired == V1BETA2 else down)(out)
    _renamed(out, kind, up=desired == V1BETA2)
    out["apiVersion"] = desired
    return out


def convert(review: Any) -> dict[str, Any]:
    """The ConversionReview answer; a failure is reported in `result`, never as HTTP 5xx."""
    if not isinstance(review, Mapping) or review.get("kind") != "ConversionReview":
        raise ReviewError(
            f"expected kind ConversionReview, got {review.get('kind')!r}"
            if isinstance(review, Mapping)
            else "body is not a JSON object"
        )
    request = review.get("request")
    if not isinstance(request, Mapping) or not request.get("uid"):
        raise ReviewError("ConversionReview request has no uid")
    desired = request.get("desiredAPIVersion")
    objects = request.get("objects")
    response: dict[str, Any] = {"uid": request["uid"]}
    try:
        if not isinstance(desired, str) or not isinstance(objects, list):
            raise ValueError("request needs desiredAPIVersion and objects")
        if not all(isinstance(o, Mapping) for o in objects):
            raise ValueError("every object must be a JSON object")
        response["convertedObjects"] = [convert_object(o, desired) for o in objects]
        response["result"] = {"status": "Success"}
    except ValueError as err:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": str(err)}
    return {
        "apiVersion": review.get("apiVersion", CONVERSION_VERSION),
        "kind": "ConversionReview",
        "response": response,
    }

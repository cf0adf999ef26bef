"""Conversion against the CRDs themselves: every field both versions serve survives a read at
v1beta1 and a write back at v1beta2, for an object that sets every field of the schema.

The object is made from Tower's v1beta2 schema (each string "x", each number 1, each list one
item, each map one key). Between the two conversions the v1beta1 object is pruned to the
v1beta1 schema, as kube-apiserver prunes what it serves. What may be lost is exactly what
v1beta1 has no field for.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.kube.generators.crds import custom_resource_definitions
from webhook.convert import convert_object

KINDS = ("ClusterQueue", "Cohort", "LocalQueue", "Workload", "MultiKueueCluster")
# v1beta2 field -> the v1beta1 field it is read as (kube/convert.py's renames and reshapes).
COUNTERPARTS = {
    "ClusterQueue": {"spec.cohortName": "spec.cohort"},
    "LocalQueue": {"status.flavorsUsage": "status.flavorUsage"},
    "Workload": {
        "spec.priorityClassRef": "spec.priorityClassName",
        "status.accumulatedPastExecutionTimeSeconds": "status.accumulatedPastExexcutionTimeSeconds",
    },
    "MultiKueueCluster": {
        "spec.clusterSource.kubeConfig": "spec.kubeConfig",
        "spec.clusterSource.clusterProfileRef": "spec.clusterProfileRef",
    },
}


def schema(kind: str, version: str) -> dict[str, Any]:
    crd = next(c for c in custom_resource_definitions() if c["spec"]["names"]["kind"] == kind)
    entry = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return entry["schema"]["openAPIV3Schema"]


def sample(s: dict[str, Any]) -> Any:
    """A value that sets everything a schema has."""
    if s.get("x-kubernetes-preserve-unknown-fields"):
        return {"kept": "whole"}
    if "enum" in s:
        return s["enum"][-1]
    kind = s.get("type")
    if kind == "object" and "properties" in s:
        return {k: sample(v) for k, v in s["properties"].items()}
    if kind == "object" and isinstance(s.get("additionalProperties"), dict):
        return {"key": sample(s["additionalProperties"])}
    if kind == "array":
        return [sample(s["items"])]
    if kind == "integer" or s.get("x-kubernetes-int-or-string"):
        return 1
    if kind == "boolean":
        return True
    return "x"


def prune(value: Any, s: dict[str, Any]) -> Any:
    """What kube-apiserver keeps of a value under a structural schema."""
    if s.get("x-kubernetes-preserve-unknown-fields") or not isinstance(value, dict | list):
        return value
    if isinstance(value, list):
        return [prune(v, s.get("items") or {}) for v in value]
    if "properties" in s:
        return {k: prune(v, s["properties"][k]) for k, v in value.items() if k in s["properties"]}
    extra = s.get("additionalProperties")
    return {k: prune(v, extra) for k, v in value.items()} if isinstance(extra, dict) else value


def leaves(value: Any, path: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value and "kept" not in value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(leaves(v, f"{path}.{k}" if path else k))
        return out
    if isinstance(value, list) and value:
        return leaves(value[0], path + "[]")
    return {path: value}


@pytest.mark.parametrize("kind", KINDS)
def test_every_field_both_versions_serve_survives_a_read_at_v1beta1(kind: str) -> None:
    full = sample(schema(kind, "v1beta2"))
    full.update(apiVersion="kueue.x-k8s.io/v1beta2", kind=kind, metadata={"name": "n"})
    if kind == "Workload":  # a reference v1beta1 can spell: a PriorityClass
        full["spec"]["priorityClassRef"] = {
            "group": "scheduling.k8s.io",
            "kind": "PriorityClass",
            "name": "x",
        }
    served = prune(convert_object(full, "kueue.x-k8s.io/v1beta1"), schema(kind, "v1beta1"))
    back = convert_object(copy.deepcopy(served), "kueue.x-k8s.io/v1beta2")
    v1beta1_paths = set(leaves(sample(schema(kind, "v1beta1"))))
    renamed = COUNTERPARTS.get(kind, {})
    lost = []
    for path, value in leaves(full).items():
        if path.split(".")[0] in ("apiVersion", "kind", "metadata"):
            continue
        counterpart = next(
            (path.replace(new, old, 1) for new, old in renamed.items() if path.startswith(new)),
            path,
        )
        if counterpart not in v1beta1_paths and not any(
            counterpart.startswith(old) for old in renamed.values()
        ):
            continue  # v1beta1 has no field for it: lost by any server
        if leaves(back).get(path) != value:
            lost.append(path)
    assert lost == []

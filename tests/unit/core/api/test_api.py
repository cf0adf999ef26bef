"""The API description (extender/core/api/schema.py) is the one place enums, defaults and version
renames come from: the parsers accept exactly what the schema does, fill in its defaults,
and the schema names each renamed field by its version's name."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from extender.core.api import parse, schema

CQ: dict[str, Any] = {
    "kind": "ClusterQueue",
    "metadata": {"name": "cq"},
    "spec": {"namespaceSelector": {}},
}
LQ: dict[str, Any] = {
    "kind": "LocalQueue",
    "metadata": {"name": "lq", "namespace": "default"},
    "spec": {"clusterQueue": "cq"},
}
# (kind, path, what the parsed object says of it)
READ = [
    ("ClusterQueue", "spec.queueingStrategy", lambda q: q.queueing_strategy),
    ("ClusterQueue", "spec.stopPolicy", lambda q: q.stop_policy),
    ("ClusterQueue", "spec.flavorFungibility.whenCanBorrow", lambda q: q.flavor_fungibility.when_can_borrow),
    ("ClusterQueue", "spec.flavorFungibility.whenCanPreempt", lambda q: q.flavor_fungibility.when_can_preempt),
    ("ClusterQueue", "spec.preemption.withinClusterQueue", lambda q: q.preemption.within_cluster_queue),
    ("ClusterQueue", "spec.preemption.reclaimWithinCohort", lambda q: q.preemption.reclaim_within_cohort),
    ("LocalQueue", "spec.stopPolicy", lambda q: q.stop_policy),
]  # fmt: skip
PARSERS = {"ClusterQueue": parse.cluster_queue, "LocalQueue": parse.local_queue}
BASE = {"ClusterQueue": CQ, "LocalQueue": LQ}


def manifest(kind: str, version: str, path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(BASE[kind])
    obj["apiVersion"] = f"kueue.x-k8s.io/{version}"
    node = obj
    *parents, last = path.split(".")
    for name in parents:
        node = node.setdefault(name, {})
    if value is not None:
        node[last] = value
    return obj


CASES = [(k, v, p, read) for k, p, read in READ for v in schema.VERSIONS]


@pytest.mark.parametrize(("kind", "version", "path", "read"), CASES)
def test_the_parser_accepts_exactly_the_schemas_values_and_fills_its_default(
    kind: str, version: str, path: str, read: Any
) -> None:
    renames = schema.value_renames(kind, path) if version == "v1beta1" else {}
    for value in schema.enum(kind, version, path):
        parsed = PARSERS[kind](manifest(kind, version, path, value))
        assert str(read(parsed)) == renames.get(value, value)
    absent = PARSERS[kind](manifest(kind, version, path, None))
    assert str(read(absent)) == schema.default(kind, version, path)
    with pytest.raises(parse.ManifestError) as refused:
        PARSERS[kind](manifest(kind, version, path, "NotAValue"))
    assert refused.value.path == path


@pytest.mark.parametrize("kind", sorted(schema.RENAMES))
def test_each_version_names_a_renamed_field_its_own_way(kind: str) -> None:
    for old, new in schema.RENAMES[kind]:
        with pytest.raises(KeyError):
            schema.field(kind, "v1beta1", new)
        with pytest.raises(KeyError):
            schema.field(kind, "v1beta2", old)
        assert schema.field(kind, "v1beta1", old) == schema.field(kind, "v1beta2", new)


def test_a_renamed_value_is_v1beta1s_only() -> None:
    for kind, renames in schema.VALUE_RENAMES.items():
        for path, old, new in renames:
            assert old in schema.enum(kind, "v1beta1", path)
            assert old not in schema.enum(kind, "v1beta2", path)
            assert new in schema.enum(kind, "v1beta2", path)

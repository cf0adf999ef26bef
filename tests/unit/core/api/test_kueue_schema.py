"""Tower's CRDs accept every field of Kueue v0.19.2's, with the same schema keywords.

Walks every property path of Kueue's published schemas (tests/data/kueue-v0.19.2/, with their
source and licence) at every version, and compares each path's keywords with Tower's
generated CRDs (extender/kube/generators/crds.py). The one deliberate difference: a Workload's pod
templates are kept whole (x-kubernetes-preserve-unknown-fields), so the API server stores
what is sent; kube-apiserver does not validate them for Kueue either until a Pod is made.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from extender.core.api.unacted import UNACTED
from extender.kube.generators import api_fields
from extender.kube.generators.crds import custom_resource_definitions

ROOT = Path(__file__).resolve().parents[4]
DATA = ROOT / "tests" / "data" / "kueue-v0.19.2"
PLURALS = sorted(p.stem for p in DATA.glob("*.json"))
KEYWORDS = (
    "type",
    "enum",
    "default",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "nullable",
    "anyOf",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-int-or-string",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-validations",
)
# Kept whole on purpose (see the module's docstring).
WHOLE = {("workloads", ".spec.podSets[].template")}
WHOLE_BY_KIND = [("Workload", "spec.podSets[].template")]


def kueue(plural: str) -> dict[str, Any]:
    return json.loads((DATA / f"{plural}.json").read_text())["spec"]


def tower(plural: str) -> dict[str, Any]:
    return next(
        c["spec"] for c in custom_resource_definitions() if c["spec"]["names"]["plural"] == plural
    )


def walk(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from walk(schema["items"], path + "[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from walk(schema["additionalProperties"], path + "{}")


def find(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    for part in re.findall(r"\.[^.\[{]+|\[\]|\{\}", path):
        if part == "[]":
            found = schema.get("items")
        elif part == "{}":
            found = schema.get("additionalProperties")
        else:
            found = (schema.get("properties") or {}).get(part[1:])
        if not isinstance(found, dict):
            return None
        schema = found
    return schema


def differences(plural: str, version: str) -> list[str]:
    theirs = next(v for v in kueue(plural)["versions"] if v["name"] == version)
    ours = next((v for v in tower(plural)["versions"] if v["name"] == version), None)
    if ours is None:
        return [f"version {version} is not served"]
    out = []
    for key in ("served", "storage", "subresources"):
        if theirs.get(key) != ours.get(key):
            out.append(f"{key}: Kueue {theirs.get(key)!r}, Tower {ours.get(key)!r}")
    ours_schema = ours["schema"]["openAPIV3Schema"]
    whole = tuple(path for p, path in WHOLE if p == plural)
    for path, their in walk(theirs["schema"]["openAPIV3Schema"]):
        if any(path == w or path.startswith((w + ".", w + "[", w + "{")) for w in whole):
            continue
        our = find(ours_schema, path)
        if our is None:
            out.append(f"{path}: missing")
            continue
        for key in KEYWORDS:
            if key == "x-kubernetes-validations":
                # Tower words its own rules: as many as Kueue has, wherever Kueue has some
                # (test_cel_rules.py checks that they decide alike).
                theirs_n, ours_n = len(their.get(key) or ()), len(our.get(key) or ())
                if theirs_n != ours_n:
                    out.append(f"{path}: Kueue has {theirs_n} CEL rules, Tower {ours_n}")
                continue
            if their.get(key) != our.get(key):
                out.append(f"{path} {key}: Kueue {their.get(key)!r}, Tower {our.get(key)!r}")
        if set(their.get("required") or ()) != set(our.get("required") or ()):
            out.append(
                f"{path} required: Kueue {their.get('required')}, Tower {our.get('required')}"
            )
        if bool(their.get("properties")) != bool(our.get("properties")):
            out.append(f"{path}: Kueue {'has' if their.get('properties') else 'has no'} properties")
    return out


CASES = [(p, v["name"]) for p in PLURALS for v in kueue(p)["versions"]]


def test_the_copy_of_kueues_schema_is_there():
    assert len(PLURALS) == 11
    assert sum(1 for p, v in CASES for _ in walk(
        next(x for x in kueue(p)["versions"] if x["name"] == v)["schema"]["openAPIV3Schema"]
    )) > 3000  # fmt: skip


@pytest.mark.parametrize(("plural", "version"), CASES)
def test_every_property_path_of_kueues_schema_is_towers(plural, version):
    assert differences(plural, version) == []


@pytest.mark.parametrize("plural", PLURALS)
def test_names_scope_and_printer_columns_are_kueues(plural):
    theirs, ours = kueue(plural), tower(plural)
    assert ours["scope"] == theirs["scope"]
    for key in ("kind", "listKind", "plural", "singular"):
        assert ours["names"][key] == theirs["names"][key]
    assert set(ours["names"].get("shortNames", [])) == set(theirs["names"].get("shortNames", []))
    for version in theirs["versions"]:
        mine = next(v for v in ours["versions"] if v["name"] == version["name"])

        def columns(v: dict[str, Any]) -> list[tuple[Any, ...]]:
            return [
                (c["name"], c["jsonPath"], c["type"], c.get("priority", 0))
                for c in v.get("additionalPrinterColumns") or []
            ]

        assert columns(mine) == columns(version)


def test_docs_list_every_field_and_what_tower_does_with_it():
    """docs/kueue-fields.md is what `python -m extender fields` prints, and it names every
    spec field of Kueue's schema (a field Tower does not act on stands for what is below it).
    """
    page = api_fields.page()
    assert (ROOT / "docs" / "kueue-fields.md").read_text() == page, (
        "docs/kueue-fields.md is stale: python -m extender fields > docs/kueue-fields.md"
    )
    listed = {
        (kind, line.split("`")[1])
        for kind in api_fields.KINDS
        for line in page.split(f"## {kind}\n")[1].split("\n## ")[0].splitlines()
        if line.startswith("| `")
    }
    stops = [(f.kind, f.path) for f in UNACTED]
    for plural in PLURALS:
        spec = kueue(plural)
        kind = spec["names"]["kind"]
        for version in spec["versions"]:
            root = version["schema"]["openAPIV3Schema"]
            for path, _ in walk(root):
                dotted = path.lstrip(".")
                if not dotted or dotted.endswith(("[]", "{}")):
                    continue  # a list's or map's entries: the list or map is the field
                if kind == "WorkloadPriorityClass":
                    if dotted.split(".")[0] in ("apiVersion", "kind", "metadata"):
                        continue
                elif not dotted.startswith("spec."):
                    continue
                if any(
                    k == kind and dotted.startswith((p + ".", p + "["))
                    for k, p in (*stops, *WHOLE_BY_KIND)
                ):
                    continue
                dotted = dotted.replace("{}", "")
                assert (kind, dotted) in listed, f"{kind} {dotted} is not in docs/kueue-fields.md"

"""kueuectl's flag values read into Kueue's fields: quotas, taints, tolerations, labels.

Quotas are `FLAVOR:RESOURCE=QUANTITY;...`; a quantity is written as Go's resource.Quantity
writes it, so the object sent is the one kueuectl sends. Every error names the flag and the
value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from extender.core.api.quantity import QuantityError, parse_quantity
from extender.kube.plugin.output import CliError

Obj = dict[str, Any]

NOMINAL, BORROWING, LENDING = "nominal-quota", "borrowing-limit", "lending-limit"
_FIELD = {NOMINAL: "nominalQuota", BORROWING: "borrowingLimit", LENDING: "lendingLimit"}
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_FLAVOR = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_PREFIX = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_EXPONENT = re.compile(r"^[eE][-+]?[0-9]+$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def canonical_quantity(text: str) -> str:
    """A quantity as Go spells it after parsing: 1000m -> 1, 1536Mi -> 1536Mi, 2048Mi -> 2Gi,
    1.5 -> 1500m, 1e3 -> 1e3 (its format, binary, decimal or exponent, is kept)."""
    value = parse_quantity(text)  # rounded up to nano-units, as Go rounds
    if value == 0:
        return "0"
    sign, value = ("-", -value) if value < 0 else ("", value)
    suffix = text.strip().lstrip("+-").lstrip("0123456789.")
    binary = suffix.endswith("i")
    if binary and value >= 1024 and value.denominator == 1:
        amount, power = int(value), 0
        while amount % 1024 == 0 and power < len(_BINARY) - 1:
            amount, power = amount // 1024, power + 1
        return f"{sign}{amount}{_BINARY[power]}"
    mantissa, exponent = _decimal(value)
    exponent_format = _EXPONENT.match(suffix) is not None
    shift = exponent % 3  # down to a multiple of 3, as Go's AsCanonicalBytes does
    mantissa, exponent = mantissa * 10**shift, exponent - shift
    if exponent_format:
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    if exponent in _DECIMAL:
        return f"{sign}{mantissa}{_DECIMAL[exponent]}"
    return f"{sign}{mantissa}e{exponent}"


def _decimal(value: Fraction) -> tuple[int, int]:
    """value = mantissa * 10**exponent, the mantissa without trailing zeros."""
    exponent = 0
    while value.denominator != 1:
        value, exponent = value * 10, exponent - 1
    mantissa = int(value)
    while mantissa % 10 == 0:
        mantissa, exponent = mantissa // 10, exponent + 1
    return mantissa, exponent


@dataclass
class _Flavor:
    """One flavor's quotas as the flags give them: resource -> field -> quantity."""

    name: str
    resources: dict[str, dict[str, str]] = field(default_factory=dict)
    flag: str = ""


def resource_groups(flags: dict[str, list[str]]) -> list[Obj]:
    """spec.resourceGroups from --nominal-quota, --borrowing-limit and --lending-limit, merged
    as kueuectl merges them: a flavor's specs name the same resources; flavors covering the
    same resources share a group; a resource is in one group only."""
    flavors: dict[str, _Flavor] = {}
    for flag in (NOMINAL, BORROWING, LENDING):
        given = [item for value in flags.get(flag) or [] for item in value.split(",") if item]
        for spec in given:
            name, quotas = _quota_spec(flag, spec)
            known = flavors.get(name)
            if known is None:
                flavors[name] = _Flavor(name, {r: {_FIELD[flag]: q} for r, q in quotas.items()})
                flavors[name].flag = flag
                continue
            if set(quotas) != set(known.resources):
                raise CliError(
                    f"--{flag} {spec}: flavor {name} must name the same resources as in "
                    f"--{known.flag} ({', '.join(known.resources)})"
                )
            for resource, quantity in quotas.items():
                known.resources[resource].setdefault(_FIELD[flag], quantity)
    groups: list[tuple[list[str], list[_Flavor]]] = []
    for flavor in flavors.values():
        covered = list(flavor.resources)
        same = next((g for g in groups if sorted(g[0]) == sorted(covered)), None)
        if same is not None:
            same[1].append(flavor)
            continue
        for other, members in groups:
            if set(other) & set(covered):
                raise CliError(
                    f"--{flavor.flag}: flavor {flavor.name} covers {', '.join(covered)} and "
                    f"flavor {members[0].name} covers {', '.join(other)}: flavors share all "
                    "of their resources or none"
                )
        groups.append((covered, [flavor]))
    return [
        {
            "coveredResources": covered,
            "flavors": [
                {
                    "name": f.name,
                    "resources": [
                        {"name": r, "nominalQuota": q.get("nominalQuota", "0")}
                        | {k: v for k, v in q.items() if k != "nominalQuota"}
                        for r, q in f.resources.items()
                    ],
                }
                for f in members
            ],
        }
        for covered, members in groups
    ]


def _quota_spec(flag: str, spec: str) -> tuple[str, dict[str, str]]:
    """`alpha:cpu=9;memory=36Gi` -> ("alpha", {"cpu": "9", "memory": "36Gi"})."""
    usage = f"--{flag} {spec}: must be FLAVOR:RESOURCE=QUANTITY[;RESOURCE=QUANTITY...]"
    flavor, colon, rest = spec.strip().partition(":")
    if not colon or not _FLAVOR.match(flavor.strip()):
        raise CliError(usage)
    quotas: dict[str, str] = {}
    for item in rest.strip().rstrip(";").split(";"):
        resource, equals, quantity = item.partition("=")
        resource, quantity = resource.strip(), quantity.strip()
        if not equals or not resource or not quantity:
            raise CliError(usage)
        if resource in quotas:
            raise CliError(f"--{flag} {spec}: {resource} is named twice")
        try:
            quotas[resource] = canonical_quantity(quantity)
        except QuantityError:
            raise CliError(f"--{flag} {spec}: {quantity} is not a quantity") from None
        if quotas[resource].startswith("-"):
            raise CliError(f"--{flag} {spec}: {resource} must not be negative")
    return flavor.strip(), quotas


def key_values(flag: str, values: list[str] | None) -> dict[str, str]:
    """`k1=v1,k2=v2` (the flag repeated, or not) as a map; keys and values checked as
    Kubernetes labels."""
    out: dict[str, str] = {}
    for value in values or []:
        for item in filter(None, value.split(",")):
            key, equals, text = item.partition("=")
            if not equals:
                raise CliError(f"--{flag} {value}: {item} must be KEY=VALUE")
            _label(flag, item, key, text)
            out[key] = text
    return out


def _label(flag: str, item: str, key: str, value: str) -> None:
    prefix, slash, name = key.rpartition("/")
    if not name or not _NAME.match(name) or (slash and not _PREFIX.match(prefix)):
        raise CliError(f"--{flag} {item}: {key} is not a valid label key")
    if len(prefix) > 253:
        raise CliError(f"--{flag} {item}: the prefix of {key} is longer than 253 characters")
    if value and not _NAME.match(value):
        raise CliError(f"--{flag} {item}: {value} is not a valid label value")


def _split_spec(flag: str, item: str) -> tuple[str, str, str]:
    """KEY[=VALUE][:EFFECT] into its parts."""
    head, _, effect = item.partition(":")
    if ":" in effect:
        raise CliError(f"--{flag} {item}: invalid spec (KEY[=VALUE]:EFFECT)")
    key, _, value = head.partition("=")
    if "=" in value:
        raise CliError(f"--{flag} {item}: invalid spec (KEY[=VALUE]:EFFECT)")
    return key, value, effect


def _effect(flag: str, item: str, effect: str) -> None:
    if effect not in TAINT_EFFECTS:
        raise CliError(
            f"--{flag} {item}: invalid taint effect {effect}, must be NoSchedule, "
            "PreferNoSchedule or NoExecute"
        )


def taints(values: list[str] | None) -> list[Obj]:
    """--node-taints KEY[=VALUE]:EFFECT,... (one per key and effect)."""
    out: list[Obj] = []
    for value in values or []:
        for item in filter(None, value.split(",")):
            key, text, effect = _split_spec("node-taints", item)
            if not effect:
                raise CliError(f"--node-taints {item}: invalid taint spec (KEY[=VALUE]:EFFECT)")
            _effect("node-taints", item, effect)
            _label("node-taints", item, key, text)
            if any(t["key"] == key and t["effect"] == effect for t in out):
                raise CliError(f"--node-taints {item}: a taint with key {key} and effect "
                               f"{effect} is given twice")  # fmt: skip
            out.append({"key": key} | ({"value": text} if text else {}) | {"effect": effect})
    return out


def tolerations(values: list[str] | None) -> list[Obj]:
    """--tolerations KEY=VALUE:EFFECT, KEY:EFFECT, KEY=VALUE, :EFFECT or KEY, as a
    toleration with Equal (key and value) or Exists."""
    out: list[Obj] = []
    for value in values or []:
        for item in filter(None, value.split(",")):
            key, text, effect = _split_spec("tolerations", item)
            if not key and text:
                raise CliError(f"--tolerations {item}: a value needs a key")
            if effect:
                _effect("tolerations", item, effect)
            if key:
                _label("tolerations", item, key, text)
            toleration: Obj = {"key": key} if key else {}
            toleration["operator"] = "Equal" if key and text else "Exists"
            if text:
                toleration["value"] = text
            if effect:
                toleration["effect"] = effect
            out.append(toleration)
    return out

"""Structural-schema defaulting and validation for the API double's custom resources.

Covers what Tower's CRDs use: type, enum, required, min/max items, length and properties,
defaults, int-or-string and preserve-unknown-fields. CEL rules (x-kubernetes-validations)
are not evaluated; the webhook's validation covers Kueue's cross-field rules.
"""

from __future__ import annotations

import copy
from typing import Any

_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
}


def apply_defaults(obj: Any, schema: dict[str, Any]) -> None:
    """Fill `default` values in place, as the API server does on create and update."""
    if isinstance(obj, dict):
        for name, sub in (schema.get("properties") or {}).items():
            if name not in obj and "default" in sub:
                obj[name] = copy.deepcopy(sub["default"])
            if name in obj:
                apply_defaults(obj[name], sub)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for value in obj.values():
                apply_defaults(value, extra)
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for item in obj:
            apply_defaults(item, schema["items"])


def validate(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Field errors in kube-apiserver's words (`spec.x: Unsupported value: ...`)."""
    errors: list[str] = []
    where = path or "<root>"
    if obj is None:
        return errors
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(obj, bool) or not isinstance(obj, int | str):
            # kube-apiserver v1.32's words, e.g. for `cpu: 0.5` in a CRD's pod template.
            got = _type_name(obj)
            errors.append(
                f'{where}: Invalid value: "{got}": {where} in body '
                f'must be of type integer,string: "{got}"'
            )
        return errors
    kind = schema.get("type")
    if kind == "integer":
        if isinstance(obj, bool) or not isinstance(obj, int):
            errors.append(
                f'{where}: Invalid value: "{_type_name(obj)}": {where} in body must '
                "be of type integer"
            )
            return errors
        if "minimum" in schema and obj < schema["minimum"]:
            errors.append(
                f"{where}: Invalid value: {obj}: {where} in body should be greater "
                f"than or equal to {schema['minimum']}"
            )
    elif kind == "number":
        if isinstance(obj, bool) or not isinstance(obj, int | float):
            errors.append(
                f'{where}: Invalid value: "{_type_name(obj)}": {where} in body must '
                "be of type number"
            )
    elif kind in _TYPES and not isinstance(obj, _TYPES[kind]):
        errors.append(
            f'{where}: Invalid value: "{_type_name(obj)}": {where} in body must be of type {kind}'
        )
        return errors
    if "enum" in schema and obj not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' for v in schema["enum"])
        errors.append(f'{where}: Unsupported value: "{obj}": supported values: {allowed}')
    if isinstance(obj, str) and "maxLength" in schema and len(obj) > schema["maxLength"]:
        errors.append(f"{where}: Too long: may not be more than {schema['maxLength']} bytes")
    if isinstance(obj, list):
        if "maxItems" in schema and len(obj) > schema["maxItems"]:
            errors.append(
                f"{where}: Too many: {len(obj)}: must have at most {schema['maxItems']} items"
            )
        if "minItems" in schema and len(obj) < schema["minItems"]:
            errors.append(
                f"{where}: Invalid value: {len(obj)}: {where} in body should have at "
                f"least {schema['minItems']} items"
            )
        if isinstance(schema.get("items"), dict):
            for i, item in enumerate(obj):
                errors += validate(item, schema["items"], f"{path}[{i}]")
    if isinstance(obj, dict) and not schema.get("x-kubernetes-preserve-unknown-fields"):
        if "maxProperties" in schema and len(obj) > schema["maxProperties"]:
            errors.append(
                f"{where}: Too many: {len(obj)}: must have at most {schema['maxProperties']} items"
            )
        for name in schema.get("required") or []:
            if name not in obj:
                errors.append(f"{_join(path, name)}: Required value")
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for name, value in obj.items():
            if name in properties:
                errors += validate(value, properties[name], _join(path, name))
            elif isinstance(extra, dict):
                errors += validate(value, extra, _join(path, name))
    return errors


def prune(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Drop fields the schema does not know (kube-apiserver prunes them on write); the paths
    dropped, as kube-apiserver names them in `unknown field "spec.x"`."""
    dropped: list[str] = []
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return dropped
    if isinstance(obj, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        if properties is not None:
            for name in list(obj):
                if name in properties:
                    dropped += prune(obj[name], properties[name], _join(path, name))
                elif isinstance(extra, dict):
                    dropped += prune(obj[name], extra, _join(path, name))
                elif name not in ("apiVersion", "kind", "metadata"):
                    del obj[name]
                    dropped.append(_join(path, name))
        elif isinstance(extra, dict):
            for key, value in obj.items():
                dropped += prune(value, extra, _join(path, key))
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            dropped += prune(item, schema["items"], f"{path}[{i}]")
    return dropped


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _type_name(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", float: "number"}.get(
        type(value), type(value).__name__
    )

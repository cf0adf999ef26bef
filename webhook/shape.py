"""Type checks of the object fields the Job and JobSet handlers read, before they read them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _string_map(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def object_problem(obj: Any, where: str) -> str | None:
    """One line naming the first field whose type is wrong, or None."""
    if not isinstance(obj, Mapping):
        return f"{where} must be an object"
    meta = obj.get("metadata")
    if meta is not None:
        if not isinstance(meta, Mapping):
            return f"{where}.metadata must be an object"
        for key in ("labels", "annotations"):
            if meta.get(key) is not None and not _string_map(meta[key]):
                return f"{where}.metadata.{key} must map strings to strings"
        for key in ("name", "namespace", "generateName"):
            if meta.get(key) is not None and not isinstance(meta[key], str):
                return f"{where}.metadata.{key} must be a string"
        owners = meta.get("ownerReferences")
        if owners is not None and not (
            isinstance(owners, list) and all(isinstance(o, Mapping) for o in owners)
        ):
            return f"{where}.metadata.ownerReferences must be a list of objects"
    spec = obj.get("spec")
    if spec is not None:
        if not isinstance(spec, Mapping):
            return f"{where}.spec must be an object"
        if spec.get("suspend") is not None and not isinstance(spec["suspend"], bool):
            return f"{where}.spec.suspend must be a boolean"
    return None


def request_problem(request: Mapping[str, Any]) -> str | None:
    """Problems with object/oldObject/userInfo of a Job or JobSet request."""
    if request.get("operation") != "DELETE":
        problem = object_problem(request.get("object"), "request.object")
        if problem:
            return problem
    if request.get("oldObject") is not None:
        problem = object_problem(request["oldObject"], "request.oldObject")
        if problem:
            return problem
    user = request.get("userInfo")
    if user is not None and not isinstance(user, Mapping):
        return "request.userInfo must be an object"
    namespace = request.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        return "request.namespace must be a string"
    return None

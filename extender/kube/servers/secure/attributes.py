"""What a request asks to do, as Kubernetes' RequestInfo resolves it for authorization.

A path under /api/VERSION or /apis/GROUP/VERSION names a resource (verb from the method:
get, list, watch, create, update, patch, delete, deletecollection); any other path is a
non-resource URL with the method's lower-cased name as verb (`get /metrics`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_PREFIXES = frozenset({"api"})
_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}
_TRUE = frozenset({"1", "t", "true"})  # Go's strconv.ParseBool, case-folded
_FALSE = frozenset({"0", "f", "false"})


@dataclass(frozen=True, slots=True)
class Attributes:
    """A request's authorization attributes (a resource request, or a non-resource path)."""

    verb: str
    path: str
    resource_request: bool = False
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""

    def review_fields(self) -> dict[str, Any]:
        """The SubjectAccessReview spec's resourceAttributes or nonResourceAttributes."""
        if not self.resource_request:
            return {"nonResourceAttributes": {"path": self.path, "verb": self.verb}}
        fields = {
            "namespace": self.namespace,
            "verb": self.verb,
            "group": self.api_group,
            "version": self.api_version,
            "resource": self.resource,
            "subresource": self.subresource,
            "name": self.name,
        }
        return {"resourceAttributes": {k: v for k, v in fields.items() if v}}

    def forbidden_message(self, user: str, reason: str = "") -> str:
        """kube-apiserver's one line for a request its authorizer did not allow (escaped,
        as kube-apiserver escapes it, so that it never reads as HTML)."""
        if not self.resource_request:
            text = f'forbidden: User "{user}" cannot {self.verb} path "{self.path}"'
        else:
            resource = self.resource + (f"/{self.subresource}" if self.subresource else "")
            where = (
                f'in the namespace "{self.namespace}"' if self.namespace else "at the cluster scope"
            )
            qualified = f"{self.resource}.{self.api_group}" if self.api_group else self.resource
            subject = f'{qualified} "{self.name}"' if self.name else qualified
            text = (
                f'{subject} is forbidden: User "{user}" cannot {self.verb} resource '
                f'"{resource}" in API group "{self.api_group}" {where}'
            )
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        return f"{text}: {reason}" if reason else text

    def forbidden_details(self) -> dict[str, str]:
        """The Status details kube-apiserver sends with a 403 (empty for a path)."""
        if not self.resource_request:
            return {}
        details = {"name": self.name, "group": self.api_group, "kind": self.resource}
        return {k: v for k, v in details.items() if v}


def resolve(method: str, path: str, query: Mapping[str, Sequence[str]]) -> Attributes:
    """The attributes of METHOD PATH?QUERY, as k8s.io/apiserver's RequestInfoFactory
    resolves them with the prefixes /api (no group) and /apis."""
    verb = method.lower()
    parts = [p for p in path.strip("/").split("/") if p]
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return Attributes(verb, path)
    prefix, parts = parts[0], parts[1:]
    group = ""
    if prefix not in GROUPLESS_PREFIXES:
        if len(parts) < 3:
            return Attributes(verb, path)
        group, parts = parts[0], parts[1:]
    version, parts = parts[0], parts[1:]
    via_path = parts[0] in _SPECIAL_VERBS
    if via_path:
        if len(parts) < 2:
            # kube-apiserver refuses it; as a resource request with no resource it is
            # authorized as such (and denied by any sane policy).
            return Attributes(parts[0], path, True, group, version)
        verb, parts = parts[0], parts[1:]
    else:
        verb = _METHOD_VERBS.get(method.upper(), "")
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if _watching(query) else "list"
        name = _name_from_field_selector(query)
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(verb, path, True, group, version, namespace, resource, subresource, name)


def _watching(query: Mapping[str, Sequence[str]]) -> bool:
    values = query.get("watch") or ()
    if not values:
        return False
    first = values[0].lower()
    # A value Go cannot parse fails the whole decode; kube-apiserver then still counts any
    # value but false and 0 as a watch.
    return first in _TRUE or first not in _FALSE


def _name_from_field_selector(query: Mapping[str, Sequence[str]]) -> str:
    """metadata.name from a fieldSelector that requires it exactly, if a valid name."""
    values = query.get("fieldSelector") or ()
    if not values:
        return ""
    for term in values[0].split(","):
        if "!=" in term:
            continue
        key, sep, value = term.replace("==", "=", 1).partition("=")
        if sep and key.strip() == "metadata.name":
            value = value.strip()
            valid = value not in ("", ".", "..") and "/" not in value and "%" not in value
            return value if valid else ""
    return ""

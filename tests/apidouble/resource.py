"""resource.k8s.io/v1 in the API double: ResourceClaimTemplate, ResourceClaim, DeviceClass.

Kubernetes serves this API (Dynamic Resource Allocation) from v1.34; the real v1.32 control
plane of shared/realk8s does not, and neither does the double unless a test calls `serve`
(its discovery then lists the group, so Tower's probe finds it as it would on v1.34).

What it checks is a structural schema written from the v1 Go types (k8s.io/api/resource/v1):
the fields, their types, `required` (a request's `name`, an exact request's
`deviceClassName`, a template's `spec.spec`), the enum of `allocationMode`, the limits
(32 requests, 32 selectors, 8 subrequests, names of 63 and 253 bytes), and the API server's
defaults for an exact request (`allocationMode: ExactCount`, `count: 1`). Unknown fields are
pruned or refused per fieldValidation, as for any resource the double serves by schema.

Where it differs from kube-apiserver: its hand-written validation is not run, so names are
not checked as DNS labels and subdomains, `exactly` and `firstAvailable` are not checked to be
one of two, CEL selectors are not compiled, a template's spec is not immutable, and
`count: 1` is defaulted for `allocationMode: All` too (kube-apiserver leaves it unset); no
ResourceSlices and no allocation (no scheduler, no driver: claims are never allocated).
No bytes of a real server were recorded for it (none here serves v1).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.apidouble.store import Kind

GROUP = "resource.k8s.io"

_ANY: dict[str, Any] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_SELECTORS: dict[str, Any] = {
    "type": "array",
    "maxItems": 32,
    "items": {
        "type": "object",
        "properties": {
            "cel": {
                "type": "object",
                "required": ["expression"],
                "properties": {"expression": {"type": "string"}},
            }
        },
    },
}
_EXACT: dict[str, Any] = {
    "type": "object",
    "required": ["deviceClassName"],
    "properties": {
        "deviceClassName": {"type": "string", "maxLength": 253},
        "selectors": _SELECTORS,
        "allocationMode": {
            "type": "string",
            "enum": ["ExactCount", "All"],
            "default": "ExactCount",
        },
        "count": {"type": "integer", "minimum": 1, "default": 1},
        "adminAccess": {"type": "boolean"},
        "tolerations": {"type": "array", "items": _ANY},
        "capacity": _ANY,
    },
}
_SUBREQUEST: dict[str, Any] = {
    "type": "object",
    "required": ["name", "deviceClassName"],
    "properties": {
        "name": {"type": "string", "maxLength": 63},
        "deviceClassName": {"type": "string", "maxLength": 253},
        "selectors": _SELECTORS,
        "allocationMode": {"type": "string", "enum": ["ExactCount", "All"]},
        "count": {"type": "integer", "minimum": 1},
        "tolerations": {"type": "array", "items": _ANY},
        "capacity": _ANY,
    },
}
CLAIM_SPEC: dict[str, Any] = {
    "type": "object",
    "properties": {
        "devices": {
            "type": "object",
            "properties": {
                "requests": {
                    "type": "array",
                    "maxItems": 32,
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "maxLength": 63},
                            "exactly": _EXACT,
                            "firstAvailable": {
                                "type": "array",
                                "maxItems": 8,
                                "items": _SUBREQUEST,
                            },
                        },
                    },
                },
                "constraints": {"type": "array", "items": _ANY},
                "config": {"type": "array", "items": _ANY},
            },
        }
    },
}
_META: dict[str, Any] = {"type": "object"}


def _root(spec: dict[str, Any], *, required: bool, status: bool = False) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": _META,
        "spec": spec,
    }
    if status:
        properties["status"] = _ANY
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = ["spec"]
    return schema


TEMPLATE_SCHEMA = _root(
    {
        "type": "object",
        "required": ["spec"],
        "properties": {"metadata": _ANY, "spec": CLAIM_SPEC},
    },
    required=True,
)
CLAIM_SCHEMA = _root(CLAIM_SPEC, required=True, status=True)
DEVICE_CLASS_SCHEMA = _root(
    {
        "type": "object",
        "properties": {
            "selectors": _SELECTORS,
            "config": {"type": "array", "items": _ANY},
            "extendedResourceName": {"type": "string"},
        },
    },
    required=True,
)

KINDS = (
    Kind(
        GROUP,
        ["v1"],
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        True,
        False,
        [],
        "resourceclaimtemplate",
        schemas={"v1": TEMPLATE_SCHEMA},
        crd=True,  # checked by its schema (above), as the double checks custom resources
    ),
    Kind(
        GROUP,
        ["v1"],
        "resourceclaims",
        "ResourceClaim",
        True,
        True,
        [],
        "resourceclaim",
        schemas={"v1": CLAIM_SCHEMA},
        crd=True,
    ),
    Kind(
        GROUP,
        ["v1"],
        "deviceclasses",
        "DeviceClass",
        False,
        False,
        [],
        "deviceclass",
        schemas={"v1": DEVICE_CLASS_SCHEMA},
        crd=True,
    ),
)


def serve(api: Any) -> None:
    """The double serves resource.k8s.io/v1 from now on (as a v1.34 kube-apiserver does)."""
    for kind in KINDS:
        api.store.register(copy.deepcopy(kind))

"""AdmissionReview (admission.k8s.io/v1) requests and responses, as kube-apiserver sends them."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

import orjson

ADMISSION_VERSION = "admission.k8s.io/v1"


class Status(TypedDict, total=False):
    """metav1.Status inside a denial: kube-apiserver turns code into the HTTP status."""

    code: int
    message: str
    reason: str


class Response(TypedDict):
    """AdmissionResponse."""

    uid: str
    allowed: bool
    patchType: NotRequired[str]
    patch: NotRequired[str]
    status: NotRequired[Status]
    warnings: NotRequired[list[str]]


class ReviewError(ValueError):
    """A body that is not an answerable AdmissionReview: answered with HTTP 400."""


def request_of(review: Any) -> Mapping[str, Any]:
    """The `request` of an AdmissionReview, checked enough to be answered."""
    if not isinstance(review, Mapping):
        raise ReviewError("body is not a JSON object")
    if review.get("kind") != "AdmissionReview" or review.get("apiVersion") != ADMISSION_VERSION:
        raise ReviewError(
            f"expected kind AdmissionReview, apiVersion {ADMISSION_VERSION}; got kind "
            f"{review.get('kind')!r}, apiVersion {review.get('apiVersion')!r}"
        )
    request = review.get("request")
    if not isinstance(request, Mapping):
        raise ReviewError("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("AdmissionReview request has no uid")
    return request


def allow(
    uid: str, patch: list[dict[str, Any]] | None = None, warnings: list[str] | None = None
) -> Response:
    """Allowed, with an optional JSON patch and warnings."""
    response: Response = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    if warnings:
        response["warnings"] = warnings
    return response


def deny(uid: str, message: str, code: int = 403) -> Response:
    """Denied: kubectl shows `admission webhook "<name>" denied the request: <message>`."""
    status: Status = {"code": code, "message": message}
    if code == 403:
        status["reason"] = "Forbidden"
    return {"uid": uid, "allowed": False, "status": status}


def review(response: Response) -> dict[str, Any]:
    """The AdmissionReview envelope around a response."""
    return {"apiVersion": ADMISSION_VERSION, "kind": "AdmissionReview", "response": response}

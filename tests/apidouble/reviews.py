"""TokenReview and SubjectAccessReview, as kube-apiserver answers a delegating server (test code).

Built against the bytes in tests/data/delegated-auth/ (recorded from a real v1.32): a token
the double knows (a user it was given, or the admin's `admin`) is authenticated with that
user, any other is `{"user": {}, "error": "invalid bearer token"}`; access is decided by the
double's RBAC model (users without rules may do anything, as everywhere in the double; a rule
may carry `nonResourceURLs`, with RBAC's trailing `*`). The caller itself needs `create` on
the review's resource, or gets kube-apiserver's 403. Where it differs: no managedFields, no
audiences other than the default, and an allowed review carries no `reason` (the real one
names the RBAC binding that allowed it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.apidouble.server import ApiDouble

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]  # the real plane's issuer
_PATHS = {
    TOKEN_REVIEWS: ("authentication.k8s.io", "tokenreviews", "TokenReview"),
    ACCESS_REVIEWS: ("authorization.k8s.io", "subjectaccessreviews", "SubjectAccessReview"),
}


def answer(api: ApiDouble, requester: str, path: str, body: Any) -> tuple[int, Any] | None:
    """(HTTP status, body) for a POST of a review on `path`, or None for another path."""
    if path not in _PATHS:
        return None
    group, resource, kind = _PATHS[path]
    if not api.permits(requester, group, resource, "create", None):
        return 403, {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'{resource}.{group} is forbidden: User "{requester}" cannot create '
            f'resource "{resource}" in API group "{group}" at the cluster scope',
            "reason": "Forbidden",
            "details": {"group": group, "kind": resource},
            "code": 403,
        }
    spec = (body or {}).get("spec") or {}
    if resource == "tokenreviews":
        status = _token_status(api, str(spec.get("token") or ""))
    else:
        status = {"allowed": _allowed(api, spec)}
    return 201, {
        "kind": kind,
        "apiVersion": f"{group}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": {k: v for k, v in spec.items() if v not in ("", [], {}, None)},
        "status": status,
    }


def _token_status(api: ApiDouble, token: str) -> dict[str, Any]:
    if token != "admin" and token not in api.users:
        return {"user": {}, "error": "invalid bearer token"}
    return {"authenticated": True, "user": api.user_for(token), "audiences": AUDIENCES}


def _allowed(api: ApiDouble, spec: dict[str, Any]) -> bool:
    user = str(spec.get("user") or "")
    if "system:masters" in (spec.get("groups") or []):
        return True
    attributes = spec.get("resourceAttributes")
    if isinstance(attributes, dict):
        resource = str(attributes.get("resource") or "")
        if attributes.get("subresource"):
            resource += f"/{attributes['subresource']}"
        return api.permits(
            user,
            str(attributes.get("group") or ""),
            resource,
            str(attributes.get("verb") or ""),
            attributes.get("namespace") or None,
        )
    path_attributes = spec.get("nonResourceAttributes") or {}
    return api.permits_path(
        user, str(path_attributes.get("path") or ""), str(path_attributes.get("verb") or "")
    )


def publish_authentication(api: ApiDouble, proxy_ca: str, client_ca: str = "") -> None:
    """kube-system/extension-apiserver-authentication as kube-apiserver writes it when it
    runs with a front proxy (tests/data/delegated-auth/configmap-...json): its CA, the name
    `front-proxy-client` and the X-Remote- headers."""
    data = {
        "requestheader-allowed-names": '["front-proxy-client"]',
        "requestheader-client-ca-file": proxy_ca,
        "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
        "requestheader-group-headers": '["X-Remote-Group"]',
        "requestheader-uid-headers": "[]",
        "requestheader-username-headers": '["X-Remote-User"]',
    }
    if client_ca:
        data["client-ca-file"] = client_ca
    api._create_now(
        "configmaps",
        {
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
            "data": data,
        },
    )

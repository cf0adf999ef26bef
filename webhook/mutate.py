"""Mutation of Jobs and JobSets: queue them on CREATE, keep them queued on UPDATE."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.core import unacted
from extender.core.jobs import queue_mutation, queue_name_of
from extender.core.models import CLUSTER_QUEUE_ANNOTATION
from webhook.reviews import Response, allow, deny
from webhook.settings import Settings
from webhook.shape import request_problem

JOB = ("batch", "Job")
JOBSET = ("jobset.x-k8s.io", "JobSet")
_JOBSET_API_PREFIX = "jobset.x-k8s.io/"


def check_kind(request: Mapping[str, Any], expect: tuple[str, str]) -> str | None:
    """A reason to refuse the request if it is not for the kind this endpoint serves."""
    if expect[0] != "kueue.x-k8s.io":
        problem = request_problem(request)
        if problem is not None:
            return problem
    kind = request.get("kind")
    if not isinstance(kind, Mapping):
        return "request.kind is missing"
    got = (kind.get("group"), kind.get("kind"))
    if got != expect:
        return f"this endpoint handles {expect[1]}.{expect[0]}, got {got[1]}.{got[0] or 'core'}"
    if not isinstance(request.get("object"), Mapping) and request.get("operation") != "DELETE":
        return "request.object is missing"
    return None


def owned_by_jobset(obj: Mapping[str, Any]) -> bool:
    """A Job that a JobSet controls: its parent is the one that is queued."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if (
            isinstance(owner, Mapping)
            and owner.get("kind") == "JobSet"
            and str(owner.get("apiVersion", "")).startswith(_JOBSET_API_PREFIX)
            and owner.get("controller") is True
        ):
            return True
    return False


def mutate(request: Mapping[str, Any], settings: Settings, expect: tuple[str, str]) -> Response:
    """The AdmissionResponse for a Job or JobSet on /mutate-…."""
    uid = str(request["uid"])
    problem = check_kind(request, expect)
    if problem is not None:
        return deny(uid, problem, code=400)
    obj: Mapping[str, Any] = request["object"]
    operation = request.get("operation")
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp") or (expect == JOB and owned_by_jobset(obj)):
        return allow(uid)
    if operation == "CREATE":
        namespace = str(request.get("namespace") or meta.get("namespace") or "")
        default = "default" if settings.manages_unlabelled(namespace) else None
        patch = queue_mutation(obj, default)
        warnings = None
        if patch:  # queued: say at once what Tower will not act on
            name = f"{namespace}/{meta.get('name') or meta.get('generateName') or '?'}"
            warnings = unacted.warnings(expect[1], obj, name) or None
        return allow(uid, patch, warnings)
    if operation == "UPDATE":
        return _keep_suspended(uid, request, obj, settings, expect[1])
    return allow(uid)


def is_suspended(obj: Any) -> bool:
    return isinstance(obj, Mapping) and (obj.get("spec") or {}).get("suspend") is True


def _keep_suspended(
    uid: str,
    request: Mapping[str, Any],
    obj: Mapping[str, Any],
    settings: Settings,
    kind: str,
) -> Response:
    old = request.get("oldObject")
    queue = queue_name_of(obj)
    if queue is None or not is_suspended(old) or is_suspended(obj):
        return allow(uid)
    username = str((request.get("userInfo") or {}).get("username", ""))
    if username in settings.controller_usernames:
        return allow(uid)  # Tower's controller starting an admitted job
    meta = obj.get("metadata") or {}
    old_meta = (old.get("metadata") or {}) if isinstance(old, Mapping) else {}
    annotations = meta.get("annotations") or old_meta.get("annotations") or {}
    cluster_queue = annotations.get(CLUSTER_QUEUE_ANNOTATION)
    where = (
        f"ClusterQueue {cluster_queue} (LocalQueue {queue})"
        if cluster_queue
        else f"LocalQueue {queue}"
    )
    name = f"{meta.get('namespace') or request.get('namespace', '')}/{meta.get('name', '')}"
    allowed = ", ".join(sorted(settings.controller_usernames))
    warning = (
        f"{kind} {name} is queued: it waits in {where} and starts when Tower admits it; "
        f"spec.suspend stays true (only {allowed} may unsuspend it, the webhook's "
        f"--controller-username; this request came from {username or 'an unknown user'})"
    )
    spec_has_suspend = "suspend" in (obj.get("spec") or {})
    op = "replace" if spec_has_suspend else "add"
    return allow(uid, [{"op": op, "path": "/spec/suspend", "value": True}], [warning])

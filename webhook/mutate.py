"""Mutation of every kind of job the registry knows: queue it on CREATE, keep it queued on
UPDATE, at the suspend field its adapter names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonpatch

from extender.core.admission.multikueue import CONTROLLER as MULTIKUEUE
from extender.core.api import unacted, unread_keys
from extender.core.api.models import CLUSTER_QUEUE_ANNOTATION, QUEUE_NAME_LABEL
from extender.core.jobframework import registry, slices
from extender.core.jobframework.adapter import JobAdapter, as_mapping, pointer
from extender.core.jobframework.jobs import queue_name_of
from extender.core.jobframework.parent import TemplateParent
from extender.core.jobframework.resize import ELASTIC_JOB_ANNOTATION, is_elastic, running_resize
from extender.core.jobframework.webhooks import queue_patch, resuspend_patch, suspend_field
from webhook.reviews import Response, allow, deny
from webhook.routes import QueueRoutes
from webhook.settings import Settings
from webhook.shape import request_problem

GATE = "kueue.x-k8s.io/admission"
JOB = registry.ADAPTERS["batch/job"]
JOBSET = registry.ADAPTERS["jobset.x-k8s.io/jobset"]


def adapter_of(kind: JobAdapter | tuple[str, str]) -> JobAdapter:
    """The adapter itself, or the registered one of a (group, kind)."""
    if isinstance(kind, JobAdapter):
        return kind
    return registry.by_kind()[kind]


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
        return (
            f"this endpoint handles {expect[1]}.{expect[0] or 'core'}, "
            f"got {got[1]}.{got[0] or 'core'}"
        )
    if not isinstance(request.get("object"), Mapping) and request.get("operation") != "DELETE":
        return "request.object is missing"
    return None


def mutate(
    request: Mapping[str, Any],
    settings: Settings,
    kind: JobAdapter | tuple[str, str],
    routes: QueueRoutes | None = None,
) -> Response:
    """The AdmissionResponse for a job of the adapter's kind on /mutate-…."""
    adapter = adapter_of(kind)
    uid = str(request["uid"])
    problem = check_kind(request, (adapter.group, adapter.kind))
    if problem is not None:
        return deny(uid, problem, code=400)
    obj: Mapping[str, Any] = request["object"]
    operation = request.get("operation")
    meta = obj.get("metadata") or {}
    if meta.get("deletionTimestamp") or adapter.is_child(obj):
        return allow(uid)  # a managed parent's child: the parent is the one queued
    if operation == "CREATE":
        namespace = str(request.get("namespace") or meta.get("namespace") or "")
        unlabelled = adapter.default_queue and settings.manages_unlabelled(namespace)
        unlabelled = unlabelled and not _made_by_a_deployment(obj, settings)
        default = "default" if unlabelled else None
        patch = queue_patch(obj, adapter, default)
        warnings = None
        if patch:  # queued: say at once what Tower will not act on
            name = f"{namespace}/{meta.get('name') or meta.get('generateName') or '?'}"
            refused = slices.create_problems(adapter, obj, settings.feature_gates)
            if refused:  # Kueue's webhooks' words for an elastic job it cannot run
                return deny(uid, f"{adapter.kind} {name}: {'; '.join(refused)}")
            if slices.enabled(obj, settings.feature_gates):  # its pods start gated
                patch += slices.gate_ops(adapter, obj)
            warnings = unacted.warnings(adapter.kind, obj, name)
            warnings += unread_keys.warnings(adapter.kind, obj, name)
            queue = queue_name_of(obj) or default
            patch += _multikueue_ops(obj, patch, adapter, namespace, name, queue, routes, warnings)
            warnings = warnings or None
        return allow(uid, patch, warnings)
    if operation == "UPDATE":
        old = request.get("oldObject")
        if isinstance(old, Mapping) and queue_name_of(obj) is not None:
            refused = slices.update_problems(adapter, old, obj, settings.feature_gates)
            if refused:
                name = f"{meta.get('namespace') or request.get('namespace', '')}/{meta.get('name')}"
                return deny(uid, f"{adapter.kind} {name}: {'; '.join(refused)}")
        stopped = _stop_resized(uid, request, obj, settings, adapter)
        if stopped is not None:
            return stopped
        return _keep_suspended(uid, request, obj, settings, adapter)
    return allow(uid)


def _stop_resized(
    uid: str,
    request: Mapping[str, Any],
    obj: Mapping[str, Any],
    settings: Settings,
    adapter: JobAdapter,
) -> Response | None:
    """A running queued job whose update changes its podSets is suspended in the same write:
    its own controller never sees the new size running, so no pod beyond its admission
    starts. The controller then queues it again as it now is (Kueue's outcome)."""
    old = request.get("oldObject")
    if not isinstance(old, Mapping) or not adapter.can_suspend or queue_name_of(obj) is None:
        return None
    if is_elastic(obj, settings.feature_gates):
        return None  # scales in place through workload slices
    change = running_resize(adapter, old, obj)
    if change is None:
        return None
    meta = obj.get("metadata") or {}
    name = f"{meta.get('namespace') or request.get('namespace', '')}/{meta.get('name', '')}"
    warning = (
        f"{adapter.kind} {name}: {change} while it runs: it is stopped in this update "
        f"({suspend_field(adapter)}: true) and queued again at its new size, as Kueue queues "
        "a job that no longer matches its Workload (to scale a Job, RayJob or RayCluster in "
        f'place, annotate it {ELASTIC_JOB_ANNOTATION}: "true")'
    )
    return allow(uid, resuspend_patch(obj, adapter), [warning])


def _multikueue_ops(
    obj: Mapping[str, Any],
    queued: list[dict[str, Any]],
    adapter: JobAdapter,
    namespace: str,
    name: str,
    queue: str | None,
    routes: QueueRoutes | None,
    warnings: list[str],
) -> list[dict[str, Any]]:
    """spec.managedBy handed to MultiKueue when the job's LocalQueue leads to a MultiKueue
    check (Kueue's defaulting); a lookup that failed is told, and decides nothing."""
    if routes is None or queue is None or adapter.own_controller is None:
        return []
    # Read from the job as queued: the queue's patch may have made the parent the field
    # goes in (a Kubeflow job's runPolicy, with its suspend), which must not be replaced.
    ops = adapter.managed_by_ops(jsonpatch.apply_patch(obj, queued), MULTIKUEUE)
    if not ops:
        return []
    found = routes.multikueue(namespace, queue)
    if isinstance(found, str):
        warnings.append(
            f"{adapter.kind} {name}: could not tell whether LocalQueue {queue} dispatches to "
            f"MultiKueue ({found}); spec.managedBy is left as it is"
        )
        return []
    return ops if found else []


def _keep_suspended(
    uid: str,
    request: Mapping[str, Any],
    obj: Mapping[str, Any],
    settings: Settings,
    adapter: JobAdapter,
) -> Response:
    old = request.get("oldObject")
    queue = queue_name_of(obj)
    if queue is None or not adapter.is_suspended(as_mapping(old)) or adapter.is_suspended(obj):
        return allow(uid)
    username = str((request.get("userInfo") or {}).get("username", ""))
    if username in settings.controller_usernames:
        return allow(uid)  # Tower's controller starting an admitted job
    meta = obj.get("metadata") or {}
    if not adapter.can_suspend:
        # A gate cannot be put back: the update is refused rather than let the pod run.
        name = f"{meta.get('namespace') or request.get('namespace', '')}/{meta.get('name', '')}"
        return deny(
            uid,
            f"{adapter.kind} {name} is queued in LocalQueue {queue}: only Tower removes its "
            f"scheduling gate {GATE}, when the pod is admitted",
        )
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
        f"{adapter.kind} {name} is queued: it waits in {where} and starts when Tower admits it; "
        f"{suspend_field(adapter)} stays true (only {allowed} may unsuspend it, the webhook's "
        f"--controller-username; this request came from {username or 'an unknown user'})"
    )
    return allow(uid, resuspend_patch(obj, adapter), [warning])


def mutate_parent(
    request: Mapping[str, Any], settings: Settings, parent: TemplateParent
) -> Response:
    """The AdmissionResponse for a kind whose pods are queued one by one (a Deployment): its
    pod template marked, so that every pod it makes is gated and queued on its own."""
    uid = str(request["uid"])
    problem = check_kind(request, (parent.group, parent.kind))
    if problem is not None:
        return deny(uid, problem, code=400)
    obj: Mapping[str, Any] = request["object"]
    meta = obj.get("metadata") or {}
    if request.get("operation") not in ("CREATE", "UPDATE") or meta.get("deletionTimestamp"):
        return allow(uid)
    namespace = str(request.get("namespace") or meta.get("namespace") or "")
    if settings.manages_unlabelled(namespace) and _owned_by_a_managed_kind(obj, settings):
        return allow(uid)  # Kueue's: its managed ancestor (an AppWrapper) is the one queued
    queue = queue_name_of(obj)
    ops: list[dict[str, Any]] = []
    if queue is None and settings.manages_unlabelled(namespace):
        queue = "default"  # Kueue's manageJobsWithoutQueueName: its LocalQueue "default"
        if meta.get("labels"):
            path = pointer("metadata", "labels", QUEUE_NAME_LABEL)
            ops = [{"op": "add", "path": path, "value": queue}]
        else:
            ops = [{"op": "add", "path": "/metadata/labels", "value": {QUEUE_NAME_LABEL: queue}}]
    if queue is None:
        return allow(uid)
    return allow(uid, [*ops, *parent.template_ops(obj, queue)] or None)


def _controller(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(group, kind) of the object's controlling owner."""
    for owner in as_mapping(obj.get("metadata")).get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return str(owner.get("apiVersion") or "").rpartition("/")[0], str(owner.get("kind"))
    return None


def _owned_by_a_managed_kind(obj: Mapping[str, Any], settings: Settings) -> bool:
    """Whether the object's owner is a kind Tower queues; with manageJobsWithoutQueueName
    that owner is managed whatever its labels, so Kueue's webhooks leave the object alone."""
    owner = _controller(obj)
    return owner is not None and any(
        (a.group, a.kind) == owner for a in registry.enabled(settings.integrations)
    )


def _made_by_a_deployment(pod: Mapping[str, Any], settings: Settings) -> bool:
    """Whether an unlabelled pod has, for Kueue, a managed ancestor under
    manageJobsWithoutQueueName: its ReplicaSet's Deployment, with the deployment integration
    on. Kueue reads the ReplicaSet to know; the Deployment controller's pod-template-hash
    label on the pod says the same without a read. (Kueue then gates it only if the
    Deployment's webhook marked its template, which puts the queue-name label on it.)"""
    if not any(
        p.framework == "deployment" for p in registry.enabled_parents(settings.integrations)
    ):
        return False
    labels = as_mapping(as_mapping(pod.get("metadata")).get("labels"))
    return _controller(pod) == ("apps", "ReplicaSet") and "pod-template-hash" in labels

"""Validation of every kind of job the registry knows and of Kueue's objects, with the core's
parsers and rules."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from extender.core.api import admission_gates, parse, unacted, unread_keys
from extender.core.api.models import (
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    TOPOLOGY_KEY_ANNOTATION,
)
from extender.core.jobframework import exec_limit
from extender.core.jobframework.adapter import JobAdapter, MissingReferenceError, as_mapping
from extender.core.jobframework.jobs import queue_name_of
from extender.core.jobframework.parent import TemplateParent
from extender.core.jobframework.topology import template_topology
from extender.core.jobframework.workloads import workload
from webhook.mutate import adapter_of, check_kind
from webhook.reviews import Response, allow, deny

_LABEL_PATH = f'metadata.labels["{QUEUE_NAME_LABEL}"]'
KUEUE_PARSERS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "ClusterQueue": parse.cluster_queue,
    "LocalQueue": parse.local_queue,
    "ResourceFlavor": parse.resource_flavor,
    "Cohort": parse.cohort,
    "WorkloadPriorityClass": parse.workload_priority_class,
    "Workload": workload,
}


def validate_job(request: Mapping[str, Any], kind: JobAdapter | tuple[str, str]) -> Response:
    """Queue-name rules for a job of the adapter's kind on /validate-…."""
    adapter = adapter_of(kind)
    uid = str(request["uid"])
    problem = check_kind(request, (adapter.group, adapter.kind))
    if problem is not None:
        return deny(uid, problem, code=400)
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return allow(uid)
    obj: Mapping[str, Any] = request["object"]
    queue = queue_name_of(obj)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    raw = labels.get(QUEUE_NAME_LABEL)
    if raw is not None and not (isinstance(raw, str) and parse.is_dns1123_label(raw)):
        return deny(
            uid,
            f"{_LABEL_PATH}: {raw!r} is not a valid LocalQueue name (a DNS-1123 label: lowercase "
            "letters, digits and '-', at most 63 characters)",
        )
    gate_problems = _admission_gate_problems(request, obj)
    if gate_problems:
        return deny(uid, f"{adapter.kind} {_name(obj)}: {admission_gates.aggregate(gate_problems)}")
    problem = _max_exec_time(request, adapter) if queue is not None else None
    if problem is not None:
        return deny(uid, f"{adapter.kind} {_name(obj)}: {problem}")
    if request.get("operation") == "CREATE" and queue is not None and not adapter.is_child(obj):
        # A queued job whose podSets cannot be read would wait forever: refused now, as
        # Kueue's webhooks refuse it (a RayJob that keeps its cluster, a TFJob's unknown
        # replica type). The controller says the same in an Event if this hook was down.
        try:
            adapter.references(obj)
            for template in adapter.pod_sets(obj):
                template_topology(template)
        except MissingReferenceError:
            pass  # the webhook reads no other object: the controller reads the runtime
        except parse.ManifestError as err:
            return deny(uid, f"{adapter.kind} {_name(obj)}: {err.path}: {err.message}")
    if request.get("operation") == "UPDATE":
        old = request.get("oldObject")
        try:
            adapter.check_update(as_mapping(old), obj)
        except parse.ManifestError as err:
            return deny(uid, f"{adapter.kind} {_name(obj)}: {err.path}: {err.message}")
        problem = _priority_class_update(as_mapping(old), obj, adapter.is_suspended(obj))
        if problem is not None:
            return deny(uid, f"{adapter.kind} {_name(obj)}: {problem}")
        old_queue = queue_name_of(old) if isinstance(old, Mapping) else None
        if old_queue != queue and not adapter.is_suspended(as_mapping(old)):
            return deny(
                uid,
                f"{_LABEL_PATH}: cannot change from {old_queue!r} to {queue!r} while the "
                f"{adapter.kind} is running (not suspended)",
            )
    return allow(uid)


def _admission_gate_problems(request: Mapping[str, Any], obj: Mapping[str, Any]) -> list[str]:
    """Kueue's rules for kueue.x-k8s.io/admission-gated-by: well-formed names; set only at
    creation, and afterwards only taken off (the controllers it names each remove their own)."""
    now = admission_gates.gated_by((obj.get("metadata") or {}).get("annotations"))
    if request.get("operation") == "CREATE":
        return admission_gates.problems_on_create(now)
    old = as_mapping(as_mapping(request.get("oldObject")).get("metadata"))
    was = admission_gates.gated_by(as_mapping(old.get("annotations")))
    return admission_gates.problems_on_update(was, now)


_PRIORITY_CLASS_PATH = f'metadata.labels["{PRIORITY_CLASS_LABEL}"]'


def _max_exec_time(request: Mapping[str, Any], adapter: JobAdapter) -> str | None:
    """Kueue's rules for a queued job's max-exec-time-seconds label: a whole number above 0,
    changed only while the job is suspended, before and after."""
    obj = as_mapping(request.get("object"))
    value = ((obj.get("metadata") or {}).get("labels") or {}).get(exec_limit.LABEL)
    if value is not None:
        problem = exec_limit.label_problem(str(value))
        if problem is not None:
            return f"{exec_limit.LABEL_PATH}: {problem}"
    if request.get("operation") != "UPDATE":
        return None
    old = as_mapping(request.get("oldObject"))
    was = ((old.get("metadata") or {}).get("labels") or {}).get(exec_limit.LABEL)
    suspended = adapter.is_suspended(old) and adapter.is_suspended(obj)
    problem = exec_limit.label_change_problem(was, value, suspended)
    return None if problem is None else f"{exec_limit.LABEL_PATH}: {problem}"


def _priority_class_update(
    old: Mapping[str, Any], new: Mapping[str, Any], suspended: bool
) -> str | None:
    """Kueue's rule for a job's WorkloadPriorityClass label: never removed (the Workload's
    priority would silently fall back), and not added to a running job (its admission was
    decided at another priority)."""
    was = str(((old.get("metadata") or {}).get("labels") or {}).get(PRIORITY_CLASS_LABEL) or "")
    now = str(((new.get("metadata") or {}).get("labels") or {}).get(PRIORITY_CLASS_LABEL) or "")
    if was and not now:
        return f"{_PRIORITY_CLASS_PATH}: WorkloadPriorityClass cannot be removed from a workload"
    if not was and now and not suspended:
        return (
            f"{_PRIORITY_CLASS_PATH}: {now!r}: WorkloadPriorityClass cannot be added to a "
            "non-suspended workload"
        )
    return None


def validate_kueue(
    request: Mapping[str, Any], kind: str, gates: Mapping[str, bool] | None = None
) -> Response:
    """Kueue's field and cross-field rules for one of its objects."""
    uid = str(request["uid"])
    problem = check_kind(request, ("kueue.x-k8s.io", kind))
    if problem is not None:
        return deny(uid, problem, code=400)
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return allow(uid)
    obj: Mapping[str, Any] = request["object"]
    try:
        KUEUE_PARSERS[kind](obj)
    except parse.ManifestError as err:
        return deny(uid, f"{kind} {_name(obj)}: {err.path}: {err.message}")
    gate_problems = _admission_gate_problems(request, obj) if kind == "Workload" else []
    if gate_problems:
        return deny(uid, f"{kind} {_name(obj)}: {admission_gates.aggregate(gate_problems)}")
    # A field Tower does not act on is accepted (the manifest is Kueue's), and said at once.
    warnings = unacted.warnings(kind, obj, _name(obj), gates)
    if kind == unread_keys.WORKLOAD:
        warnings += unread_keys.warnings(kind, obj, _name(obj))
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if kind == "ResourceFlavor" and TOPOLOGY_KEY_ANNOTATION in annotations:
        warnings.append(
            f"ResourceFlavor {_name(obj)}: {TOPOLOGY_KEY_ANNOTATION} is Tower's older way to keep "
            "a workload's pods in one domain; Kueue's spec.topologyName with a Topology does more "
            "(docs/topology.md, 'Migrating from tower.dev/topology-key')"
        )
    if kind == "LocalQueue" and request.get("operation") == "UPDATE":
        old = request.get("oldObject") or {}
        before = (old.get("spec") or {}).get("clusterQueue")
        after = (obj.get("spec") or {}).get("clusterQueue")
        if before != after:
            return deny(
                uid,
                f"LocalQueue {_name(obj)}: spec.clusterQueue: field is immutable "
                f"(was {before!r}, got {after!r})",
            )
    return allow(uid, warnings=warnings)


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name") or "?"
    return f"{namespace}/{name}" if namespace else str(name)


def validate_parent(request: Mapping[str, Any], parent: TemplateParent) -> Response:
    """A kind whose pods are queued one by one (a Deployment): its queue may not change
    while any of its pods is ready, as Kueue rules."""
    uid = str(request["uid"])
    problem = check_kind(request, (parent.group, parent.kind))
    if problem is not None:
        return deny(uid, problem, code=400)
    if request.get("operation") not in ("CREATE", "UPDATE"):
        return allow(uid)
    obj: Mapping[str, Any] = request["object"]
    gate_problems = _admission_gate_problems(request, obj)
    if gate_problems:
        return deny(uid, f"{parent.kind} {_name(obj)}: {admission_gates.aggregate(gate_problems)}")
    if request.get("operation") != "UPDATE":
        return allow(uid)
    if parent.marked_by_other(obj):
        return allow(uid)  # another kind's (a LeaderWorkerSet's StatefulSet): its rules apply
    old = as_mapping(request.get("oldObject"))
    queue, old_queue = queue_name_of(obj), queue_name_of(old)
    ready = as_mapping(old.get("status")).get("readyReplicas") or 0
    if old_queue is not None and queue != old_queue and (queue is None or ready):
        why = "cannot be removed" if queue is None else "cannot change while its pods run"
        return deny(
            uid,
            f"{parent.kind} {_name(obj)}: {_LABEL_PATH}: {why} "
            f"({old_queue!r} to {queue!r}, {ready} ready replicas)",
        )
    if queue is not None:
        try:
            parent.update_problem(old, obj)
        except parse.ManifestError as err:
            return deny(uid, f"{parent.kind} {_name(obj)}: {err.path}: {err.message}")
    return allow(uid)

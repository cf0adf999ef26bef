"""The webhook's patches for a job of any kind, at its suspend field, and its integrations."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.core.api.models import ORIGINAL_SUSPEND_ANNOTATION, QUEUE_NAME_LABEL
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import JobAdapter, pointer

Op = dict[str, Any]


def suspend_field(adapter: JobAdapter) -> str:
    """The suspend field as a user reads it: spec.suspend, spec.runPolicy.suspend."""
    return ".".join(adapter.suspend_path)


def set_op(obj: Mapping[str, Any], path: tuple[str, ...], value: Any) -> Op:
    """The one JSON patch operation that sets a field so that it applies to the object as
    it is: `replace` where the field is, `add` where it is not, and where a parent is
    missing (or null), `add` of the parent holding the field."""
    node: Any = obj
    for depth, part in enumerate(path[:-1]):
        child = node.get(part)
        if not isinstance(child, Mapping):
            nested: Any = value
            for inner in reversed(path[depth + 1 :]):
                nested = {inner: nested}
            return {"op": "add", "path": pointer(*path[: depth + 1]), "value": nested}
        node = child
    op = "replace" if path[-1] in node else "add"
    return {"op": op, "path": pointer(*path), "value": value}


def queue_patch(
    obj: Mapping[str, Any], adapter: JobAdapter, default_queue: str | None = None
) -> list[Op]:
    """The JSON patch that queues a job of any kind: suspended at its adapter's suspend
    field, with the queue-name label and the original-suspend annotation (jobs.queue_mutation,
    for every suspend path; the same patch for spec.suspend).

    Returns [] for an object that is not queued. Applying the patch twice gives the same
    object, because the API server may call a mutating webhook more than once.
    """
    meta = obj.get("metadata") or {}
    labels = meta.get("labels")
    annotations = meta.get("annotations")
    raw = (labels or {}).get(QUEUE_NAME_LABEL)
    queue = str(raw) if raw else None
    ops: list[Op] = []
    if queue is None:
        # Kueue before 0.15 read the queue from an annotation; such manifests keep working
        # because the label is written from it.
        legacy = (annotations or {}).get(QUEUE_NAME_LABEL)
        queue = legacy if isinstance(legacy, str) and legacy else default_queue
        if queue is None:
            return []
    if not meta:
        ops.append({"op": "add", "path": "/metadata", "value": {}})
    if not labels or labels.get(QUEUE_NAME_LABEL) != queue:
        if labels is None:
            ops.append(
                {"op": "add", "path": "/metadata/labels", "value": {QUEUE_NAME_LABEL: queue}}
            )
        else:
            path = pointer("metadata", "labels", QUEUE_NAME_LABEL)
            ops.append({"op": "add", "path": path, "value": queue})
    special = adapter.queue_ops(obj)
    if special is not None:
        return [*ops, *special]  # a pod: gated, labelled managed, kept by Kueue's finalizer
    suspended = adapter.is_suspended(obj)
    if annotations is None or ORIGINAL_SUSPEND_ANNOTATION not in annotations:
        original = "true" if suspended else "false"
        if annotations is None:
            value = {ORIGINAL_SUSPEND_ANNOTATION: original}
            ops.append({"op": "add", "path": "/metadata/annotations", "value": value})
        else:
            path = pointer("metadata", "annotations", ORIGINAL_SUSPEND_ANNOTATION)
            ops.append({"op": "add", "path": path, "value": original})
    if not suspended:
        op = set_op(obj, adapter.suspend_path, True)
        op["op"] = "add"  # `add` replaces a value that is there, and applies twice the same
        ops.append(op)
    return [*ops, *adapter.create_ops(obj)]


def resuspend_patch(obj: Mapping[str, Any], adapter: JobAdapter) -> list[Op]:
    """The JSON patch that keeps a queued job suspended when an UPDATE unsuspends it."""
    return [set_op(obj, adapter.suspend_path, True)]


def integrations(text: str) -> tuple[str, ...]:
    """Kueue's integration names, comma-separated (TOWER_INTEGRATIONS); ValueError names the
    ones that are no integration of Kueue's nor of Tower's."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = registry.unknown(names)
    if unknown:
        known = ", ".join(registry.KUEUE_FRAMEWORKS)
        raise ValueError(f"{', '.join(unknown)}: no such integration (Kueue's are {known})")
    return names

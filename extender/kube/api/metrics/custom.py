"""Kueue's custom_<name> metric labels (CustomMetricLabels): each queue's values, read when used.

A family about a ClusterQueue, LocalQueue or Cohort carries, after replica_role, the
`custom_<name>` labels of the metrics.customLabels entries of that kind (Kueue's order: by
source kind, then as the file lists them). Their values are read from the object's labels
and annotations in the controller's store each time one of its series is touched, so a
series always carries what the object says now; an object not (or no longer) in the store
has empty values, as in Kueue. When an object's values change, `on_change` is told first, so
the series under its old values go before one under the new values is made (Kueue clears
the queue's series and reports them anew).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from extender.core.config.custom_labels import (
    CLUSTER_QUEUE,
    COHORT,
    LOCAL_QUEUE,
    WORKLOAD,
    CustomLabel,
    CustomLabels,
)
from extender.kube.api.resources import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES, Resource

_RESOURCES = {CLUSTER_QUEUE: CLUSTER_QUEUES, LOCAL_QUEUE: LOCAL_QUEUES, COHORT: COHORTS}


class ObjectStore(Protocol):
    """Where the queues are read: the controller's store (ref: a name, or namespace/name)."""

    def get(self, resource: Resource, key: str) -> Any: ...


def _labels_and_annotations(obj: Any) -> tuple[Mapping[str, str], Mapping[str, str]]:
    meta = (obj.get("metadata") if isinstance(obj, dict) else None) or {}
    return meta.get("labels") or {}, meta.get("annotations") or {}


class CustomValues:
    """The checked entries, the store they read, and each object's values as last read."""

    def __init__(self, labels: CustomLabels) -> None:
        self._entries: dict[str, tuple[CustomLabel, ...]] = {
            kind: labels.of_kind(kind) for kind in (CLUSTER_QUEUE, COHORT, LOCAL_QUEUE, WORKLOAD)
        }
        self.store: ObjectStore | None = None
        self.on_change: dict[str, Callable[[str], None]] = {}  # kind -> told the ref
        self._last: dict[tuple[str, str], tuple[str, ...]] = {}

    def names(self, *kinds: str) -> tuple[str, ...]:
        """The labels a family about these kinds carries, in Kueue's order (kinds sorted)."""
        return tuple(e.metric_label for kind in sorted(set(kinds)) for e in self._entries[kind])

    def has(self, kind: str) -> bool:
        return bool(self._entries[kind])

    def of(self, kind: str, ref: str) -> tuple[str, ...]:
        """One object's values now (empty ones when the store does not hold it)."""
        entries = self._entries[kind]
        if not entries:
            return ()
        obj = self.store.get(_RESOURCES[kind], ref) if self.store is not None else None
        if obj is None:
            return ("",) * len(entries)
        labels, annotations = _labels_and_annotations(obj)
        values = tuple(e.value(labels, annotations) for e in entries)
        before = self._last.get((kind, ref))
        if before != values:
            self._last[(kind, ref)] = values
            hook = self.on_change.get(kind)
            if before is not None and hook is not None:
                hook(ref)
        return values

    def of_workload(self, obj: Any) -> tuple[str, ...]:
        """A Workload's values (its labels and annotations; empty ones without it)."""
        labels, annotations = _labels_and_annotations(obj)
        return tuple(e.value(labels, annotations) for e in self._entries[WORKLOAD])

    def forget(self, kind: str, ref: str) -> None:
        """A deleted object: its values are not kept."""
        self._last.pop((kind, ref), None)

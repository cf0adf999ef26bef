"""The queues' configuration into the core: ResourceFlavors, ClusterQueues, Cohorts,
LocalQueues, priority classes and Namespaces, as the store has them now.

Keys are reconciled in batches: what changed in one turn of the loop is applied to the
core in one `configure` call, so a thousand ClusterQueues listed at once rebuild the quota
tree once, not a thousand times. An object that does not parse keeps the last good version
in force and is reported once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from extender.core import parse
from extender.core.cycle import INADMISSIBLE, PendingStatus
from extender.core.parse import ManifestError
from extender.kube.api.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    CONFIG,
    LOCAL_QUEUES,
    NAMESPACES,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    Resource,
)
from extender.kube.controller.context import Context, Ref

log = logging.getLogger("tower.config")

BY_PLURAL = {r.plural: r for r in CONFIG}

# Kinds applied through ClusterState.configure: (its argument, parser).
_CONFIGURE: dict[str, tuple[str, Callable[[Any], Any]]] = {
    RESOURCE_FLAVORS.plural: ("flavors", parse.resource_flavor),
    CLUSTER_QUEUES.plural: ("cluster_queues", parse.cluster_queue),
    COHORTS.plural: ("cohorts", parse.cohort),
    LOCAL_QUEUES.plural: ("local_queues", parse.local_queue),
    NAMESPACES.plural: ("namespaces", parse.namespace),
}


class ConfigReconciler:
    """Applies configuration keys to the core's state."""

    def __init__(
        self,
        ctx: Context,
        *,
        on_queue_deleted: Callable[[str], None],
        mark_pending: Callable[[str, PendingStatus], None],
    ) -> None:
        self.ctx = ctx
        self.on_queue_deleted = on_queue_deleted
        self.mark_pending = mark_pending
        self._failed: set[str] = set()

    def reconcile_batch(self, refs: Iterable[Ref]) -> None:
        ctx = self.ctx
        state = ctx.state
        upserts: dict[str, list[Any]] = {}
        changed = False
        for plural, key in dict.fromkeys(refs):
            resource = BY_PLURAL[plural]
            obj = ctx.store.get(resource, key)
            if obj is None:
                self._delete(resource, key)
                changed = True
                continue
            try:
                if plural in _CONFIGURE:
                    argument, parser = _CONFIGURE[plural]
                    upserts.setdefault(argument, []).append(parser(obj))
                elif resource is WORKLOAD_PRIORITY_CLASSES:
                    ctx.wpcs[key] = parse.workload_priority_class(obj)
                else:
                    ctx.pcs[key] = parse.priority_class(obj)
                self._failed.discard(f"{plural}/{key}")
                changed = True
            except ManifestError as err:
                if f"{plural}/{key}" not in self._failed:
                    self._failed.add(f"{plural}/{key}")
                    log.warning("%s %s ignored: %s: %s", resource.kind, key, err.path, err.message)
        if upserts:
            state.configure(**upserts)
            ctx.touch_queues(
                local_queues=(lq.key for lq in upserts.get("local_queues", ())),
                cluster_queues=(
                    *(cq.name for cq in upserts.get("cluster_queues", ())),
                    *(lq.cluster_queue for lq in upserts.get("local_queues", ())),
                ),
            )
            if "flavors" in upserts or "cohorts" in upserts:
                ctx.touch_queues(cluster_queues=state.cluster_queues)
        if changed:
            self.remark_inadmissible()
            ctx.reschedule()

    def _delete(self, resource: Resource, key: str) -> None:
        ctx = self.ctx
        state = ctx.state
        self._failed.discard(f"{resource.plural}/{key}")
        if resource is RESOURCE_FLAVORS:
            state.delete_flavor(key)
            ctx.touch_queues(cluster_queues=state.cluster_queues)
        elif resource is CLUSTER_QUEUES:
            state.delete_cluster_queue(key)
            self.on_queue_deleted(f"cq:{key}")
        elif resource is COHORTS:
            state.delete_cohort(key)
            ctx.touch_queues(cluster_queues=state.cluster_queues)
        elif resource is LOCAL_QUEUES:
            lq = state.local_queues.get(key)
            state.delete_local_queue(key)
            self.on_queue_deleted(f"lq:{key}")
            if lq is not None:
                ctx.touch_queues(cluster_queues=(lq.cluster_queue,))
        elif resource is WORKLOAD_PRIORITY_CLASSES:
            ctx.wpcs.pop(key, None)
        elif resource is PRIORITY_CLASSES:
            ctx.pcs.pop(key, None)
        # A deleted namespace takes its workloads with it; its labels no longer matter.

    def remark_inadmissible(self) -> None:
        """Workloads that cannot become a head (no LocalQueue, an inactive ClusterQueue) are
        told why here; heads are told by the scheduling cycle."""
        for workload, status in self.ctx.state.pending():
            if status.reason == INADMISSIBLE:
                self.mark_pending(workload.key, status)

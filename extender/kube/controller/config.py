"""The queues' configuration into the core: ResourceFlavors, ClusterQueues, Cohorts,
LocalQueues, priority classes and Namespaces, as the store has them now.

Keys are reconciled in batches: what changed in one turn of the loop is applied through the
core's builder inside one `batch`, so a thousand ClusterQueues listed at once rebuild the
quota tree once, not a thousand times. An object that does not parse keeps the last good version
in force and is reported once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from extender.core.api.models import (
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    LocalQueue,
    Namespace,
    ResourceFlavor,
)
from extender.core.api.parse import ManifestError
from extender.core.api.quantity import QuantityError, parse_quantity
from extender.core.api.topology import Topology
from extender.core.scheduling.builder import StateBuilder
from extender.core.scheduling.cache import ConfigModel
from extender.core.scheduling.cycle import INADMISSIBLE, PendingStatus
from extender.kube.api.resources import (
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    COHORTS,
    CONFIG,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_FLAVORS,
    TOPOLOGIES,
    WORKLOADS,
    Resource,
)
from extender.kube.controller.context import Context, Ref

log = logging.getLogger("tower.config")

BY_PLURAL = {r.plural: r for r in CONFIG}


class ConfigReconciler:
    """Applies configuration keys to the core's state, through the core's builder."""

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
        self.builder = StateBuilder(ctx.state)
        self._failed: set[str] = set()
        self._managed: dict[str, bool] = {}  # namespace -> in managedJobsNamespaceSelector
        self._namespaces: list[str] = []  # applied in this batch

    def reconcile_batch(self, refs: Iterable[Ref], *, rebuild: bool = False) -> None:
        """Apply these objects together. In the `rebuild` every job is looked at after."""
        ctx = self.ctx
        changed = False
        with self.builder.batch():
            for plural, key in dict.fromkeys(refs):
                resource = BY_PLURAL[plural]
                obj = ctx.store.get(resource, key)
                if obj is None:
                    self._delete(resource, key)
                    changed = True
                    continue
                try:
                    model = self.builder.apply(obj, resource.kind)
                except ManifestError as err:
                    if f"{plural}/{key}" not in self._failed:
                        self._failed.add(f"{plural}/{key}")
                        log.warning(
                            "%s %s ignored: %s: %s", resource.kind, key, err.path, err.message
                        )
                    continue
                self._failed.discard(f"{plural}/{key}")
                if isinstance(model, LocalQueue):
                    self._seed_fair_sharing(model.key, obj)
                self._touched(model, key)
                changed = True
        for name in self._namespaces:
            self._namespace_touched(name, rebuild)
        self._namespaces.clear()
        if changed:
            self.remark_inadmissible()
            ctx.reschedule()

    def _seed_fair_sharing(self, lq_key: str, obj: dict[str, Any]) -> None:
        """After a restart, a LocalQueue's admission fair sharing history is what its status
        says it consumed (as Kueue seeds it)."""
        if self.ctx.state.fair_sharing_ledger is None:
            return
        afs = ((obj.get("status") or {}).get("fairSharing") or {}).get(
            "admissionFairSharingStatus"
        ) or {}
        consumed: dict[str, float] = {}
        for resource, value in (afs.get("consumedResources") or {}).items():
            try:
                consumed[str(resource)] = float(parse_quantity(value))
            except QuantityError:
                continue  # the API validates these; an odd one counts as none
        self.ctx.state.fair_usage.seed(lq_key, consumed, self.ctx.clock())

    def _touched(self, model: ConfigModel, key: str) -> None:
        """What status an applied object may change (priority classes: none)."""
        ctx = self.ctx
        if isinstance(model, ClusterQueue):
            ctx.touch_queues(cluster_queues=(model.name,))
            # Its AdmissionChecks may have changed: reservations waiting for them look again.
            for holder in ctx.state.admitted_in(model.name):
                obj = ctx.store.get(WORKLOADS, holder.workload.key)
                if isinstance(obj, dict) and (obj.get("status") or {}).get("admissionChecks"):
                    ctx.queues.workloads.add(holder.workload.key)
            unconfigured = ctx.state.fair_sharing_ledger is None
            if (
                model.admission_fair_sharing
                and unconfigured
                and ctx.told.first(f"afs:{model.name}", "unconfigured")
            ):
                log.warning(
                    "ClusterQueue %s asks for UsageBasedAdmissionFairSharing, but Kueue's "
                    "Configuration (--config) has no admissionFairSharing: its workloads "
                    "are ordered by priority, as in Kueue",
                    model.name,
                )
        elif isinstance(model, LocalQueue):
            ctx.touch_queues(local_queues=(model.key,), cluster_queues=(model.cluster_queue,))
        elif isinstance(model, ResourceFlavor | Cohort | AdmissionCheck | Topology):
            ctx.touch_queues(cluster_queues=ctx.state.cluster_queue_names())
        elif isinstance(model, Namespace):
            self._namespaces.append(model.name)  # looked at when the batch takes effect

    def _namespace_touched(self, name: str, rebuild: bool) -> None:
        """A namespace that comes into managedJobsNamespaceSelector has its queued jobs
        looked at (their Workloads are made); one that leaves it keeps what it has. A new
        namespace counts as coming in: its jobs' events may have come before its own."""
        managed = self.ctx.manages_namespace(name)
        before = self._managed.get(name)
        self._managed[name] = managed
        if rebuild or not managed or before:
            return  # the rebuild looks at every job; else no change that matters
        prefix = f"{name}/"
        for resource in self.ctx.job_resources:
            for key in self.ctx.store.keys(resource):
                if key.startswith(prefix):
                    self.ctx.queues.jobs.add((resource.plural, key))

    def _delete(self, resource: Resource, key: str) -> None:
        ctx = self.ctx
        self._failed.discard(f"{resource.plural}/{key}")
        if resource is NAMESPACES:
            self._managed.pop(key, None)
        old = self.builder.delete(resource.kind, key)
        if resource in (RESOURCE_FLAVORS, COHORTS, ADMISSION_CHECKS, TOPOLOGIES):
            ctx.touch_queues(cluster_queues=ctx.state.cluster_queue_names())
        elif resource is CLUSTER_QUEUES:
            self.on_queue_deleted(f"cq:{key}")
        elif resource is LOCAL_QUEUES:
            self.on_queue_deleted(f"lq:{key}")
            if isinstance(old, LocalQueue):
                ctx.touch_queues(cluster_queues=(old.cluster_queue,))

    def remark_inadmissible(self) -> None:
        """Workloads that cannot become a head (no LocalQueue, an inactive ClusterQueue) are
        told why here; heads are told by the scheduling cycle."""
        for workload, status in self.ctx.state.pending():
            if status.reason == INADMISSIBLE:
                self.mark_pending(workload.key, status)

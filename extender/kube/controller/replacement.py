"""Placement kept true as nodes change: plans and topology assignments redone, or evicted for it.

Owned by the scheduling loop (through the admission writer). When nodes or pods change, the
Workloads waiting for room are tried again where room grew, and an admitted Workload whose plan
or topology assignment lost a node (it died or was cordoned) is placed again, keeping the pods
that are where they are; when no node has room it is evicted with Kueue's NodeFailures. These
writes run on the loop's thread; one not written is tried again on the next change.
"""

from __future__ import annotations

import logging
from typing import Any

from extender.core.api.models import PLACEMENT_ANNOTATION, Admission
from extender.core.placement.fit import Plan
from extender.core.scheduling.cycle import Evict
from extender.kube.api import objects as o
from extender.kube.api.client import KubeError, NotLeaderError
from extender.kube.api.placement import annotation
from extender.kube.api.resources import WORKLOADS
from extender.kube.controller.context import Context
from extender.kube.controller.eviction import EvictionWriter
from extender.kube.controller.workload_status import record

# The logger of admission.py, where these writes were made before: log filters keep working.
log = logging.getLogger("tower.admission")

Obj = dict[str, Any]
NODE_FAILURES = "NodeFailures"  # Kueue's Evicted reason when the nodes of a placement fail


class NodeReplacement:
    """Follows node changes for admitted Workloads: a new plan or topology assignment written,
    or the Workload evicted (by the eviction writer passed in) when no node has room."""

    def __init__(self, ctx: Context, evictions: EvictionWriter) -> None:
        self.ctx = ctx
        self.evictions = evictions

    def follow(self) -> None:
        """Nodes and pods changed: workloads waiting for room are tried again where room
        grew; a plan or topology assignment whose node died is redone (or its workload
        evicted)."""
        ctx = self.ctx
        placement = ctx.placement
        if placement is None:
            return
        requeue, disturbed = placement.take_changes()
        if requeue and ctx.state.requeue_inadmissible(requeue):
            ctx.reschedule()
        for key in sorted(disturbed):
            try:
                self.replan(key)
            except NotLeaderError:
                raise
            except KubeError as err:
                log.warning("placement of %s not redone yet: %s", key, err)
                placement.disturb(key)

    def replan(self, key: str) -> None:
        """A node of an admitted workload's plan died or was cordoned: place its pods again,
        keeping those where they are; when no node has room, evict it (it is requeued and
        admitted again once a plan exists)."""
        ctx = self.ctx
        holder = ctx.state.admitted_workload(key)
        placement = ctx.placement
        obj = ctx.store.get(WORKLOADS, key)
        if holder is None or holder.evicting or placement is None or not isinstance(obj, dict):
            return
        replaced = placement.replace_topology(holder.workload, holder.admission)
        if isinstance(replaced, Admission):
            self._write_topology(key, obj, replaced)
            return
        if isinstance(replaced, str):  # no replacement: Kueue's NodeFailures eviction
            ctx.state.mark_evicting(key)
            if not self.evictions.evict(Evict(holder.workload, NODE_FAILURES, None, replaced)):
                ctx.state.keep(key)
                placement.disturb(key)
            return
        old = placement.plan_of(key)
        if old is None:
            return
        plan = placement.replan(holder.workload, holder.admission, old)
        if isinstance(plan, Plan):
            if plan == old:
                return
            try:
                self._write_plan(key, obj, plan)
            except KubeError as err:
                log.warning("new placement of %s not written (%s); trying again", key, err)
                placement.disturb(key)
                return
            log.info("placement of %s redone: %s", key, annotation(plan))
            ctx.story(key, "Normal", "Replanned", f"Pods placed again: {annotation(plan)}")
            return
        ctx.state.mark_evicting(key)
        message = f"A node of its placement failed, and no other node has room: {plan}"
        if not self.evictions.evict(Evict(holder.workload, NODE_FAILURES, None, message)):
            ctx.state.keep(key)
            placement.disturb(key)

    def _write_plan(self, key: str, obj: Obj, plan: Plan) -> Obj:
        """Record the plan on the Workload (so every replica's extender enforces it), on the
        version decided on; the answer is the version the admission is then written on."""
        ctx = self.ctx
        namespace, name = key.split("/", 1)
        annotations = {PLACEMENT_ANNOTATION: annotation(plan)}
        patch = o.conditional({"metadata": {"annotations": annotations}}, obj)
        answer = ctx.write(
            WORKLOADS,
            "placement",
            lambda: ctx.client.patch(WORKLOADS, name, patch, namespace),
            key,
        )
        return record(ctx, answer) or answer  # deleted meanwhile: the admission then fails

    def _write_topology(self, key: str, obj: Obj, admission: Admission) -> None:
        """The new topology assignment on the Workload, as Kueue writes a node replacement:
        status.admission changed in place (the ungater sends the new pods there)."""
        ctx = self.ctx
        namespace, name = key.split("/", 1)
        patch = o.conditional({"status": {"admission": o.admission_dict(admission)}}, obj)
        try:
            answer = ctx.write(
                WORKLOADS,
                "patch-status",
                lambda: ctx.client.patch(WORKLOADS, name, patch, namespace, subresource="status"),
                key,
            )
        except KubeError as err:
            log.warning("new topology assignment of %s not written (%s); trying again", key, err)
            if ctx.placement is not None:
                ctx.placement.disturb(key)
            return
        record(ctx, answer)
        hosts = ", ".join(
            f"{psa.name}: {len(psa.topology.domains)} domain(s)"
            for psa in admission.pod_set_assignments
            if psa.topology is not None
        )
        ctx.story(key, "Normal", "NodeReplaced", f"A failed host's pods placed again ({hosts})")

"""Placement kept true as nodes change: plans and topology assignments redone, or evicted for it.

Owned by the scheduling loop (through the admission writer). When nodes or pods change, the
Workloads waiting for room are tried again where room grew, and an admitted Workload whose plan
lost a node (it died or was cordoned) is placed again, keeping the pods that are where they
are. A topology-placed Workload is handled as Kueue v0.19.2 handles a failed TAS node: its
hosts are judged (failed_nodes.py); a failed one is recorded in status.unhealthyNodes; a moment
later (Kueue's second pass) its pods are placed again and the record cleared in the same write,
or, with no room, the Workload is evicted with Kueue's NodeFailures. These writes run on the
loop's thread; one not written is tried again on the next change.
"""

from __future__ import annotations

import logging
from typing import Any

from extender.core.api.models import PLACEMENT_ANNOTATION, Admission
from extender.core.placement.fit import Plan
from extender.core.scheduling.cycle import Evict
from extender.core.scheduling.preemption import AdmittedWorkload
from extender.core.tas.node_failure import NO_REPLACEMENT, SECOND_PASS_DELAY
from extender.kube.api import objects as o
from extender.kube.api.client import STRATEGIC, ApiError, KubeError, NotLeaderError
from extender.kube.api.placement import PodView, annotation
from extender.kube.api.resources import PODS, WORKLOADS
from extender.kube.controller.context import Context
from extender.kube.controller.eviction import EvictionWriter
from extender.kube.controller.topology.failed_nodes import (
    HostJudge,
    Judged,
    hosts_of,
    owned_by_one_pod,
)
from extender.kube.controller.workload_status import record, write_status

# The logger of admission.py, where these writes were made before: log filters keep working.
log = logging.getLogger("tower.admission")

Obj = dict[str, Any]
NODE_FAILURES = "NodeFailures"  # Kueue's Evicted reason when the nodes of a placement fail
# What Kueue's node controller writes on a pod it fails.
TERMINATED_BY_KUEUE = "TerminatedByKueue"
TERMINATED_REASON = "UnschedulableOnAssignedNode"
TERMINATED_MESSAGE = "Pod terminated by Kueue NodeController due to node taint"
TERMINATED_EVENT = "PodTerminatedByKueue"


class NodeReplacement:
    """Follows node changes for admitted Workloads: a failed TAS host recorded, then replaced,
    a new plan written, or the Workload evicted (by the eviction writer passed in) when no
    node has room."""

    def __init__(self, ctx: Context, evictions: EvictionWriter) -> None:
        self.ctx = ctx
        self.evictions = evictions
        self.judge = HostJudge(ctx)
        self._swept = False  # every topology-placed Workload judged once this term
        self._recheck: dict[str, float] = {}  # key -> wall time a verdict is due again
        self._second_pass: dict[str, float] = {}  # key -> monotonic time its replacement is due

    def follow(self) -> None:
        """Nodes and pods changed: workloads waiting for room are tried again where room
        grew; a workload whose plan or topology hosts a change touched is looked at again,
        and so is one whose fixed delay or second pass has come."""
        ctx = self.ctx
        placement = ctx.placement
        if placement is None:
            return
        requeue, disturbed = placement.take_changes()
        if requeue and ctx.state.requeue_inadmissible(requeue):
            ctx.reschedule()
        if not self._swept:  # as Kueue's node controller sees every Node when it starts
            self._swept = True
            disturbed |= {
                h.workload.key for h in ctx.state.admitted_workloads() if hosts_of(h.admission)
            }
        disturbed |= _due(self._recheck, ctx.clock())
        now = ctx.monotonic()
        disturbed |= {k for k, at in self._second_pass.items() if at <= now}
        for key in sorted(disturbed):
            try:
                self.replan(key)
            except NotLeaderError:
                raise
            except KubeError as err:
                log.warning("placement of %s not redone yet: %s", key, err)
                placement.disturb(key)

    def replan(self, key: str) -> None:
        """A node of an admitted workload's placement changed: its topology hosts judged (and
        a failed one recorded, replaced or evicted for); a plan that lost a node redone,
        keeping the pods where they are; when no node has room, evict it (it is requeued and
        admitted again once a plan exists)."""
        ctx = self.ctx
        holder = ctx.state.admitted_workload(key)
        placement = ctx.placement
        obj = ctx.store.get(WORKLOADS, key)
        if holder is None or holder.evicting or placement is None or not isinstance(obj, dict):
            self._recheck.pop(key, None)
            self._second_pass.pop(key, None)
            return
        if self._failed_hosts(key, obj, holder):
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
        message = f"A node of its placement failed, and no other node has room: {plan}"
        self._evict(holder, message, obj)

    # ----- a failed TAS host ---------------------------------------------------------------

    def _failed_hosts(self, key: str, obj: Obj, holder: AdmittedWorkload) -> bool:
        """Kueue's node controller and second pass for one Workload; True when it wrote
        something or waits (the plan is then not looked at this time)."""
        # The admission as written: the core's copy keeps the first one (a replacement
        # changes no quota).
        admission = o.admission_of(obj) or holder.admission
        judged = self.judge.judge(key, obj, holder.workload, admission)
        if judged is None:
            return False
        due = judged.recheck_at()
        if due is None:
            self._recheck.pop(key, None)
        else:
            self._recheck[key] = due
        outcome = judged.outcome
        if outcome.eviction is not None:
            self._second_pass.pop(key, None)
            self._evict(holder, outcome.eviction, obj)
            return True
        self._fail_late_pods(judged)
        failed = [n for n in outcome.unhealthy_nodes if n in judged.verdicts]
        if not failed:
            self._second_pass.pop(key, None)
        elif key not in self._second_pass:  # Kueue's second pass waits its first backoff
            self._second_pass[key] = self.ctx.monotonic() + SECOND_PASS_DELAY
        if outcome.unhealthy_nodes != judged.current:
            if outcome.unhealthy_nodes:
                log.info("%s: node(s) %s failed", key, ", ".join(outcome.unhealthy_nodes))
            self._write_unhealthy(key, obj, outcome.unhealthy_nodes)
            return True
        if not failed:
            return False
        if self.ctx.monotonic() < self._second_pass[key]:
            return True
        del self._second_pass[key]
        self._second_pass_for(key, obj, holder, admission, failed)
        return True

    def _second_pass_for(
        self,
        key: str,
        obj: Obj,
        holder: AdmittedWorkload,
        admission: Admission,
        failed: list[str],
    ) -> None:
        """Kueue's second pass after a node failure: the failed host's pods placed again, and
        the record cleared in the same write; or the eviction when there is no room."""
        placement = self.ctx.placement
        assert placement is not None
        if self.judge.gates.skip_reassignment_for_pod_owned and owned_by_one_pod(obj):
            # The pod cannot move and the Workload dies with it: the record goes, the
            # assignment stays (Kueue's SkipReassignmentForPodOwnedWorkloads).
            self._write_unhealthy(key, obj, ())
            return
        replaced = placement.replace_topology(holder.workload, admission, failed)
        if isinstance(replaced, Admission):
            self._write_topology(key, obj, replaced)
        elif isinstance(replaced, str):
            self._evict(holder, replaced, obj)
        else:  # Kueue's message when the failed host is not one of the held domains
            self._evict(holder, NO_REPLACEMENT.format(",".join(failed)), obj)

    def _evict(self, holder: AdmittedWorkload, message: str, obj: Obj) -> None:
        """Kueue's NodeFailures eviction; status.unhealthyNodes goes in the same write."""
        ctx = self.ctx
        key = holder.workload.key
        ctx.state.mark_evicting(key)
        status = (
            {"unhealthyNodes": None} if (obj.get("status") or {}).get("unhealthyNodes") else None
        )
        if not self.evictions.evict(
            Evict(holder.workload, NODE_FAILURES, None, message), status=status
        ):
            ctx.state.keep(key)
            if ctx.placement is not None:
                ctx.placement.disturb(key)

    def _write_unhealthy(self, key: str, obj: Obj, names: tuple[str, ...]) -> None:
        """status.unhealthyNodes as the hosts are judged (cleared when none is failed)."""
        value = [{"name": n} for n in names] or None
        patch = o.conditional({"status": {"unhealthyNodes": value}}, obj)
        if write_status(self.ctx, key, patch, "unhealthy-nodes") is None and self.ctx.placement:
            self.ctx.placement.disturb(key)  # it changed meanwhile: judged again on it

    def _fail_late_pods(self, judged: Judged) -> None:
        """Pods let through to a host that will not run them fail, so their job makes new
        ones, which the ungater sends to the replacement (Kueue's markPodsFailed)."""
        for pod_key in judged.late:
            view = self.ctx.store.get(PODS, pod_key)
            if isinstance(view, PodView):
                self._fail_pod(view)

    def _fail_pod(self, view: PodView) -> None:
        """One pod Failed, with Kueue's TerminatedByKueue condition and Event."""
        ctx = self.ctx
        namespace, name = view.key.split("/", 1)
        condition = {
            "type": TERMINATED_BY_KUEUE,
            "status": "True",
            "reason": TERMINATED_REASON,
            "message": TERMINATED_MESSAGE,
            "lastTransitionTime": o.rfc3339(ctx.clock()),
        }
        # A strategic merge patch: the API server merges pod conditions by type.
        patch = {
            "metadata": {"resourceVersion": view.resource_version},
            "status": {"phase": "Failed", "conditions": [condition]},
        }
        try:
            answer = ctx.write(
                PODS,
                "patch-status",
                lambda: ctx.client.patch(
                    PODS, name, patch, namespace, subresource="status", content_type=STRATEGIC
                ),
                view.key,
            )
        except ApiError as err:
            if err.conflict or err.not_found:
                return  # it changed or went: its next event has it looked at again
            raise
        ctx.event(answer, "Normal", TERMINATED_EVENT, TERMINATED_MESSAGE)

    # ----- writes ------------------------------------------------------------------------

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
        """The new topology assignment on the Workload, as Kueue's second pass writes a node
        replacement: status.admission changed in place (the ungater sends the new pods there)
        and status.unhealthyNodes cleared, in one write."""
        ctx = self.ctx
        namespace, name = key.split("/", 1)
        status = {"admission": o.admission_dict(admission), "unhealthyNodes": None}
        patch = o.conditional({"status": status}, obj)
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


def _due(times: dict[str, float], now: float) -> set[str]:
    """The keys whose time has come, taken out."""
    ready = {k for k, at in times.items() if at <= now}
    for key in ready:
        del times[key]
    return ready

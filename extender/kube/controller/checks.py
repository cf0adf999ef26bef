"""AdmissionChecks in the controller: a reservation waits for its checks, then is admitted,
given back (Retry) or deactivated (Rejected), as the checks' controllers set their states.

The admission write reserves quota and lists the checks that apply, all Pending
(admission.py). The Workload reconciler hands each reserved Workload here: once every check
is Ready it is Admitted, and the job reconciler starts its job with the checks' podSetUpdates;
a check in Retry evicts it with reason AdmissionCheck, to be queued again after the check's
requeueAfterSeconds; a Rejected one sets DeactivationTarget, after which it is deactivated
and evicted as PodsReady's deactivations are (pods_ready.py). Every eviction puts the checks
back to Pending (admission.py). The policy is extender/core/admission/checks.py.
"""

from __future__ import annotations

import logging
from typing import Any

from extender.core.admission import checks as policy
from extender.core.admission import pods_ready as ready_policy
from extender.core.admission.checks import check_states
from extender.core.api.models import Workload
from extender.core.api.topology import DELAYED_PENDING
from extender.core.scheduling.cycle import Evict
from extender.kube.api import objects as o
from extender.kube.controller.admission import AdmissionWriter
from extender.kube.controller.context import Context
from extender.kube.controller.pods_ready import DEACTIVATION_TARGET
from extender.kube.controller.workload_status import record, write_status

log = logging.getLogger("tower.checks")

SECOND_PASS_RETRY = 10.0  # seconds before a delayed placement that found no room is retried

Obj = dict[str, Any]


class CheckGate:
    """Acts on the states of a reserved Workload's AdmissionChecks."""

    def __init__(self, ctx: Context, admission: AdmissionWriter) -> None:
        self.ctx = ctx
        self.admission = admission

    def reconcile(self, key: str, obj: Obj, model: Workload) -> bool:
        """A Workload that holds quota and is not evicted: whether its checks decided
        something now (a write was made or attempted; the caller stops there)."""
        states = check_states(obj)
        admitted = o.is_true(obj, o.ADMITTED)
        if admitted and not states:
            return False
        # The checks its ClusterQueue asks for now: one removed since the reservation no
        # longer holds it back, one added is waited for (Kueue keeps the list in step too).
        admission = o.admission_of(obj)
        cq = self.ctx.state.cluster_queue(admission.cluster_queue) if admission else None
        names = set(policy.applicable(cq, admission)) if cq and admission else set()
        if not admitted:
            wanted = policy.synced(states, names, self.ctx.clock())
            if [c.name for c in wanted] != [c.name for c in states]:
                self._write_checks(key, obj, wanted)
                return True
            if not wanted:  # reserved, and nothing left to wait for
                self._admit(key, obj, model)
                return True
        decision = policy.decide([c for c in states if c.name in names])
        if decision.action == policy.ADMIT:
            if o.is_true(obj, o.ADMITTED):
                return False
            self._admit(key, obj, model)
            return True
        if decision.action == policy.REJECT:
            return self._reject(key, obj, decision.message)
        if decision.action == policy.RETRY_ACTION:
            return self._retry(key, model, states, decision.message)
        return False

    def _write_checks(self, key: str, obj: Obj, checks: list[policy.CheckState]) -> None:
        patch = {"status": {"admissionChecks": o.checks_status(checks)}}
        if write_status(self.ctx, key, o.conditional(patch, obj), "admission-checks"):
            self.ctx.queues.workloads.add(key)

    def _admit(self, key: str, obj: Obj, model: Workload) -> None:
        ctx = self.ctx
        now = ctx.clock()
        admission = o.admission_of(obj)
        if admission is None:
            return
        status: Obj = {}
        if ctx.placement is not None and any(
            psa.delayed_topology == DELAYED_PENDING for psa in admission.pod_set_assignments
        ):
            # Kueue's second pass: placement waited for the checks (the capacity a
            # ProvisioningRequest brought); the pods are placed now, before Admitted.
            # Placed as the checks' podSetUpdates will start the pods (a provisioning node
            # selector): inside the capacity the request brought, as Kueue's second pass.
            updated = policy.with_placement_updates(model, check_states(obj))
            placed = (
                updated
                if isinstance(updated, str)
                else ctx.placement.place_delayed(updated, admission)
            )
            if isinstance(placed, str):
                if ctx.told.first(f"second-pass:{key}", placed):
                    ctx.story(key, "Warning", "SecondPassFailed", placed)
                ctx.queues.workloads.add_after(key, SECOND_PASS_RETRY)
                return
            if placed is not None:
                admission = placed
                status["admission"] = o.admission_dict(placed)
        changes = [(o.ADMITTED, "True", "Admitted", "The workload is admitted")]
        if ctx.settings.wait_for_pods_ready is not None:
            changes.append(
                (
                    o.PODS_READY,
                    "False",
                    ready_policy.WAIT_FOR_START,
                    ready_policy.NOT_READY_MESSAGE,
                )
            )
        status["conditions"] = o.with_conditions(obj, now, *changes)
        patch = {"status": status}
        answer = write_status(ctx, key, o.conditional(patch, obj), "admit-checked")
        if answer is None:
            return  # moved on: reconciled again on what it is now
        reserved = o.condition(obj, o.QUOTA_RESERVED) or {}
        since = o.seconds_at(reserved.get("lastTransitionTime"))
        waited = max(0.0, now - since) if since else 0.0
        cq = admission.cluster_queue
        self.admission.admitted(
            key,
            obj,
            record(ctx, answer) or answer,
            cq,
            now,
            f"Admitted by ClusterQueue {cq}, wait time since reservation was {waited:.0f}s",
            checks_waited=waited,
        )

    def _retry(
        self, key: str, model: Workload, states: list[policy.CheckState], message: str
    ) -> bool:
        """The reservation is given back at once (Kueue's documented behaviour); the
        Workload queues again after the checks' requeueAfterSeconds."""
        ctx = self.ctx
        holder = ctx.state.admitted_workload(key)
        if holder is None or holder.evicting:
            return False
        status: Obj = {}
        at = policy.requeue_at(states)
        if at is not None and at > ctx.clock():
            status["requeueState"] = {"requeueAt": o.rfc3339(at)}
        ctx.state.mark_evicting(key)
        decision = Evict(model, policy.EVICTED_BY_CHECK, None, f"Evicted due to {message}")
        if not self.admission.evict(decision, status=status):
            ctx.state.keep(key)
        return True

    def _reject(self, key: str, obj: Obj, message: str) -> bool:
        """DeactivationTarget, as Kueue marks it: the Workload reconciler then sets
        `spec.active: false` and evicts it (pods_ready.py's deactivation)."""
        ctx = self.ctx
        target = o.condition(obj, DEACTIVATION_TARGET)
        if target is not None and target.get("status") == "True":
            return False
        change = (DEACTIVATION_TARGET, "True", policy.EVICTED_BY_CHECK, message)
        patch = {"status": {"conditions": o.with_conditions(obj, ctx.clock(), change)}}
        if write_status(ctx, key, o.conditional(patch, obj), "deactivation-target") is None:
            return True
        log.info("Workload %s: %s", key, message)
        ctx.story(key, "Warning", "AdmissionCheckRejected", f"Deactivated due to {message}")
        ctx.queues.workloads.add(key)
        return True

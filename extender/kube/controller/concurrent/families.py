"""A concurrent-admission family as the Workload reconciler meets it: a parent and its variants.

The Workload reconciler asks `follow` on every Workload event (a parent's or a variant's
reconciles the family: extender/core/admission/concurrent.py decides, this carries it out),
and `model` for the model it goes on with: a variant searches its one flavor, and its
preemption gate is Tower's own; a parent is never queued and holds no quota of its own (its
admission is its admitted variant's); a Workload new to a ClusterQueue with a
concurrentAdmissionPolicy is labelled a parent first, as Kueue's workload controller does.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from extender.core.admission import concurrent as family
from extender.core.api.models import Workload
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError
from extender.kube.api.resources import CLUSTER_QUEUES, WORKLOADS
from extender.kube.controller.context import Context
from extender.kube.controller.job_start import delete_object
from extender.kube.controller.workload_status import record, write_status, write_workload

log = logging.getLogger("tower.concurrent")

Obj = dict[str, Any]
GATE = "ConcurrentAdmission"
GATES = "spec.preemptionGates"
# Variants of one parent are created in the same second: their queue order is the flavors'.
_RANK_STEP = 1e-3


class Families:
    """Kueue's concurrent-admission controller, run from the Workload reconciler."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @classmethod
    def of(cls, ctx: Context) -> Families | None:
        """The controller when Kueue's ConcurrentAdmission gate is on, else None."""
        return cls(ctx) if ctx.settings.feature_gates.get(GATE, False) else None

    # ----- what the Workload reconciler asks -------------------------------------------

    def follow(self, key: str, obj: Any) -> None:
        """A Workload changed (or went): its family, if it has one, is reconciled."""
        if obj is not None and not isinstance(obj, dict):
            obj = None  # finished, kept small: its variants are looked up by owner
        owner = family.parent_of(obj) if obj is not None else None
        if owner is not None and family.variant_flavor(obj):
            self.reconcile(f"{key.split('/', 1)[0]}/{owner[0]}")
        elif obj is None or family.is_parent(obj) or o.is_true(obj, o.FINISHED):
            self.reconcile(key)

    def model(self, key: str, obj: Obj, model: Workload) -> Workload | None:
        """The model the Workload reconciler goes on with; None when the family's rules took
        this event (a parent labelled, a variant's eviction passed to its parent)."""
        owner = family.parent_of(obj)
        flavor = family.variant_flavor(obj)
        if owner is not None and flavor:
            return self._variant(key, obj, model, owner[0], flavor)
        if family.is_parent(obj):
            if _holds_quota(obj):
                return model
            return replace(model, inadmissible=family.PARENT_WAITS)
        if self._policy(model) is not None and not _holds_quota(obj):
            patch = {"metadata": {"labels": {family.PARENT_LABEL: "true"}}}
            write_workload(self.ctx, key, o.conditional(patch, obj), "label-parent")
            return None
        return model

    @staticmethod
    def holds_nothing(obj: Obj) -> bool:
        """A parent: its admission is a variant's, whose quota is counted once, there."""
        return family.is_parent(obj)

    # ----- a family --------------------------------------------------------------------

    def reconcile(self, parent_key: str) -> None:
        ctx = self.ctx
        parent = ctx.store.get(WORKLOADS, parent_key)
        variants = [
            v
            for k in ctx.store.by_index(WORKLOADS, "owner", f"Workload/{parent_key}")
            if isinstance(v := ctx.store.get(WORKLOADS, k), dict) and family.variant_flavor(v)
        ]
        if parent is None or not isinstance(parent, dict):
            # Finished (kept small by the cache) or gone: what its variants still hold goes.
            for v in variants:
                if not o.is_true(v, o.FINISHED):
                    self._finish(v, "ParentFinished", "The parent Workload finished or is gone")
            return
        if not family.is_parent(parent):
            return
        queue = (parent.get("spec") or {}).get("queueName")
        lq = ctx.state.local_queue(f"{parent_key.split('/', 1)[0]}/{queue}")
        cq = ctx.store.get(CLUSTER_QUEUES, lq.cluster_queue) if lq is not None else None
        policy = family.policy_of(cq)
        if policy is None:
            return  # its ClusterQueue is gone, or dropped the policy: the family stays as it is
        actions = family.decide(
            family.member(parent),
            [family.member(v) for v in variants],
            family.flavor_order(cq),
            policy,
        )
        by_name = {v["metadata"]["name"]: v for v in variants}
        for action in actions:
            self._carry_out(parent_key, parent, by_name, action)
        members = [family.member(v) for v in variants]
        gated = family.variant_to_ungate(members, family.flavor_order(cq), ctx.clock())
        if gated is not None:
            self._open_gate(by_name[gated])

    def _carry_out(
        self, parent_key: str, parent: Obj, variants: dict[str, Obj], action: family.Action
    ) -> None:
        ctx = self.ctx
        namespace = parent_key.split("/", 1)[0]
        if isinstance(action, family.Create):
            self._create(parent, action.flavor)
        elif isinstance(action, family.Delete):
            delete_object(ctx, WORKLOADS, f"{namespace}/{action.name}")
            ctx.event(parent, "Normal", "DeletedVariant", f"Variant Workload {action.name} "
                      f"deleted; flavor {action.flavor} no longer in ClusterQueue")  # fmt: skip
        elif isinstance(action, family.SetActive):
            variant = variants[action.name]
            patch = o.conditional({"spec": {"active": action.active}}, variant)
            if write_workload(ctx, f"{namespace}/{action.name}", patch, "variant-active"):
                verb = "Activated" if action.active else "Deactivated"
                ctx.event(variant, "Normal", f"{verb}Variant",
                          f"Variant Workload {verb.lower()} due to {action.why}")  # fmt: skip
        elif isinstance(action, family.EvictParent):
            patch = o.evict_patch(parent, action.reason, None, action.message, ctx.clock())
            if write_status(ctx, parent_key, o.conditional(patch, parent), "evict-parent"):
                ctx.story(parent_key, "Normal", action.reason, action.message)
        elif isinstance(action, family.ClearVariant):
            # Its own reconcile gives the quota back, now that the parent holds none.
            ctx.queues.workloads.add(f"{namespace}/{action.name}")
        elif isinstance(action, family.AdmitParent):
            self._admit(parent_key, parent, variants[action.variant])
        elif isinstance(action, family.FinishVariant):
            self._finish(variants[action.name], action.reason, action.message)

    def _create(self, parent: Obj, flavor: str) -> None:
        ctx = self.ctx
        body = family.variant_manifest(parent, flavor)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        try:
            created = ctx.write(
                WORKLOADS,
                "create-variant",
                lambda: ctx.client.create(WORKLOADS, body, namespace),
                f"{namespace}/{name}",
            )
        except ApiError as err:
            if err.already_exists:
                ctx.refresh(WORKLOADS, f"{namespace}/{name}")
                return
            raise
        record(ctx, created)
        ctx.queues.workloads.add(f"{namespace}/{name}")
        ctx.event(
            parent, "Normal", "CreatedVariant", f"Variant Workload {namespace}/{name} created"
        )

    def _admit(self, parent_key: str, parent: Obj, variant: Obj) -> None:
        """The parent takes its admitted variant's admission; its job starts with it."""
        ctx = self.ctx
        admission = o.admission_of(variant)
        if admission is None:
            return
        name = variant["metadata"]["name"]
        message = f"The variant {name} is admitted"
        patch = o.admit_patch(
            parent, admission, ctx.clock(), (o.ADMITTED, "True", "Admitted", message)
        )
        if write_status(ctx, parent_key, o.conditional(patch, parent), "admit-parent"):
            log.info("Workload %s admitted through its variant %s", parent_key, name)
            ctx.queues.workloads.add(parent_key)

    def _open_gate(self, variant: Obj) -> None:
        """The variant may preempt now (Kueue's PreemptionUngatedVariant)."""
        ctx = self.ctx
        meta = variant["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        others = [
            g
            for g in (variant.get("status") or {}).get("preemptionGates") or ()
            if isinstance(g, dict) and g.get("name") != family.PREEMPTION_GATE
        ]
        opened = {
            "name": family.PREEMPTION_GATE,
            "position": "Open",
            "lastTransitionTime": o.rfc3339(ctx.clock()),
        }
        patch = o.conditional({"status": {"preemptionGates": [*others, opened]}}, variant)
        if write_status(ctx, key, patch, "open-preemption-gate"):
            ctx.event(variant, "Normal", "PreemptionUngatedVariant",
                      f"Opened preemption gate for variant workload {key}")  # fmt: skip
            ctx.queues.workloads.add(key)

    def _finish(self, variant: Obj, reason: str, message: str) -> None:
        ctx = self.ctx
        meta = variant["metadata"]
        key = f"{meta['namespace']}/{meta['name']}"
        patch = o.finish_patch(variant, reason, message, ctx.clock())
        if write_status(ctx, key, o.conditional(patch, variant), "finish-variant"):
            ctx.queues.workloads.add(key)

    # ----- the models ------------------------------------------------------------------

    def _variant(
        self, key: str, obj: Obj, model: Workload, parent: str, flavor: str
    ) -> Workload | None:
        ctx = self.ctx
        if o.is_true(obj, o.EVICTED) and _holds_quota(obj):
            parent_obj = ctx.store.get(WORKLOADS, f"{model.namespace}/{parent}")
            if isinstance(parent_obj, dict) and _holds_quota(parent_obj):
                ctx.state.mark_evicting(key)
                return None  # the parent gives its quota back first (its family's rule)
        cq = self._policy_queue(model)
        flavors = family.flavor_order(ctx.store.get(CLUSTER_QUEUES, cq)) if cq else ()
        rank = flavors.index(flavor) if flavor in flavors else len(flavors)
        return replace(
            model,
            allowed_flavors=(flavor,),
            unacted=tuple(p for p in model.unacted if p != GATES or not _only_ours(obj)),
            creation_time=model.creation_time + rank * _RANK_STEP,
            preemption_gated=family.gate_opened_at(obj) is None,
        )

    def _policy_queue(self, model: Workload) -> str | None:
        lq = self.ctx.state.local_queue(f"{model.namespace}/{model.queue_name}")
        return lq.cluster_queue if lq is not None else None

    def _policy(self, model: Workload) -> family.Policy | None:
        cq = self._policy_queue(model)
        return family.policy_of(self.ctx.store.get(CLUSTER_QUEUES, cq)) if cq else None


def _only_ours(obj: Obj) -> bool:
    """Its preemption gates are concurrent admission's only (Tower acts on that one)."""
    gates = (obj.get("spec") or {}).get("preemptionGates") or ()
    return all(isinstance(g, dict) and g.get("name") == family.PREEMPTION_GATE for g in gates)


def _holds_quota(obj: Obj) -> bool:
    """QuotaReserved=True and not Finished (a finished Workload keeps the condition)."""
    return o.is_true(obj, o.QUOTA_RESERVED) and not o.is_true(obj, o.FINISHED)

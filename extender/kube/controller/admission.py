"""The scheduler's admissions written (with their placement plan), and settled when ambiguous.

Owned by the scheduling loop. An admission the cycle assumed is sent in the write pool as one
conditional status patch (after its placement plan, on the same Workload, in order), and its
answer is taken in on the loop's thread while later cycles run. A failure that certainly left
the Workload unchanged undoes the assumption; an ambiguous one (the connection dropped, or the
server answered 500/504) keeps the quota held in `unsettled` until a repeat of the same
conditional write, or a read, says what happened. Nothing here starts or stops a job: an
admitted Workload's job key is put on the jobs' queue, and the job reconciler starts it.
Evictions (eviction.py) and placement redone as nodes change (replacement.py) are written by
collaborators the writer composes; the loop and the reconcilers still reach them through it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from extender.core.admission import checks
from extender.core.admission import pods_ready as ready_policy
from extender.core.admission.checks import check_states
from extender.core.api.models import PLACEMENT_ANNOTATION
from extender.core.scheduling.cycle import Admit, Evict
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError, KubeError
from extender.kube.api.placement import annotation
from extender.kube.api.resources import WORKLOADS
from extender.kube.api.writes import ADMIT
from extender.kube.controller.context import Context
from extender.kube.controller.eviction import EvictionWriter
from extender.kube.controller.recording import queued_since, subject
from extender.kube.controller.topology.replacement import NodeReplacement
from extender.kube.controller.workload_status import patch_status, record

log = logging.getLogger("tower.admission")

Obj = dict[str, Any]


class AdmissionWriter:
    """Writes admissions the cycle decided, and settles ambiguous ones. Evictions and node
    replacement are written by the collaborators it composes (`evictions`, `replacement`)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.evictions = EvictionWriter(ctx)
        self.replacement = NodeReplacement(ctx, self.evictions)
        self.unsettled: dict[str, Obj] = {}  # key -> the admission patch, outcome unknown
        self._admitted_at: dict[str, float] = {}  # key -> when admitted, until its job starts
        # What the scheduler is told of each admission's answer (the loop wires them).
        self.on_written: Callable[[], None] = lambda: None
        self.on_refused: Callable[[], None] = lambda: None  # decide again on fresh state
        self.on_failed: Callable[[KubeError], None] = lambda err: None  # back off

    def is_unsettled(self, key: str) -> bool:
        return key in self.unsettled

    def forget(self, key: str) -> None:
        self.unsettled.pop(key, None)
        self._admitted_at.pop(key, None)

    def take_admitted_at(self, key: str) -> float | None:
        """When the admission of a Workload with a job was answered (once; for metrics)."""
        return self._admitted_at.pop(key, None)

    # ----- admissions -------------------------------------------------------------------

    def admit(self, decision: Admit) -> None:
        """Send an admission the cycle assumed (after its placement plan, when it has one);
        the answer is taken in on the loop's thread. On a failure that certainly left the
        Workload unchanged the assumption is undone; on an ambiguous one the quota stays
        held until settled."""
        ctx = self.ctx
        key = decision.workload.key
        obj = ctx.store.get(WORKLOADS, key)
        if obj is None:
            ctx.state.forget(key)
            return
        now = ctx.clock()
        plan = ctx.placement.plan_of(key) if ctx.placement is not None else None
        if plan is None or not plan.pod_sets:
            self._send_admission(decision, obj, now)
            return
        namespace, name = key.split("/", 1)
        annotations = {PLACEMENT_ANNOTATION: annotation(plan)}
        patch = o.conditional({"metadata": {"annotations": annotations}}, obj)

        def placed(answer: Obj | None, err: BaseException | None) -> None:
            if err is not None:
                # Nothing holds quota yet: whatever happened to the annotation is harmless.
                self._not_admitted(decision, err, "placement")
                return
            assert answer is not None
            recorded = record(ctx, answer)  # None: deleted meanwhile, and the admission fails
            self._send_admission(decision, recorded or answer, now)

        ctx.submit(
            WORKLOADS,
            "placement",
            key,
            lambda: ctx.client.patch(WORKLOADS, name, patch, namespace),
            placed,
            priority=ADMIT,
        )

    def _send_admission(self, decision: Admit, obj: Obj, now: float) -> None:
        ctx = self.ctx
        key = decision.workload.key
        namespace, name = key.split("/", 1)
        # With WaitForPodsReady, PodsReady=False WaitForStart goes in the admission's write.
        waiting = (
            ((o.PODS_READY, "False", ready_policy.WAIT_FOR_START, ready_policy.NOT_READY_MESSAGE),)
            if ctx.settings.wait_for_pods_ready is not None
            else ()
        )
        cq = ctx.state.cluster_queue(decision.admission.cluster_queue)
        names = checks.applicable(cq, decision.admission) if cq is not None else ()
        states = checks.synced(check_states(obj), names, now) if names else []
        if states:
            waiting = ()  # PodsReady waits for the admission, after the checks
        patch = o.conditional(
            o.admit_patch(obj, decision.admission, now, *waiting, checks=states), obj
        )

        def answered(answer: Obj | None, err: BaseException | None) -> None:
            if err is None:
                assert answer is not None
                cq_name = decision.admission.cluster_queue
                waited = now - queued_since(obj)
                ctx.metrics.quota_reserved(subject(ctx, obj, cq_name), cq_name, waited)
                if states:
                    self._reserved(key, decision, names)
                else:
                    self._admitted(key, obj, record(ctx, answer), decision, now)
                self.on_written()
            elif isinstance(err, KubeError) and err.ambiguous:
                log.warning("admission of %s: %s; the quota stays held until settled", key, err)
                self.unsettled[key] = patch
                ctx.queues.workloads.retry(key, err.retry_after or 0.0)
                self.on_failed(err)
            else:
                self._not_admitted(decision, err, "admission")

        ctx.submit(
            WORKLOADS,
            "status-admit",
            key,
            lambda: ctx.client.patch(WORKLOADS, name, patch, namespace, subresource="status"),
            answered,
            priority=ADMIT,
        )

    def _not_admitted(self, decision: Admit, err: BaseException, what: str) -> None:
        """A write of an admission certainly failed: the quota it held is free again, and the
        Workload is read again on a conflict. A retriable failure backs the scheduler off."""
        ctx = self.ctx
        key = decision.workload.key
        ctx.state.forget(key)
        ctx.touch(decision.workload.namespace, decision.workload.queue_name)
        if not isinstance(err, KubeError):
            raise err  # a bug: logged with its traceback by the pool
        if isinstance(err, ApiError) and err.conflict:
            ctx.refresh(WORKLOADS, key)
            ctx.queues.workloads.add(key)
            self.on_refused()
            return
        if isinstance(err, ApiError) and err.not_found:
            ctx.store.forget(WORKLOADS, key)
            self.on_refused()
            return
        if err.retriable:
            self.on_failed(err)
            return
        log.warning("%s of %s not written: %s", what, key, err)

    def _reserved(self, key: str, decision: Admit, names: tuple[str, ...]) -> None:
        """Quota reserved, AdmissionChecks to pass: admitted once all are Ready (checks.py)."""
        ctx = self.ctx
        cq = decision.admission.cluster_queue
        log.info("quota reserved for %s in ClusterQueue %s; waiting for %s", key, cq, names)
        ctx.touch_queues(
            local_queues=(f"{decision.workload.namespace}/{decision.workload.queue_name}",),
            cluster_queues=(cq,),
        )
        ctx.told.forget(f"pending:{key}")
        ctx.story(
            key,
            "Normal",
            "QuotaReserved",
            f"Quota reserved in ClusterQueue {cq}; waiting for AdmissionCheck(s) "
            + ", ".join(names),
        )

    def _admitted(
        self, key: str, obj: Obj, recorded: Obj | None, decision: Admit, now: float
    ) -> None:
        ctx = self.ctx
        cq = decision.admission.cluster_queue
        # The core assumed it when the cycle decided: its queues' status changed, but no new
        # cycle is due for it (one per answer would cost a cycle per admission).
        ctx.touch_queues(
            local_queues=(f"{decision.workload.namespace}/{decision.workload.queue_name}",),
            cluster_queues=(cq,),
        )
        ctx.told.forget(f"pending:{key}")
        ctx.story(key, "Normal", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}")
        self.admitted(key, obj, recorded, cq, now, f"Admitted by ClusterQueue {cq}")

    def admitted(
        self,
        key: str,
        obj: Obj,
        recorded: Obj | None,
        cq: str,
        now: float,
        message: str,
        checks_waited: float | None = None,
    ) -> None:
        """The Workload is Admitted (at once, or `checks_waited` seconds after its quota was
        reserved, once its checks were Ready): counted, told, and its job started."""
        ctx = self.ctx
        log.info("admitted %s in ClusterQueue %s", key, cq)
        ctx.metrics.admitted(subject(ctx, obj, cq), cq, now - queued_since(obj), checks_waited)
        ctx.state.fair_usage.settle(key, ctx.clock())  # its entry penalty joins the history
        ctx.story(key, "Normal", "Admitted", message)
        owner = ctx.owner_of(recorded) if recorded is not None else None
        if owner is not None:
            self._admitted_at[key] = ctx.clock()
            ctx.queues.jobs.add((owner[0].plural, owner[1]))  # the job reconciler starts it

    def settle(self, key: str) -> None:
        """An admission write whose outcome is unknown: repeat it, conditional on the same
        version. Either it lands now (and the first never can), or the version moved on (409)
        and a read shows whether that was the first write landing."""
        ctx = self.ctx
        try:
            patch_status(ctx, key, self.unsettled[key], "admit")
        except ApiError as err:
            if err.conflict:
                ctx.refresh(WORKLOADS, key)  # reconcile then follows what the read shows
            elif err.not_found:
                ctx.store.forget(WORKLOADS, key)
            else:
                raise
        del self.unsettled[key]
        log.info("admission of %s settled", key)

    # ----- delegated: the loop and the reconcilers are handed this one writer ------------

    def follow_placement(self) -> None:
        """Nodes and pods changed: see `NodeReplacement.follow`."""
        self.replacement.follow()

    def evict(
        self,
        decision: Evict,
        *,
        paced: bool = True,
        status: Obj | None = None,
        drop: tuple[str, ...] = (),
    ) -> bool:
        """Write an eviction: see `EvictionWriter.evict`. False if not written."""
        return self.evictions.evict(decision, paced=paced, status=status, drop=drop)

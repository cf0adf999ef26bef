"""The group room: many pods, one Workload (a pod group, a StatefulSet's pods).

`reconcile(key)` takes a group Workload's key and reads, as the store has them now, the pods
that belong to it and the object that declares it (a StatefulSet; none for a plain pod
group). It makes the Workload, lets every gated member through once it is admitted, deletes
the running members once it is evicted (its quota is given back when none runs), and ends it
when the group has ended, as Kueue's pod-group reconciler does. A StatefulSet's Workload
follows its StatefulSet as Kueue's statefulset reconciler has it: on hold while scaled to
zero, and its queue name (on the Workload and every pod) the StatefulSet's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from extender.core.admission.multikueue import ORIGIN_LABEL
from extender.core.api.models import QUEUE_NAME_LABEL
from extender.core.api.parse import ManifestError
from extender.core.jobframework import groups, reclaimable, serving
from extender.core.jobframework.parent import TemplateParent
from extender.kube.api import objects as o
from extender.kube.api.cache import Cache
from extender.kube.api.client import ApiError
from extender.kube.api.resources import WORKLOADS, Resource
from extender.kube.api.trim import JobView
from extender.kube.controller.context import Context
from extender.kube.controller.job_start import JobStarter, delete_object, patch_job
from extender.kube.controller.jobs import (
    finish_workload,
    holds_quota,
    reclaimable_change,
    write_reclaimable,
)
from extender.kube.controller.pod_groups.pods import GroupPods, member_of
from extender.kube.controller.pod_groups.workloads import GroupWorkloads
from extender.kube.controller.pods_ready import PodsReadyWatch
from extender.kube.controller.priority import follow_priority_label
from extender.kube.controller.workload_status import write_status, write_workload

log = logging.getLogger("tower.groups")

Obj = dict[str, Any]


class GroupReconciler:
    """One group's Workload, following its pods (and the object that declares it)."""

    def __init__(
        self,
        ctx: Context,
        starter: JobStarter,
        pods: Resource | None,
        parents: Mapping[Resource, TemplateParent],
        ready: PodsReadyWatch | None = None,
    ) -> None:
        self.ctx = ctx
        self.starter = starter
        self.ready = ready  # WaitForPodsReady: a group is ready when all its pods are
        self.pods = pods  # None when the pod integration is off: no group is followed
        self.parents = dict(parents)
        self.pods_ops = GroupPods(ctx, pods, self.parents)
        self.making = GroupWorkloads(ctx, pods, self.pods_ops, self.members)

    @classmethod
    def of_cache(
        cls, ctx: Context, starter: JobStarter, cache: Cache, ready: PodsReadyWatch
    ) -> GroupReconciler:
        """The room for the pods and the declaring kinds this cache watches."""
        pods = next((r for r in cache.job_resources if r.kind == "Pod"), None)
        parents = dict(zip(cache.parent_resources, cache.group_parents, strict=True))
        return cls(ctx, starter, pods, parents, ready)

    def handlers(self) -> list[tuple[Resource, Callable[[str, Any, Any], None]]]:
        """What a change enqueues: a group's Workload, itself; a declaring object's (a
        StatefulSet's), its groups and its pods made before it was seen, which wait to be
        told their group."""

        def on_workload(key: str, old: Any, new: Any) -> None:
            if o.is_group_workload(new if new is not None else old):
                self.ctx.queues.groups.add(key)

        def on_pod(key: str, old: Any, new: Any) -> None:
            view = new if new is not None else old
            if isinstance(view, JobView) and view.group is not None:
                self.ctx.queues.groups.add(f"{view.namespace}/{view.group[0]}")

        out: list[tuple[Resource, Callable[[str, Any, Any], None]]] = [(WORKLOADS, on_workload)]
        if self.pods is not None:
            out.append((self.pods, on_pod))
        for resource, parent in self.parents.items():

            def on_parent(key: str, old: Any, new: Any, parent: TemplateParent = parent) -> None:
                for obj in (old, new):
                    if obj is not None:
                        self._enqueue(key.split("/", 1)[0], parent, obj)

            out.append((resource, on_parent))
        return out

    def rebuild(self) -> None:
        """At the start of a term: every group a declaring object has (the loop enqueues
        those of the pods)."""
        store = self.ctx.store
        for resource, parent in self.parents.items():
            for key, obj in store.items(resource):
                self._enqueue(key.split("/", 1)[0], parent, obj)

    def _enqueue(self, namespace: str, parent: TemplateParent, obj: Obj) -> None:
        queues = self.ctx.queues
        for name in parent.workload_names(obj):
            queues.groups.add(f"{namespace}/{name}")
        own = (obj.get("metadata") or {}).get("name")
        queues.groups.add(f"{namespace}/{groups.UNSTAMPED}{own}")

    # ----- reading ----------------------------------------------------------------------

    def members(self, wl_key: str) -> list[JobView]:
        if self.pods is None:
            return []
        store = self.ctx.store
        views = (store.get(self.pods, key) for key in store.by_index(self.pods, "group", wl_key))
        return [v for v in views if isinstance(v, JobView)]

    def declared_by(
        self, wl_key: str, workload: Obj | None
    ) -> tuple[TemplateParent, Resource, Obj | None] | None:
        """The kind that declares this group and its object (None once it is gone); None for a
        plain pod group."""
        store = self.ctx.store
        for resource, parent in self.parents.items():
            for key in store.by_index(resource, "group", wl_key):
                return parent, resource, store.get(resource, key)
        annotations = ((workload or {}).get("metadata") or {}).get("annotations") or {}
        gvk = annotations.get(groups.OWNER_GVK)
        for resource, parent in self.parents.items():
            if gvk == f"{parent.group}/{parent.version}, Kind={parent.kind}":
                return parent, resource, None
        return None

    # ----- the reconcile ----------------------------------------------------------------

    def reconcile(self, wl_key: str) -> float | None:
        ctx = self.ctx
        views = self.members(wl_key)
        namespace, name = wl_key.split("/", 1)
        # 0. Pods that cannot know their group alone (a LeaderWorkerSet's) are told it first.
        if name.startswith(groups.UNSTAMPED):
            self.pods_ops.stamp(namespace, name.removeprefix(groups.UNSTAMPED), views)
            return None
        workload = ctx.store.get(WORKLOADS, wl_key)
        declared = self.declared_by(wl_key, workload)
        # 1. No Workload yet: made from what declares it, or once every member exists. A
        #    MultiKueue manager's copy of what declares it waits: the manager copies each of
        #    its Workloads here as it dispatches them.
        if workload is None:
            if declared is not None:
                if _from_manager(declared[2]):
                    return None
                return self.making.create_declared(wl_key, *declared)
            return self.making.create_from_members(wl_key, views)
        if ctx.busy(WORKLOADS.plural, wl_key):
            ctx.after_writes(WORKLOADS.plural, wl_key, lambda: ctx.queues.groups.add(wl_key))
            return None
        meta = workload.get("metadata") or {}
        # 2. Deleted by someone, or no longer wanted: every pod of the group is stopped (as
        #    Kueue's WorkloadDeleted), or the Workload goes (its StatefulSet was deleted or
        #    scaled to zero; its plain group has no pod left).
        if meta.get("deletionTimestamp"):
            self.pods_ops.stop(views, "the Workload of its group was deleted", gated_too=True)
            self.pods_ops.release(views)
            return None
        if self._unwanted(name, declared, views, workload):
            self._delete(wl_key)
            return None
        if declared is not None and declared[2] is not None:
            if declared[0].stamps_members:  # a StatefulSet's: held at zero, its queue followed
                followed = self._follow_owner(wl_key, workload, declared[0], declared[2], views)
            else:  # a LeaderWorkerSet's: its queue and priority class followed
                followed = self._follow_declarer(wl_key, workload, declared[0], declared[2])
            if followed is None:
                return None
            workload = followed
            self._say_if_resized(name, workload, declared[0], declared[2])
            if declared[0].stamps_members:  # a StatefulSet's pods, told their group
                self.pods_ops.stamp_members(declared[0], declared[2], views)
        # 3. Finished: Kueue's finalizers come off its pods.
        if o.is_true(workload, o.FINISHED):
            self.pods_ops.release(views)
            return None
        members = [member_of(v) for v in views]
        # 4. A plain group's end: all its pods succeeded, or an unretriable one ended it.
        if declared is None and members:
            total = members[0].total or sum(_counts(workload).values())
            end = groups.finished(members, total)
            if end is not None:
                finish_workload(ctx, wl_key, workload, *end)
                self.pods_ops.release(views)
                return None
        if declared is None and members and not members[0].fast:
            if self._say_replacements(wl_key, workload, members) is None:
                return None  # the Workload moved on: looked at again
            workload = ctx.store.get(WORKLOADS, wl_key) or workload
        # 5. Evicted: its running pods are deleted; once none runs, its quota goes back.
        if holds_quota(workload) and o.is_true(workload, o.EVICTED):
            evicted = o.condition(workload, o.EVICTED) or {}
            self.pods_ops.stop(views, f"Evicted: {evicted.get('message') or evicted.get('reason')}")
            if not any(v.active for v in views):
                self.starter.stop_evicted(wl_key, workload, None)
            return None
        # 6. A plain group is kept to its size: members beyond it are deleted (before any
        #    is let through), and ended ones whose place a replacement took are let go.
        if declared is None and members and not members[0].fast:
            counts = _counts(workload)
            by_name = {v.name: v for v in views}
            dropped = {m.name for m in groups.excess(members, counts)}
            for pod_name in sorted(dropped):
                self.pods_ops.delete_excess(by_name[pod_name])
            for member in groups.replaced(members, counts):
                self.pods_ops.release([by_name[member.name]])
            views = [v for v in views if v.name not in dropped]
        # A plain group's succeeded pods give their quota back (Kueue's reclaimable pods).
        if declared is None and views:
            serving = dict(views[0].annotations).get(groups.SERVING) == "true"
            found = reclaimable.pod_group([member_of(v) for v in views], serving)
            wanted = reclaimable_change(ctx, found, workload)
            if wanted is not None:
                written = write_reclaimable(ctx, wl_key, workload, wanted)
                if written is None:
                    return 0.0  # it moved meanwhile: looked at again
                workload = written
        # 7. Admitted: every gated member let through with its podSet's placement (unless
        #    MultiKueue runs the group on a worker: then its pods here stay gated).
        if (
            holds_quota(workload)
            and o.is_true(workload, o.ADMITTED)
            and ctx.state.is_admitted(wl_key)
            and (workload.get("spec") or {}).get("active") is not False
            and not ctx.runs_on_worker(workload)
        ):
            self.pods_ops.start(wl_key, workload, views)
            if self.ready is not None:  # Kueue's: as many pods as admitted, every one Ready
                running = [v for v in views if not v.suspended and v.finished is None]
                whole = len(running) >= sum(_counts(workload).values())
                self.ready.follow(wl_key, workload, whole and all(v.pods_ready for v in running))
        return None

    def _unwanted(
        self,
        name: str,
        declared: tuple[TemplateParent, Resource, Obj | None] | None,
        views: Sequence[JobView],
        workload: Obj,
    ) -> bool:
        """Its plain group has no pod left; or what declared it is gone, or no longer has
        this group (scaled to zero, or below its index). Never a MultiKueue manager's copy on
        a worker: its pods, or what declares them, come once it is admitted here, and the
        manager removes it."""
        if _from_manager(workload):
            return False
        if declared is None:
            return not views and self.pods is not None
        parent, _, obj = declared
        if obj is None:
            return True
        if serving.scaled_to_zero(parent, obj):
            return False  # kept on hold, to be admitted again on scale-up (Kueue's)
        try:
            return parent.group_pod_sets(obj, name) is None
        except ManifestError:
            return False

    def _follow_owner(
        self,
        wl_key: str,
        workload: Obj,
        parent: TemplateParent,
        obj: Obj,
        views: Sequence[JobView],
    ) -> Obj | None:
        """Kueue's statefulset reconciler: scaled to zero, the Workload gives its quota back
        and is held (QuotaReserved=False, OnHold), not requeued; scaled up, it is released to
        wait for quota again, and its queue name and its pods' are the StatefulSet's. The
        Workload as it is now, or None when nothing more is to be done with it."""
        ctx = self.ctx
        if serving.scaled_to_zero(parent, obj):
            if holds_quota(workload) and (workload.get("spec") or {}).get("active") is not False:
                patch = o.conditional(self._hold_patch(workload, groups.ON_HOLD), workload)
                if write_status(ctx, wl_key, patch, "on-hold") is not None:
                    ctx.queues.workloads.add(wl_key)
            return None
        queue = ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME_LABEL)
        if queue:
            for view in views:
                if view.queue_name != queue and not view.finished:
                    try:
                        patch_job(ctx, view, {"metadata": {"labels": {QUEUE_NAME_LABEL: queue}}})
                    except ApiError as err:
                        if not err.not_found:  # a pod gone meanwhile needs no label
                            raise
            if (workload.get("spec") or {}).get("queueName") != queue:
                patch = o.conditional({"spec": {"queueName": queue}}, workload)
                written = write_workload(ctx, wl_key, patch, "queue-name")
                if written is None:
                    return None  # it moved meanwhile: looked at again
                ctx.queues.workloads.add(wl_key)
                workload = written
        if groups.on_hold(workload):
            resized = self._resize_held(wl_key, workload, parent, obj)
            if resized is None:
                return None
            workload = resized
            gates = ctx.settings.feature_gates
            reason = (
                "PendingEvaluation"
                if gates.get("UnadmittedWorkloadsObservability", False)
                else "Pending"
            )
            patch = o.conditional(self._hold_patch(workload, reason), workload)
            written = write_status(ctx, wl_key, patch, "off-hold")
            if written is None:
                return None
            ctx.queues.workloads.add(wl_key)
            workload = written
        return workload

    def _follow_declarer(
        self, wl_key: str, workload: Obj, parent: TemplateParent, obj: Obj
    ) -> Obj | None:
        """Kueue's LeaderWorkerSet reconciler (updateWorkload): each group's Workload takes
        the set's queue name and WorkloadPriorityClass label as they are now (its webhook
        lets them change only while no group is ready). The Workload as it is now, or None
        if it moved meanwhile."""
        ctx = self.ctx
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        queue = labels.get(QUEUE_NAME_LABEL)
        if queue and (workload.get("spec") or {}).get("queueName") != queue:
            patch = o.conditional({"spec": {"queueName": queue}}, workload)
            written = write_workload(ctx, wl_key, patch, "queue-name")
            if written is None:
                return None  # it moved meanwhile: looked at again
            ctx.queues.workloads.add(wl_key)
            workload = written
        about = {**obj, "kind": parent.kind, "apiVersion": f"{parent.group}/{parent.version}"}
        who = f"{parent.kind} {meta.get('namespace')}/{meta.get('name')}"
        return follow_priority_label(ctx, labels, None, about, who, wl_key, workload)

    def _resize_held(
        self, wl_key: str, workload: Obj, parent: TemplateParent, obj: Obj
    ) -> Obj | None:
        """Scaled up from zero to another size: the held Workload, which holds no quota,
        asks for the new size before it waits for quota again (the webhook lets a
        StatefulSet change size only through zero). None if it moved meanwhile."""
        name = wl_key.split("/", 1)[1]
        try:
            wanted = {t.name: t.count for t in parent.group_pod_sets(obj, name) or ()}
        except ManifestError:
            return workload
        if not wanted or wanted == _counts(workload):
            return workload
        pod_sets = [
            {**ps, "count": wanted.get(str(ps.get("name")), ps.get("count"))}
            for ps in (workload.get("spec") or {}).get("podSets") or []
            if isinstance(ps, dict)
        ]
        patch = o.conditional({"spec": {"podSets": pod_sets}}, workload)
        return write_workload(self.ctx, wl_key, patch, "patch-podsets")

    def _hold_patch(self, workload: Obj, reason: str) -> Obj:
        """QuotaReserved=False for this reason, its admission cleared and Admitted False, as
        Kueue's UnsetQuotaReservationWithCondition leaves it."""
        message = groups.ON_HOLD_MESSAGE if reason == groups.ON_HOLD else groups.OFF_HOLD_MESSAGE
        changes = [(o.QUOTA_RESERVED, "False", reason, message)]
        if o.is_true(workload, o.ADMITTED):
            changes.append(
                (o.ADMITTED, "False", "NoReservation", "The workload has no reservation")
            )
        status: Obj = {"conditions": o.with_conditions(workload, self.ctx.clock(), *changes)}
        if (workload.get("status") or {}).get("admission") is not None:
            status["admission"] = None
        return {"status": status}

    def _delete(self, wl_key: str) -> None:
        delete_object(self.ctx, WORKLOADS, wl_key)
        self.ctx.store.forget(WORKLOADS, wl_key)
        self.ctx.queues.workloads.add(wl_key)

    # ----- telling ----------------------------------------------------------------------

    def _say_replacements(
        self, wl_key: str, workload: Obj, members: Sequence[groups.Member]
    ) -> Obj | None:
        """Kueue's WaitingForReplacementPods on a plain group's Workload, when it changes. The
        Workload written, or as it was; None if it moved on."""
        current = o.condition(workload, groups.WAITING_FOR_REPLACEMENT)
        evicted = o.condition(workload, o.EVICTED)
        want = groups.replacement_condition(
            _counts(workload),
            members,
            None
            if current is None
            else (current.get("status"), current.get("reason"), current.get("message")),
            None
            if evicted is None or evicted.get("status") != "True"
            else (str(evicted.get("reason")), str(evicted.get("message") or "")),
        )
        if want is None:
            return workload
        conditions = o.with_conditions(
            workload, self.ctx.clock(), (groups.WAITING_FOR_REPLACEMENT, *want)
        )
        patch = o.conditional({"status": {"conditions": conditions}}, workload)
        return write_status(self.ctx, wl_key, patch, "replacement")

    def _say_if_resized(self, name: str, workload: Obj, parent: TemplateParent, obj: Obj) -> None:
        """Its size changed where no webhook sees it (`kubectl scale` goes through the scale
        subresource, as it does past Kueue's): said once, on the object."""
        try:
            wanted = {t.name: t.count for t in parent.group_pod_sets(obj, name) or ()}
        except ManifestError:
            return
        held = _counts(workload)
        if not wanted or wanted == held:
            return
        message = (
            f"its Workload {name} holds quota for {sum(held.values())} pods, and it now asks for "
            f"{sum(wanted.values())}: pods beyond the admission stay gated; scale it to 0 and "
            "back to queue it at the new size (its size changed through the scale "
            "subresource, which admission webhooks do not see)"
        )
        meta = obj.get("metadata") or {}
        if self.ctx.told.first(f"resized:{meta.get('uid')}", message):
            log.warning(
                "%s %s/%s: %s", parent.kind, meta.get("namespace"), meta.get("name"), message
            )
            self.ctx.event(
                {**obj, "kind": parent.kind, "apiVersion": f"{parent.group}/{parent.version}"},
                "Warning",
                "SizeNotAdmitted",
                message,
            )


def _from_manager(obj: Obj | None) -> bool:
    return ORIGIN_LABEL in ((obj or {}).get("metadata") or {}).get("labels", {})


def _counts(workload: Obj) -> dict[str, int]:
    return {
        str(ps.get("name")): int(ps.get("count") or 0)
        for ps in (workload.get("spec") or {}).get("podSets") or []
        if isinstance(ps, dict)
    }

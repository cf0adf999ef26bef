"""What the group room does to a group's pods: tells them their group, lets them through,
deletes them, takes Kueue's finalizer off, and says what keeps them waiting."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from extender.core.admission.checks import check_states
from extender.core.api.parse import ManifestError
from extender.core.jobframework import groups
from extender.core.jobframework.parent import TemplateParent
from extender.core.jobframework.pod import ADMISSION_GATE
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError
from extender.kube.api.resources import Resource
from extender.kube.api.trim import JobView
from extender.kube.controller import recording
from extender.kube.controller.context import Context
from extender.kube.controller.job_start import delete_object, patch_job

log = logging.getLogger("tower.groups")

Obj = dict[str, Any]


def member_of(view: JobView) -> groups.Member:
    """A pod of a group as the group's rules read it."""
    annotations = dict(view.annotations)
    try:
        total: int | None = groups.total_count(
            {"metadata": {"annotations": {groups.TOTAL_COUNT: annotations.get(groups.TOTAL_COUNT)}}}
        )
    except ManifestError:
        total = None
    finished = view.finished[0] if view.finished is not None else ""
    phase = "Gone" if finished == "OwnerNotFound" else finished
    source = view.source
    template = {"spec": source.get("spec") or {}} if source is not None else None
    return groups.Member(
        name=view.name,
        uid=view.uid,
        role=view.group[1] if view.group is not None else "",
        gated=view.suspended,
        phase=phase,
        running=view.active,
        holds=view.holds,
        unretriable=annotations.get(groups.RETRIABLE) == "false",
        total=total,
        fast=annotations.get(groups.FAST_ADMISSION) == "true",
        queue=view.queue_name,
        template=template,
    )


class GroupPods:
    """The writes to a group's pods, one conditional patch or delete each."""

    def __init__(
        self, ctx: Context, pods: Resource | None, parents: Mapping[Resource, TemplateParent]
    ) -> None:
        self.ctx = ctx
        self.pods = pods
        self.parents = parents

    def stamp(self, namespace: str, parent_name: str, views: Sequence[JobView]) -> None:
        ctx = self.ctx
        for resource, parent in self.parents.items():
            obj = ctx.store.get(resource, f"{namespace}/{parent_name}")
            if obj is None or not parent.stamps_pods:
                continue
            for view in views:
                source = view.source
                if source is None and self.pods is not None:
                    fresh = ctx.refresh(self.pods, view.key)
                    source = fresh.source if isinstance(fresh, JobView) else None
                patch = self._stamp(parent, obj, source)
                if patch is not None:
                    patch_job(ctx, view, patch)
            return

    def stamp_members(self, parent: TemplateParent, obj: Obj, views: Sequence[JobView]) -> None:
        """Members not told their group yet (a StatefulSet's: no total count kept) are,
        one patch each, from the pod as the API server has it."""
        for view in views:
            if any(k == groups.TOTAL_COUNT for k, _ in view.annotations) or view.finished:
                continue
            source = view.source
            if source is None and self.pods is not None:
                namespace, name = view.key.split("/", 1)
                try:
                    source = self.ctx.client.get(self.pods, name, namespace)
                except ApiError as err:
                    if not err.not_found:
                        raise
                    continue
            patch = self._stamp(parent, obj, source)
            if patch is not None:
                patch_job(self.ctx, view, patch)

    def _stamp(self, parent: TemplateParent, obj: Obj, pod: Obj | None) -> Obj | None:
        if pod is None:
            return None
        gates = self.ctx.settings.feature_gates
        on = gates.get("WorkloadIdentifierAnnotations", True)
        return parent.stamp(obj, pod, identifier_annotations=on)

    # ----- the members ------------------------------------------------------------------

    def start(self, wl_key: str, workload: Obj, views: Sequence[JobView]) -> None:
        """Gated members get their podSet's placement and lose the gate, one patch each, as
        long as their podSet has room: never more running pods than the admission counts
        (a StatefulSet scaled through its scale subresource, which no webhook sees, keeps its
        extra pods gated)."""
        ctx = self.ctx
        admission = o.admission_of(workload)
        if admission is None:
            return
        planned = ctx.placement is not None and ctx.placement.plan_of(wl_key) is not None
        name = str((workload.get("metadata") or {}).get("name"))
        queue_name = str((workload.get("spec") or {}).get("queueName") or "")
        checks = check_states(workload)
        room = {p.name: p.count for p in admission.pod_set_assignments}
        for view in views:
            if view.group is not None and not view.suspended and view.finished is None:
                room[view.group[1]] = room.get(view.group[1], 0) - 1
        # Ordinals in order (a StatefulSet's pod-2 before pod-10).
        for view in sorted(views, key=lambda v: (len(v.name), v.name)):
            if not view.suspended or view.finished is not None or view.group is None:
                continue
            role = view.group[1]
            assigned = tuple(p for p in admission.pod_set_assignments if p.name == role)
            if not assigned:
                self.tell(
                    view,
                    "ErrWorkloadCompose",
                    f"its Workload {wl_key} has no podSet {role}: it stays gated",
                )
                continue
            if room.get(role, 0) <= 0:
                self.tell(
                    view,
                    "BeyondAdmission",
                    f"its Workload {wl_key} is admitted for {assigned[0].count} pods of podSet "
                    f"{role}, and as many run: it stays gated until one of them ends",
                )
                continue
            room[role] -= 1
            patch = o.start_patch(
                view.as_object(),
                dataclasses.replace(admission, pod_set_assignments=assigned),
                ctx.state.resource_flavors(),
                queue_name,
                workload=name if planned or o.topology_placed(admission) else None,
                scheduler_name=ctx.settings.scheduler_name if planned else None,
                checks=checks,
            )
            started = patch_job(ctx, view, patch)
            recording.gate_removed(ctx, workload, ADMISSION_GATE, is_group=True)
            ctx.event(
                started.as_object(),
                "Normal",
                "Started",
                f"Admitted by clusterQueue {admission.cluster_queue}",
            )

    def stop(self, views: Sequence[JobView], why: str, *, gated_too: bool = False) -> None:
        """Running members are deleted (a gate cannot be put back); gated ones too when the
        whole group goes."""
        for view in views:
            if view.finished is not None or (view.suspended and not gated_too):
                continue
            if not self.ctx.told.first(f"deleted:{view.uid}", "deleted"):
                continue  # asked once already: it is stopping
            self._delete_pod(view, f"deleted:{view.uid}")
            self.ctx.event(view.as_object(), "Normal", "Stopped", f"Deleted by Tower: {why}")

    def delete_excess(self, view: JobView) -> None:
        if not self.ctx.told.first(f"deleted:{view.uid}", "excess"):
            return  # asked once already
        self.release([view])
        self._delete_pod(view, f"deleted:{view.uid}")
        self.ctx.event(view.as_object(), "Normal", "ExcessPodDeleted", "Excess pod deleted")

    def _delete_pod(self, view: JobView, asked: str) -> None:
        """Delete a member once (`asked` remembers it); a failure forgets, for the retry."""
        try:
            delete_object(self.ctx, view.resource, view.key)
        except Exception:
            self.ctx.told.forget(asked)
            raise

    def release(self, views: Sequence[JobView]) -> None:
        """Kueue's finalizer off these members (their end is counted)."""
        for view in views:
            if view.holds:
                try:
                    patch_job(self.ctx, view, view.adapter.release_patch(view.as_object()))
                except ApiError as err:
                    if not err.not_found:
                        raise

    def stamp_role(self, view: JobView, role: str) -> None:
        """Kueue's role hash on a member that joined its group after it was created."""
        patch_job(self.ctx, view, {"metadata": {"annotations": {groups.ROLE_HASH: role}}})

    def tell(self, view: JobView, reason: str, message: str) -> None:
        if self.ctx.told.first(f"group:{view.uid}:{reason}", message):
            log.info("pod %s: %s", view.key, message)
            self.ctx.event(view.as_object(), "Warning", reason, message)

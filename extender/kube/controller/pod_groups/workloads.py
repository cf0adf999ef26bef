"""Making a group's Workload: from the object that declares it (a StatefulSet, a
LeaderWorkerSet's group), or from a plain pod group's members once all of them exist."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from extender.core.api.admission_gates import ADMISSION_GATED_BY, gated_by
from extender.core.api.models import PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from extender.core.api.parse import ManifestError
from extender.core.jobframework import copied_annotations, groups
from extender.core.jobframework.copied_labels import copied, from_members
from extender.core.jobframework.jobs import group_workload
from extender.core.jobframework.parent import TemplateParent
from extender.core.jobframework.pod import parent_declares_workload
from extender.kube.api import objects as o
from extender.kube.api.client import ApiError
from extender.kube.api.resources import WORKLOADS, Resource
from extender.kube.api.trim import JobView
from extender.kube.controller.context import Context
from extender.kube.controller.pod_groups.pods import GroupPods, member_of
from extender.kube.controller.workload_status import record

log = logging.getLogger("tower.groups")

Obj = dict[str, Any]


class GroupWorkloads:
    """Creates a group's Workload, once, with Kueue's name, podSets and marks."""

    def __init__(
        self,
        ctx: Context,
        pod_resource: Resource | None,
        pods: GroupPods,
        members_of: Callable[[str], list[JobView]],
    ) -> None:
        self.ctx = ctx
        self.pod_resource = pod_resource
        self.pods = pods
        self.members_of = members_of

    def create_declared(
        self, wl_key: str, parent: TemplateParent, resource: Resource, obj: Obj | None
    ) -> float | None:
        ctx = self.ctx
        if obj is None:
            return None
        namespace, name = wl_key.split("/", 1)
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        queue = labels.get(QUEUE_NAME_LABEL)
        if not queue or not ctx.manages_namespace(namespace):
            return None
        try:
            templates = parent.group_pod_sets(obj, name)
            if templates is None:
                return None  # scaled to zero
            model = self._model(
                namespace,
                name,
                str(meta.get("uid") or ""),
                str(queue),
                labels,
                templates,
                parent.kind,
                str(meta.get("name")),
            )
        except ManifestError as err:
            self._invalid(obj, parent.kind, err)
            return None
        owner = {
            "apiVersion": resource.api_version,
            "kind": parent.kind,
            "name": meta.get("name"),
            "uid": meta.get("uid"),
        }
        # Kueue's LeaderWorkerSet copies them to each group's Workload; its StatefulSet none.
        copied_keys = ctx.settings.label_keys_to_copy if parent.copies_labels else ()
        workload_labels = {
            **copied(labels, copied_keys),
            o.JOB_UID_LABEL: str(meta.get("uid") or ""),
        }
        if labels.get(PRIORITY_CLASS_LABEL):
            workload_labels[PRIORITY_CLASS_LABEL] = labels[PRIORITY_CLASS_LABEL]
        body = o.group_workload_manifest(
            model,
            {t.name: t.template for t in templates},
            owners=[owner],
            labels=workload_labels,
            annotations={
                **(
                    copied(meta.get("annotations"), ctx.settings.annotations_to_copy)
                    if parent.copies_labels
                    else {}
                ),
                groups.IS_GROUP_WORKLOAD: "true",
                **parent.owner_annotations(obj, name),
                **_gates(gated_by(meta.get("annotations"))),
            },
        )
        return self._send(
            wl_key, body, {**obj, "kind": parent.kind, "apiVersion": resource.api_version}
        )

    def create_from_members(self, wl_key: str, views: list[JobView]) -> float | None:
        """A plain pod group's Workload, once all its members exist (Kueue's rule)."""
        ctx = self.ctx
        namespace, name = wl_key.split("/", 1)
        # A member being deleted is let go: without a Workload nothing will count its end,
        # and held it would stay Terminating (a MultiKueue worker's copy, whose Workload the
        # manager removed before its finalizer came off).
        self.pods.release([v for v in views if v.deleting])
        if not views or not ctx.manages_namespace(namespace):
            return None
        if any(parent_declares_workload(dict(v.annotations)) for v in views):
            return None  # its parent declares its Workload (and no longer does)
        if any(v.active for v in views):
            return None  # members run without an admission (the webhook was down): left alone
        members = [member_of(v) for v in views]
        if groups.finished(members, members[0].total or 1) is not None:
            # Kueue's rule: a finished group whose Workload is gone (or was never made) is
            # let go, and none is made for it again (a deleted one would come back).
            self.pods.release(views)
            return None
        self.pods.release([v for v, m in zip(views, members, strict=True) if not m.runnable])
        first = next((v for v, m in zip(views, members, strict=True) if m.runnable), None)
        if first is None:
            return None
        problem = groups.disagreement(members)
        if problem is not None:
            self.pods.tell(first, "ErrWorkloadCompose", problem)
            return None
        for view, member in zip(views, members, strict=True):
            if member.runnable and member.gated and groups.ROLE_HASH not in dict(view.annotations):
                # Kueue's webhook stamps it when a pod is created; one made before it had its
                # group labels (Tower's webhook sees only queued pods) is stamped now, from its
                # spec as created. Read from the spec after admission, its hash would change
                # (the flavor's nodeSelector) and the pod would look like an excess member.
                self.pods.stamp_role(view, member.role)
        total, fast = members[0].total or 1, members[0].fast
        if any(m.runnable and m.template is None for m in members):
            for view in views:  # its template was dropped while an earlier Workload existed
                if view.source is None and self.pod_resource is not None:
                    ctx.refresh(self.pod_resource, view.key)
            views = self.members_of(wl_key)
            members = [member_of(v) for v in views]
        try:
            templates = groups.compose(members, total, fast)
            model = self._model(
                namespace,
                name,
                "",
                first.queue_name or "",
                first.labels,
                templates,
                "Pod",
                first.name,
            )
        except ManifestError as err:
            self.pods.tell(first, "ErrWorkloadCompose", f"group {name}: {err.message}")
            return None
        counts = {t.name: t.count for t in templates}
        by_name = {v.name: v for v in views}
        dropped = {m.name for m in groups.excess(members, counts)} if not fast else set()
        for member_name in sorted(dropped):
            self.pods.delete_excess(by_name[member_name])
        owners = [
            {"apiVersion": "v1", "kind": "Pod", "name": m.name, "uid": m.uid}
            for m in members
            if m.runnable and m.name not in dropped
        ]
        kept = [
            (m.name, (v.source or {}).get("metadata", {}))
            for v, m in zip(views, members, strict=True)
            if m.runnable and m.name not in dropped
        ]
        labels, problem = from_members(
            ((name, meta.get("labels")) for name, meta in kept), ctx.settings.label_keys_to_copy
        )
        copied_notes, annotation_problem = copied_annotations.from_members(
            ((name, meta.get("annotations")) for name, meta in kept),
            ctx.settings.annotations_to_copy,
        )
        problem = problem or annotation_problem
        if problem is not None:
            self.pods.tell(first, "ErrWorkloadCompose", problem)
            return None
        if first.priority_class:
            labels[PRIORITY_CLASS_LABEL] = first.priority_class
        body = o.group_workload_manifest(
            model,
            {t.name: t.template for t in templates},
            owners=owners,
            labels=labels,
            annotations={
                **copied_notes,
                groups.IS_GROUP_WORKLOAD: "true",
                **_gates(first.admission_gated_by),
            },
        )
        return self._send(wl_key, body, first.as_object())

    def _model(
        self,
        namespace: str,
        name: str,
        uid: str,
        queue: str,
        labels: Mapping[str, Any],
        templates: list[Any],
        owner_kind: str,
        owner_name: str,
    ) -> Any:
        state = self.ctx.state
        return group_workload(
            namespace=namespace,
            name=name,
            uid=uid,
            queue=queue,
            labels=labels,
            templates=templates,
            creation_time=self.ctx.clock(),
            owner_kind=owner_kind,
            owner_name=owner_name,
            workload_priority_classes=state.workload_priority_classes(),
            priority_classes=state.priority_classes(),
        )

    def _send(self, wl_key: str, body: Obj, about: Obj) -> float | None:
        ctx = self.ctx
        namespace = wl_key.split("/", 1)[0]
        try:
            created = ctx.write(
                WORKLOADS,
                "create",
                lambda: ctx.client.create(WORKLOADS, body, namespace),
                wl_key,
            )
        except ApiError as err:
            if not err.already_exists:
                raise
            ctx.refresh(WORKLOADS, wl_key)
            ctx.queues.groups.add(wl_key)
            return None
        record(ctx, created)
        ctx.queues.workloads.add(wl_key)
        ctx.event(about, "Normal", "CreatedWorkload", f"Created Workload: {wl_key}")
        return None

    def _invalid(self, obj: Obj, kind: str, err: ManifestError) -> None:
        meta = obj.get("metadata") or {}
        message = f"{err.path}: {err.message}"
        if self.ctx.told.first(f"invalid:{meta.get('uid')}", message):
            log.warning(
                "%s %s/%s cannot be queued: %s",
                kind,
                meta.get("namespace"),
                meta.get("name"),
                message,
            )
            self.ctx.event(obj, "Warning", "InvalidSpec", message)


def _gates(value: str) -> dict[str, str]:
    """Kueue's admission-gated-by, carried into a group's Workload as Kueue propagates it."""
    return {ADMISSION_GATED_BY: value} if value else {}

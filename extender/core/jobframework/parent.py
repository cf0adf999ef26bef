"""A kind whose pods are queued, not itself: Deployment, and the base of the serving kinds.

Its webhook marks the pod template (the parent annotation, the managed and queue-name
labels), so each pod it makes is gated; the kind itself has no Workload of its own and is
never suspended. A kind whose pods run as groups (serving.py) makes one Workload per group.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from extender.core.api.models import (
    MULTIKUEUE_ORIGIN_LABEL,
    MULTIKUEUE_ORIGIN_UID,
    QUEUE_NAME_LABEL,
)
from extender.core.jobframework import groups
from extender.core.jobframework.adapter import Obj, PodSetTemplate, as_mapping, pointer

MANAGED_LABEL = "kueue.x-k8s.io/managed"
# On a pod template: its pods are queued one by one, and their parent is never suspended
# (Kueue's value is the parent's integration name, "deployment").
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"


class TemplateParent:
    """A kind whose pods are queued one by one (Kueue's Deployment integration): its webhook
    marks the pod template, so that each pod it makes is gated and becomes its own Workload;
    the parent itself has no Workload and is never suspended."""

    framework: ClassVar[str]
    group: ClassVar[str]
    version: ClassVar[str]
    kind: ClassVar[str]
    plural: ClassVar[str]
    template_paths: ClassVar[tuple[tuple[str, ...], ...]] = (("spec", "template"),)
    template_annotations: ClassVar[Mapping[str, str]] = {}  # more, on its pod templates

    # ----- kinds whose pods run as groups (a StatefulSet): one Workload per group ----------

    runs_groups: ClassVar[bool] = False
    stamps_pods: ClassVar[bool] = False  # its pods are told their group (`stamp`)
    # Its pods are found by their owner, and told their group as Kueue does (`stamp`).
    stamps_members: ClassVar[bool] = False

    # MultiKueue runs its groups on a worker by a copy of it, the manager's pods left gated
    # (Kueue's StatefulSet and LeaderWorkerSet adapters: no managedBy, no status back).
    runs_on_workers: ClassVar[bool] = False
    # Its group Workloads get its labels of integrations.labelKeysToCopy (Kueue's
    # LeaderWorkerSet reconciler copies them; its StatefulSet reconciler does not).
    copies_labels: ClassVar[bool] = False

    def member(self, pod: Mapping[str, Any]) -> tuple[str, str] | None:
        """(group Workload name, podSet) of one of its pods; None: each pod is its own."""
        return None

    def annotations_at(self, obj: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, str]:
        """What its webhook adds to the annotations of the pod template at `path`."""
        return self.template_annotations

    @staticmethod
    def owner_uid(obj: Mapping[str, Any]) -> str:
        """The uid its group Workloads are named by: its own, or on a MultiKueue worker the
        manager's object's (so that the copy is named as the manager's Workload is)."""
        meta = as_mapping(obj.get("metadata"))
        origin = as_mapping(meta.get("annotations")).get(MULTIKUEUE_ORIGIN_UID)
        if origin and MULTIKUEUE_ORIGIN_LABEL in as_mapping(meta.get("labels")):
            return str(origin)
        return str(meta.get("uid"))

    def remote_copy(
        self,
        obj: Mapping[str, Any],
        extra_labels: Mapping[str, str],
        extra_annotations: Mapping[str, str],
    ) -> Obj:
        """The object as MultiKueue makes it on a worker: name, namespace, labels and
        annotations with these added and the manager's uid; its spec, each pod template
        told the manager's uid too (its pods name their group by it)."""
        meta = as_mapping(obj.get("metadata"))
        uid = {MULTIKUEUE_ORIGIN_UID: str(meta.get("uid"))}
        spec = copy.deepcopy(dict(as_mapping(obj.get("spec"))))
        for path in self.template_paths:
            template: Any = {"spec": spec}
            for part in path[:-1]:
                template = as_mapping(template).get(part)
            template = as_mapping(template).get(path[-1])
            if isinstance(template, dict):
                template_meta = template.setdefault("metadata", {})
                template_meta["annotations"] = {**(template_meta.get("annotations") or {}), **uid}
        return {
            "apiVersion": f"{self.group}/{self.version}",
            "kind": self.kind,
            "metadata": {
                "name": meta.get("name"),
                "namespace": meta.get("namespace"),
                "labels": {**as_mapping(meta.get("labels")), **extra_labels},
                "annotations": {**as_mapping(meta.get("annotations")), **extra_annotations, **uid},
            },
            "spec": spec,
        }

    def workload_names(self, obj: Mapping[str, Any]) -> tuple[str, ...]:
        """The names of every group Workload it may have (whatever its replicas now)."""
        return ()

    def group_pod_sets(self, obj: Mapping[str, Any], name: str) -> list[PodSetTemplate] | None:
        """The podSets of its group Workload `name`; None when that Workload should not
        exist now (scaled to zero). ManifestError names a field that is wrong."""
        return None

    def owner_annotations(self, obj: Mapping[str, Any], name: str) -> dict[str, str]:
        """What Kueue writes on a group Workload about the object that declared it."""
        meta = as_mapping(obj.get("metadata"))
        gvk = f"{self.group}/{self.version}, Kind={self.kind}"
        return {groups.OWNER_GVK: gvk, groups.OWNER_NAME: str(meta.get("name") or "")}

    def update_problem(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """ManifestError for a change Kueue refuses on a managed object (none by default)."""

    def stamp(
        self, obj: Mapping[str, Any], pod: Mapping[str, Any], *, identifier_annotations: bool = True
    ) -> Obj | None:
        """The merge patch that tells one of its pods its group, for a kind whose pods cannot
        know it alone (a LeaderWorkerSet's), the group's name where the
        WorkloadIdentifierAnnotations gate puts it; None: nothing to tell (yet)."""
        return None

    def marked_by_other(self, obj: Mapping[str, Any]) -> bool:
        """Its pod template is another kind's (a LeaderWorkerSet's StatefulSets): that kind
        queues its pods, this one leaves it alone."""
        for path in self.template_paths:
            template: Any = obj
            for part in path:
                template = as_mapping(template).get(part)
            meta = as_mapping(as_mapping(template).get("metadata"))
            parent = as_mapping(meta.get("annotations")).get(SUSPENDING_PARENT)
            if parent and parent != self.framework:
                return True
        return False

    def template_ops(self, obj: Mapping[str, Any], queue: str) -> list[Obj]:
        """The JSON patch that marks each pod template: the parent annotation, and the
        managed, queue-name and priority-class labels, as Kueue's webhook sets them."""
        if self.marked_by_other(obj):
            return []
        ops: list[Obj] = []
        for path in self.template_paths:
            template: Any = obj
            for part in path:
                template = as_mapping(template).get(part)
            if not isinstance(template, Mapping):
                continue  # an optional template (a LeaderWorkerSet's leaderTemplate)
            meta = as_mapping(template.get("metadata"))
            labels = {
                **as_mapping(meta.get("labels")),
                MANAGED_LABEL: "true",
                QUEUE_NAME_LABEL: queue,
            }
            priority = as_mapping(as_mapping(obj.get("metadata")).get("labels")).get(
                PRIORITY_CLASS_LABEL
            )
            if priority:
                labels[PRIORITY_CLASS_LABEL] = priority
            annotations = {
                **as_mapping(meta.get("annotations")),
                SUSPENDING_PARENT: self.framework,
                **self.annotations_at(obj, path),
            }
            wanted = {**meta, "labels": labels, "annotations": annotations}
            if wanted != meta:
                ops.append({"op": "add", "path": pointer(*path, "metadata"), "value": wanted})
        return ops


class Deployment(TemplateParent):
    framework = "deployment"
    group, version, kind, plural = "apps", "v1", "Deployment", "deployments"


PARENTS: tuple[TemplateParent, ...] = (Deployment(),)

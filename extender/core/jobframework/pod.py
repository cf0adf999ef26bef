"""A plain Pod (Kueue's `pod` integration) as one Workload, and the kinds that queue their pods.

A pod cannot be suspended: it is created behind the scheduling gate
`kueue.x-k8s.io/admission`, which admission removes (with the flavors' nodeSelector and
tolerations in the same patch); a gate can never be put back, so a stop deletes the pod.
Kueue's finalizer keeps a pod until Tower has counted its end. A Deployment's pods are plain
pods too: its webhook marks their template, and each pod becomes its own Workload.
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
from extender.core.jobframework.adapter import (
    JobAdapter,
    Obj,
    PodSetInfo,
    PodSetTemplate,
    as_mapping,
    as_sequence,
    condition_true,
    pointer,
)

ADMISSION_GATE = "kueue.x-k8s.io/admission"
MANAGED_LABEL = "kueue.x-k8s.io/managed"
FINALIZER = "kueue.x-k8s.io/managed"
# On a pod template: its pods are queued one by one, and their parent is never suspended
# (Kueue's value is the parent's integration name, "deployment").
SUSPENDING_PARENT = "kueue.x-k8s.io/pod-suspending-parent"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"


def gated(obj: Mapping[str, Any]) -> bool:
    gates = as_sequence(as_mapping(obj.get("spec")).get("schedulingGates"))
    return any(isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates)


def _phase(obj: Mapping[str, Any]) -> str:
    return str(as_mapping(obj.get("status")).get("phase") or "")


class Pod(JobAdapter):
    framework = "pod"
    group, version, kind, plural = "", "v1", "Pod", "pods"
    # A pod is gated at create and can never be gated again: it is not suspended afterwards,
    # a stop deletes it, and no webhook queues a pod without the queue-name label (so a
    # webhook outage blocks no other pod).
    can_suspend: ClassVar[bool] = False
    default_queue: ClassVar[bool] = False
    # MultiKueue runs it on a worker by a copy, the manager's left gated (a pod has no
    # managedBy).
    gated_on_manager: ClassVar[bool] = True

    def __init__(self, parents_only: bool = False) -> None:
        # Kueue's implicit pod integration: on for the kinds that queue their pods (a
        # StatefulSet) when `pod` itself is not named; then only their pods are queued.
        self.parents_only = parents_only

    cache_view: ClassVar[str] = "queued"  # placement watches every pod too
    # What a group's rules read of its members.
    kept_annotations: ClassVar[tuple[str, ...]] = (
        SUSPENDING_PARENT,
        groups.TOTAL_COUNT,
        groups.FAST_ADMISSION,
        groups.RETRIABLE,
    )

    # ----- reading --------------------------------------------------------------------------

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        groups.check_member(obj)
        spec = as_mapping(obj.get("spec"))
        return [PodSetTemplate("main", 1, {"spec": copy.deepcopy(dict(spec))}, "")]

    def check_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        groups.check_member_update(old, new)

    def group_of(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        """(its group's Workload name, its podSet there) for a pod queued with others: a
        plain group's member (by its role), or a pod of a kind that queues its pods as
        groups (a StatefulSet's); None for a pod that is its own Workload."""
        from extender.core.jobframework import registry  # the registry imports this module

        meta = as_mapping(obj.get("metadata"))
        annotations = as_mapping(meta.get("annotations"))
        parent = annotations.get(SUSPENDING_PARENT)
        if parent:
            found = registry.PARENTS.get(str(parent))
            return found.member(obj) if found is not None else None
        named = groups.group_name(obj)
        if named is None:
            return None
        role = annotations.get(groups.ROLE_HASH)
        if not isinstance(role, str) or not role:
            role = groups.role_hash(as_mapping(obj.get("spec")))
        return named[1], role

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return {"main": {"spec": as_mapping(obj.get("spec"))}}

    def status_from_worker(self, local: Mapping[str, Any], remote: Mapping[str, Any]) -> Obj | None:
        """The worker's pod status, except that the gated pod here says it is gated until
        the worker's is scheduled: a copied `Unschedulable` would make the manager's cluster
        autoscaler scale up for a pod that never runs here (as Kueue keeps it)."""
        status = copy.deepcopy(dict(as_mapping(remote.get("status"))))
        conditions = [c for c in as_sequence(status.get("conditions")) if isinstance(c, Mapping)]
        scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
        if gated(local) and (scheduled is None or scheduled.get("status") != "True"):
            status["conditions"] = [
                *(c for c in conditions if c is not scheduled),
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                    "lastProbeTime": None,
                    "lastTransitionTime": (scheduled or {}).get("lastTransitionTime"),
                },
            ]
        return status

    def is_suspended(self, obj: Mapping[str, Any]) -> bool:
        return gated(obj)

    def is_child(self, obj: Mapping[str, Any]) -> bool:
        """A pod of a kind Tower manages (a Job's, a RayCluster's): its owner is queued. With
        only the implicit pod integration, a pod no parent marked is left alone too."""
        from extender.core.jobframework import registry  # the registry imports this module

        meta = as_mapping(obj.get("metadata"))
        if self.parents_only and not as_mapping(meta.get("annotations")).get(SUSPENDING_PARENT):
            return True
        for owner in as_sequence(as_mapping(obj.get("metadata")).get("ownerReferences")):
            if not isinstance(owner, Mapping) or owner.get("controller") is not True:
                continue
            group = str(owner.get("apiVersion", "")).rpartition("/")[0]
            found = registry.by_kind().get((group, str(owner.get("kind") or "")))
            if found is not None and found is not self:
                return True
        return False

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        """Bound to a node and not ended: its containers may run, so its quota is held."""
        bound = bool(as_mapping(obj.get("spec")).get("nodeName"))
        return bound and _phase(obj) not in ("Succeeded", "Failed")

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        phase = _phase(obj)
        message = str(as_mapping(obj.get("status")).get("message") or "")
        if phase == "Succeeded":
            return "Succeeded", message or "Pod succeeded"
        if phase == "Failed":
            return "Failed", message or "Pod failed"
        deleting = as_mapping(obj.get("metadata")).get("deletionTimestamp")
        if deleting and not self.is_active(obj):
            # Deleted before it ran: nothing of it runs, so its Workload ends now.
            return "OwnerNotFound", "The workload's owner no longer exists"
        return None

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        return condition_true(obj, "Ready") is not None

    def holds_finalizer(self, obj: Mapping[str, Any]) -> bool:
        return FINALIZER in as_sequence(as_mapping(obj.get("metadata")).get("finalizers"))

    # ----- the webhook ------------------------------------------------------------------------

    def queue_ops(self, obj: Mapping[str, Any]) -> list[Obj]:
        """Gated, labelled managed and (unless a parent queues it) kept by Kueue's finalizer;
        applying the ops twice gives the same pod."""
        meta = as_mapping(obj.get("metadata"))
        # The labels exist by now: the queue-name label's op comes first.
        label = pointer("metadata", "labels", MANAGED_LABEL)
        ops: list[Obj] = [{"op": "add", "path": label, "value": "true"}]
        parent = as_mapping(meta.get("annotations")).get(SUSPENDING_PARENT)
        finalizers = list(as_sequence(meta.get("finalizers")))
        if not parent and FINALIZER not in finalizers:
            ops.append(
                {"op": "add", "path": "/metadata/finalizers", "value": [*finalizers, FINALIZER]}
            )
        annotations = as_mapping(meta.get("annotations"))
        if groups.group_name(obj) is not None and not annotations.get(groups.ROLE_HASH):
            # Kueue's: a group's members are matched to their podSet by the shape they had
            # when created. (Kueue stamps every pod; a single pod's is never read, and the
            # hash is half the cost of a pod's review.)
            role = groups.role_hash(as_mapping(obj.get("spec")))
            if isinstance(meta.get("annotations"), Mapping):
                path = pointer("metadata", "annotations", groups.ROLE_HASH)
                ops.append({"op": "add", "path": path, "value": role})
            else:
                ops.append(
                    {
                        "op": "add",
                        "path": "/metadata/annotations",
                        "value": {groups.ROLE_HASH: role},
                    }
                )
        if not gated(obj):
            spec = as_mapping(obj.get("spec"))
            gates = list(as_sequence(spec.get("schedulingGates")))
            ops.append(
                {
                    "op": "add",
                    "path": "/spec/schedulingGates",
                    "value": [*gates, {"name": ADMISSION_GATE}],
                }
            )
        return ops

    # ----- writing ----------------------------------------------------------------------------

    def suspend_patch(self, suspend: bool) -> Obj:
        return {"spec": {}}  # no field: a pod is gated once, at create

    def start_patch(self, obj: Mapping[str, Any], infos: Mapping[str, PodSetInfo]) -> Obj:
        """One patch: the admission gate removed, the flavors' nodeSelector and tolerations
        added (Kubernetes allows both on a gated pod), labels and annotations set. A pod's
        schedulerName cannot change, so it keeps its own."""
        info = infos.get("main") or next(iter(infos.values()), None)
        spec = as_mapping(obj.get("spec"))
        gates = [
            dict(g)
            for g in as_sequence(spec.get("schedulingGates"))
            if isinstance(g, Mapping) and g.get("name") != ADMISSION_GATE
        ]
        out_spec: Obj = {"schedulingGates": gates or None}
        meta: Obj = {}
        if info is not None:
            for gate in info.scheduling_gates:
                if gate not in gates:
                    gates.append(dict(gate))
            out_spec["schedulingGates"] = gates or None
            if info.node_selector:
                out_spec["nodeSelector"] = {
                    **as_mapping(spec.get("nodeSelector")),
                    **info.node_selector,
                }
            tolerations = [
                dict(t) for t in as_sequence(spec.get("tolerations")) if isinstance(t, Mapping)
            ]
            for toleration in info.tolerations:
                if toleration not in tolerations:
                    tolerations.append(dict(toleration))
            if len(tolerations) > len(as_sequence(spec.get("tolerations"))):
                out_spec["tolerations"] = tolerations
            if info.labels:
                meta["labels"] = dict(info.labels)
            if info.annotations:
                meta["annotations"] = dict(info.annotations)
        patch: Obj = {"spec": out_spec}
        if meta:
            patch["metadata"] = meta
        return patch

    def restore_patch(
        self,
        obj: Mapping[str, Any],
        originals: Mapping[str, Mapping[str, Any]],
        counts: Mapping[str, int],
    ) -> Obj:
        return {}  # a stopped pod is deleted, never restored

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        return {}

    def release_patch(self, obj: Mapping[str, Any]) -> Obj:
        """Kueue's finalizer taken off, once the pod's end is counted."""
        finalizers = [
            f
            for f in as_sequence(as_mapping(obj.get("metadata")).get("finalizers"))
            if f != FINALIZER
        ]
        return {"metadata": {"finalizers": finalizers or None}}

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        spec = as_mapping(obj.get("spec"))
        return {k: spec[k] for k in ("schedulingGates", "nodeSelector", "tolerations") if k in spec}


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

    # MultiKueue runs its groups on a worker by a copy of it, the manager's pods left gated
    # (Kueue's StatefulSet and LeaderWorkerSet adapters: no managedBy, no status back).
    runs_on_workers: ClassVar[bool] = False

    def member(self, pod: Mapping[str, Any]) -> tuple[str, str] | None:
        """(group Workload name, podSet) of one of its pods; None: each pod is its own."""
        return None

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

    def stamp(self, obj: Mapping[str, Any], pod: Mapping[str, Any]) -> Obj | None:
        """The merge patch that tells one of its pods its group, for a kind whose pods cannot
        know it alone (a LeaderWorkerSet's); None: nothing to tell (yet)."""
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
                **self.template_annotations,
            }
            wanted = {**meta, "labels": labels, "annotations": annotations}
            if wanted != meta:
                ops.append({"op": "add", "path": pointer(*path, "metadata"), "value": wanted})
        return ops


class Deployment(TemplateParent):
    framework = "deployment"
    group, version, kind, plural = "apps", "v1", "Deployment", "deployments"


ADAPTERS: tuple[JobAdapter, ...] = (Pod(),)
IMPLICIT_POD = Pod(parents_only=True)
PARENTS: tuple[TemplateParent, ...] = (Deployment(),)

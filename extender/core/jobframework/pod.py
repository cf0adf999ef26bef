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
    registered,
)
from extender.core.jobframework.parent import MANAGED_LABEL, SUSPENDING_PARENT
from extender.core.jobframework.parent import PARENTS as POD_PARENTS
from extender.core.jobframework.serving import PARENTS as GROUP_PARENTS
from extender.core.jobframework.topology import TOPOLOGY_GATE

ADMISSION_GATE = "kueue.x-k8s.io/admission"
FINALIZER = "kueue.x-k8s.io/managed"


# The kinds whose webhook marks a pod's template, by the framework name the mark carries.
_TEMPLATE_PARENTS = {p.framework: p for p in (*POD_PARENTS, *GROUP_PARENTS)}


def parent_declares_workload(annotations: Mapping[str, Any]) -> bool:
    """A pod whose suspending parent is a kind Tower queues: that kind makes its Workload. A
    pod another controller suspends is grouped by its own labels, as Kueue groups it."""
    return str(annotations.get(SUSPENDING_PARENT) or "") in _TEMPLATE_PARENTS


def gated(obj: Mapping[str, Any]) -> bool:
    gates = as_sequence(as_mapping(obj.get("spec")).get("schedulingGates"))
    return any(isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates)


def _phase(obj: Mapping[str, Any]) -> str:
    return str(as_mapping(obj.get("status")).get("phase") or "")


class Pod(JobAdapter):
    framework = "pod"
    group, version, kind, plural = "", "v1", "Pod", "pods"
    # A pod is gated at create and can never be gated again: it is not suspended afterwards,
    # and a stop deletes it. Without the queue-name label it is queued only where unlabelled
    # jobs are (manageJobsWithoutQueueName), as Kueue's pod webhook gates it there.
    can_suspend: ClassVar[bool] = False
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
        groups.SERVING,  # a serving group reclaims no pods
        groups.ROLE_HASH,  # whether a member still needs one stamped
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
        meta = as_mapping(obj.get("metadata"))
        annotations = as_mapping(meta.get("annotations"))
        parent = annotations.get(SUSPENDING_PARENT)
        found = _TEMPLATE_PARENTS.get(str(parent)) if parent else None
        if found is not None:
            return found.member(obj)
        # A pod another controller suspends is a plain group's member by its labels, as any.
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
        meta = as_mapping(obj.get("metadata"))
        if self.parents_only and not as_mapping(meta.get("annotations")).get(SUSPENDING_PARENT):
            return True
        for owner in as_sequence(as_mapping(obj.get("metadata")).get("ownerReferences")):
            if not isinstance(owner, Mapping) or owner.get("controller") is not True:
                continue
            group = str(owner.get("apiVersion", "")).rpartition("/")[0]
            found = registered(group, str(owner.get("kind") or ""))
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
        index_label = annotations.get(groups.POD_INDEX_LABEL)
        if isinstance(index_label, str):
            # Kueue's: a group's pods are ranked for topology placement by this one label (its
            # podSets' podIndexLabel), whichever label their own controller ranks them by.
            rank = str(as_mapping(meta.get("labels")).get(index_label) or "")
            path = pointer("metadata", "labels", groups.POD_INDEX)
            ops.append({"op": "add", "path": path, "value": rank})
        spec = as_mapping(obj.get("spec"))
        gates = list(as_sequence(spec.get("schedulingGates")))
        names = {as_mapping(g).get("name") for g in gates}
        wanted = [*gates]
        if ADMISSION_GATE not in names:
            wanted.append({"name": ADMISSION_GATE})
        if TOPOLOGY_GATE not in names:
            # Kueue's: a gate can be taken off a pod but never put on later, and whether the
            # pod is placed by topology is known only at admission (a ClusterQueue whose
            # flavors all have a topology places it without asking), so every queued pod
            # waits behind this one too; a start without a topology takes it off.
            wanted.append({"name": TOPOLOGY_GATE})
        if len(wanted) > len(gates):
            ops.append({"op": "add", "path": "/spec/schedulingGates", "value": wanted})
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
            if not any(g.get("name") == TOPOLOGY_GATE for g in info.scheduling_gates):
                gates = [g for g in gates if g.get("name") != TOPOLOGY_GATE]
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


ADAPTERS: tuple[JobAdapter, ...] = (Pod(),)
IMPLICIT_POD = Pod(parents_only=True)

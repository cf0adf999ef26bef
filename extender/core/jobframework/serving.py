"""Serving kinds whose pods run as groups, each group one Workload.

A StatefulSet is one Workload for all its pods, a LeaderWorkerSet one per group (a leader and
its workers).

A StatefulSet's webhook marks its pod template (as a Deployment's), so every pod it makes is
gated; the StatefulSet itself is never suspended. Its Workload (`statefulset-<name>-<hash>`, podSet
`main` with `replicas` pods) is made as soon as it exists, and admission lets every pod of
it through, those the StatefulSet controller makes later included (Kueue's serving group with
fast admission). Kueue allows scaling only to and from zero: scaled to zero, its Workload is
kept on hold (its quota given back) and admitted again once it scales up.

A LeaderWorkerSet's Workloads (`leaderworkerset-<name>-<i>-<hash>`, podSets `leader` × 1 and
`worker` × size-1, or `main` × size without a leader template) are made for each index up to
`replicas` (and, during a rolling update with maxSurge, for the surge groups too); its pods
are told their group by the controller (Kueue stamps them the same way: group name, total
count, role), because a pod does not carry its LeaderWorkerSet's uid.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from extender.core.api.models import MULTIKUEUE_ORIGIN_UID
from extender.core.api.parse import ManifestError
from extender.core.jobframework import groups
from extender.core.jobframework.adapter import (
    Obj,
    PodSetTemplate,
    as_count,
    as_mapping,
    as_sequence,
    workload_name,
)
from extender.core.jobframework.parent import TemplateParent
from extender.core.jobframework.topology import GROUP_ANNOTATION, POD_INDEX_OFFSET

STATEFULSET_POD_INDEX = "apps.kubernetes.io/pod-index"
LWS_WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"


def pod_group_name(pod: Mapping[str, Any], identifier_annotations: bool) -> str | None:
    """A pod's group as Kueue reads it (utilpod.GetPodGroupName): with the
    WorkloadIdentifierAnnotations gate, the annotation and else the label; without, the label."""
    meta = as_mapping(pod.get("metadata"))
    if identifier_annotations:
        named = as_mapping(meta.get("annotations")).get(groups.GROUP_NAME)
        if isinstance(named, str) and named:
            return named
    named = as_mapping(meta.get("labels")).get(groups.GROUP_NAME)
    return named if isinstance(named, str) and named else None


def group_name_patch(
    name: str, identifier_annotations: bool, annotations: Mapping[str, str]
) -> Obj:
    """The merge patch that tells a pod its group `name`, with these annotations (Kueue's
    SetPodGroupName): an annotation with the WorkloadIdentifierAnnotations gate (on by
    default; a group's Workload name may be longer than a label value's 63 characters), a
    label without it."""
    meta: Obj = {"annotations": dict(annotations)}
    if identifier_annotations:
        meta["annotations"][groups.GROUP_NAME] = name
    else:
        meta["labels"] = {groups.GROUP_NAME: name}
    return {"metadata": meta}


def _replicas(obj: Mapping[str, Any]) -> int:
    return as_count(as_mapping(obj.get("spec")).get("replicas"), 1)


class StatefulSet(TemplateParent):
    framework = "statefulset"
    group, version, kind, plural = "apps", "v1", "StatefulSet", "statefulsets"
    runs_groups = True
    runs_on_workers = True
    stamps_members = True  # its pods know their group, and are told it once they exist

    def _name(self, obj: Mapping[str, Any]) -> str:
        meta = as_mapping(obj.get("metadata"))
        return workload_name(self.kind, self.group, str(meta.get("name")), self.owner_uid(obj))

    def member(self, pod: Mapping[str, Any]) -> tuple[str, str] | None:
        """Its pods, by their controller: the one group, podSet `main` (on a MultiKueue
        worker, named by the manager's StatefulSet's uid, which its template carries)."""
        meta = as_mapping(pod.get("metadata"))
        origin = as_mapping(meta.get("annotations")).get(MULTIKUEUE_ORIGIN_UID)
        for owner in as_sequence(meta.get("ownerReferences")):
            if (
                isinstance(owner, Mapping)
                and owner.get("controller") is True
                and owner.get("kind") == self.kind
                and str(owner.get("apiVersion", "")).startswith(f"{self.group}/")
            ):
                uid = str(origin or owner.get("uid"))
                return workload_name(self.kind, self.group, str(owner.get("name")), uid), "main"
        return None

    def workload_names(self, obj: Mapping[str, Any]) -> tuple[str, ...]:
        if self.marked_by_other(obj):
            return ()  # a LeaderWorkerSet's StatefulSet: its pods are that kind's
        return (self._name(obj),)

    def stamp(
        self, obj: Mapping[str, Any], pod: Mapping[str, Any], *, identifier_annotations: bool = True
    ) -> Obj | None:
        """What Kueue's StatefulSet pod reconciler writes on each of its pods: the group's
        name (the Workload's; see `group_name_patch`), its total count, fast admission and
        serving, the pod-index label and the role `main`. None for a pod told already (as
        Kueue, it is told once) or one that is not its own."""
        named = self.member(pod)
        if named is None or pod_group_name(pod, identifier_annotations) == named[0]:
            return None
        annotations = {
            groups.TOTAL_COUNT: str(_replicas(obj)),
            groups.FAST_ADMISSION: "true",
            groups.SERVING: "true",
            groups.POD_INDEX_LABEL: STATEFULSET_POD_INDEX,
            groups.ROLE_HASH: "main",
        }
        return group_name_patch(named[0], identifier_annotations, annotations)

    def group_pod_sets(self, obj: Mapping[str, Any], name: str) -> list[PodSetTemplate] | None:
        replicas = _replicas(obj)
        if replicas == 0 or name not in self.workload_names(obj):
            return None  # scaled to zero: no Workload holds quota for it
        template = as_mapping(as_mapping(obj.get("spec")).get("template"))
        if not isinstance(template.get("spec"), Mapping):
            raise ManifestError("spec.template.spec", "is required")
        return [
            PodSetTemplate(
                "main",
                replicas,
                {"spec": dict(template["spec"])},
                "spec.template",
                pod_index_label=STATEFULSET_POD_INDEX,
            )
        ]

    def update_problem(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """Kueue's rule: a queued StatefulSet scales only to zero and back, as one group."""
        before, after = _replicas(old), _replicas(new)
        if before and after and before != after:
            raise ManifestError(
                "spec.replicas",
                f"cannot change from {before} to {after}: field is immutable (Kueue's rule: a "
                "queued StatefulSet is admitted as one group); scale it to 0 first, then to the "
                "new size",
            )
        if before == 0 and after and as_count(as_mapping(old.get("status")).get("replicas")):
            raise ManifestError(
                "spec.replicas", "scaling down is still in progress: wait until its pods are gone"
            )


def scaled_to_zero(parent: TemplateParent, obj: Mapping[str, Any]) -> bool:
    """A StatefulSet at zero replicas: its Workload is kept on hold, not deleted (Kueue's)."""
    return isinstance(parent, StatefulSet) and _replicas(obj) == 0


LWS_GROUP = "leaderworkerset.x-k8s.io"
LWS_PREFIX = "leaderworkerset.sigs.k8s.io/"
LWS_NAME = LWS_PREFIX + "name"
GROUP_INDEX = LWS_PREFIX + "group-index"
LEADER_NAME = LWS_PREFIX + "leader-name"  # on a worker pod
MAX_REPLICAS = 1_000_000
COMPONENT_INDEX = "kueue.x-k8s.io/component-workload-index"


def _lws_template(obj: Mapping[str, Any], which: str) -> Mapping[str, Any] | None:
    spec = as_mapping(as_mapping(obj.get("spec")).get("leaderWorkerTemplate"))
    found = spec.get(which)
    return found if isinstance(found, Mapping) else None


def _size(obj: Mapping[str, Any]) -> int:
    spec = as_mapping(as_mapping(obj.get("spec")).get("leaderWorkerTemplate"))
    return as_count(spec.get("size"), 1) or 1


def _max_surge(obj: Mapping[str, Any]) -> int:
    """rollingUpdateConfiguration.maxSurge as Kueue reads it (IntValue: a percentage is 0)."""
    strategy = as_mapping(as_mapping(obj.get("spec")).get("rolloutStrategy"))
    surge = as_mapping(strategy.get("rollingUpdateConfiguration")).get("maxSurge")
    if isinstance(surge, str):
        return int(surge) if surge.isdigit() else 0
    return as_count(surge, 0)


def _groups(obj: Mapping[str, Any]) -> int:
    """How many groups have a Workload: spec.replicas, and while a rolling update with maxSurge
    is under way (not every group updated yet), the surge groups the leader StatefulSet runs
    beyond it too (status.replicas), as Kueue's reconciler keeps them."""
    replicas = _replicas(obj)
    status = as_mapping(obj.get("status"))
    running = as_count(status.get("replicas"), 0)
    rolling = _max_surge(obj) > 0 and as_count(status.get("updatedReplicas"), 0) < replicas
    return max(replicas, running) if rolling else replicas


class LeaderWorkerSet(TemplateParent):
    framework = "leaderworkerset.x-k8s.io/leaderworkerset"
    group, version, kind, plural = LWS_GROUP, "v1", "LeaderWorkerSet", "leaderworkersets"
    runs_groups = True
    runs_on_workers = True
    stamps_pods = True
    copies_labels = True
    template_paths = (
        ("spec", "leaderWorkerTemplate", "leaderTemplate"),
        ("spec", "leaderWorkerTemplate", "workerTemplate"),
    )
    template_annotations: ClassVar[Mapping[str, str]] = MappingProxyType({groups.SERVING: "true"})

    def annotations_at(self, obj: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, str]:
        """Kueue's webhook: beside a leader it is not grouped with, the workers (worker index
        1..n) are ranked from their index less one."""
        worker = _lws_template(obj, "workerTemplate")
        if path[-1] != "workerTemplate" or _lws_template(obj, "leaderTemplate") is None:
            return self.template_annotations
        worker_annotations = as_mapping(
            as_mapping(as_mapping(worker).get("metadata")).get("annotations")
        )
        if GROUP_ANNOTATION in worker_annotations:
            return self.template_annotations
        return {**self.template_annotations, POD_INDEX_OFFSET: "1"}

    def _names(self, obj: Mapping[str, Any]) -> dict[str, int]:
        meta = as_mapping(obj.get("metadata"))
        name, uid = str(meta.get("name")), self.owner_uid(obj)
        return {
            workload_name(self.kind, self.group, f"{name}-{i}", uid): i for i in range(_groups(obj))
        }

    def workload_names(self, obj: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(self._names(obj))

    def group_pod_sets(self, obj: Mapping[str, Any], name: str) -> list[PodSetTemplate] | None:
        if name not in self._names(obj):
            return None  # an index beyond its groups: that group is gone
        leader = _lws_template(obj, "leaderTemplate")
        worker = _lws_template(obj, "workerTemplate")
        base = "spec.leaderWorkerTemplate"
        if worker is None or not isinstance(worker.get("spec"), Mapping):
            raise ManifestError(f"{base}.workerTemplate.spec", "is required")
        size = _size(obj)
        out = []
        if leader is not None:
            out.append(PodSetTemplate("leader", 1, _template(leader), f"{base}.leaderTemplate"))
        rest = ("worker", size - 1) if leader is not None else ("main", size)
        # Kueue numbers the workers by their worker index (the leader's is 0), so the
        # topology ungater can pin them by rank.
        out.append(
            PodSetTemplate(
                rest[0],
                rest[1],
                _template(worker),
                f"{base}.workerTemplate",
                pod_index_label=LWS_WORKER_INDEX,
            )
        )
        return out

    def owner_annotations(self, obj: Mapping[str, Any], name: str) -> dict[str, str]:
        index = self._names(obj).get(name)
        extra = {} if index is None else {COMPONENT_INDEX: str(index)}
        return {**super().owner_annotations(obj, name), **extra}

    def member(self, pod: Mapping[str, Any]) -> tuple[str, str] | None:
        """Its group once the controller stamped it (the group's Workload name, and role);
        until then, the LeaderWorkerSet that must tell it."""
        meta = as_mapping(pod.get("metadata"))
        named = groups.group_name(pod)
        if named is not None:
            role = as_mapping(meta.get("annotations")).get(groups.ROLE_HASH)
            return named[1], str(role or "main")
        lws = as_mapping(meta.get("labels")).get(LWS_NAME)
        return f"{groups.UNSTAMPED}{lws or ''}", ""

    def stamp(
        self, obj: Mapping[str, Any], pod: Mapping[str, Any], *, identifier_annotations: bool = True
    ) -> Obj | None:
        """The merge patch that tells a pod its group (Kueue's stamps: the group name, total
        count and role); None until the LeaderWorkerSet controller labelled its index."""
        meta = as_mapping(pod.get("metadata"))
        index = as_mapping(meta.get("labels")).get(GROUP_INDEX)
        if index is None:
            return None
        lws = as_mapping(obj.get("metadata"))
        name = workload_name(
            self.kind, self.group, f"{lws.get('name')}-{index}", self.owner_uid(obj)
        )
        role = "main"
        if _lws_template(obj, "leaderTemplate") is not None:
            is_worker = LEADER_NAME in as_mapping(meta.get("annotations"))
            role = "worker" if is_worker else "leader"
        annotations = {groups.TOTAL_COUNT: str(_size(obj)), groups.ROLE_HASH: role}
        return group_name_patch(name, identifier_annotations, annotations)

    def update_problem(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """Kueue's rules: the group size and whether there is a leader are fixed."""
        replicas = as_mapping(new.get("spec")).get("replicas")
        if isinstance(replicas, int) and not 0 <= replicas <= MAX_REPLICAS:
            raise ManifestError("spec.replicas", f"must be 0 to {MAX_REPLICAS}, got {replicas}")
        if _size(old) != _size(new):
            raise ManifestError(
                "spec.leaderWorkerTemplate.size",
                f"cannot change from {_size(old)} to {_size(new)}: field is immutable while "
                "queued (Kueue's rule: each group is one Workload of that size); create a "
                "LeaderWorkerSet of the new size",
            )
        if (_lws_template(old, "leaderTemplate") is None) != (
            _lws_template(new, "leaderTemplate") is None
        ):
            raise ManifestError(
                "spec.leaderWorkerTemplate.leaderTemplate",
                "cannot be added or removed while queued",
            )


def _template(template: Mapping[str, Any]) -> dict[str, Any]:
    """A LeaderWorkerSet pod template for its Workload, without the LeaderWorkerSet's own keys
    (its name label aside), as Kueue copies it."""
    meta = as_mapping(template.get("metadata"))
    out_meta = {}
    for part in ("labels", "annotations"):
        kept = {
            k: v
            for k, v in as_mapping(meta.get(part)).items()
            if not str(k).startswith(LWS_PREFIX) or k == LWS_NAME
        }
        if kept:
            out_meta[part] = kept
    return {"metadata": out_meta, "spec": dict(as_mapping(template.get("spec")))}


PARENTS: tuple[TemplateParent, ...] = (StatefulSet(), LeaderWorkerSet())

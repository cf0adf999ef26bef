"""What the watch caches keep of each object: only the fields the controller reads.

client-go's informers can transform objects before caching them (`SetTransform`); these are
Tower's transforms. Every object loses `managedFields` and kubectl's last-applied
annotation. A Job or JobSet becomes a `JobView`: its identity, its state (suspended,
active, finished), the parts of its pod templates that admission and eviction patch, and the
few annotations its adapter reads to start it (a Job's job-min-parallelism). The
whole object is kept only while its Workload must still be created from it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from extender.core.api.admission_gates import gated_by
from extender.core.api.models import PREBUILT_WORKLOAD_LABEL, PRIORITY_CLASS_LABEL, QUEUE_NAME_LABEL
from extender.core.api.parse import ManifestError
from extender.core.jobframework import exec_limit, match, reclaimable, registry
from extender.core.jobframework.adapter import JobAdapter, workload_name
from extender.kube.api.objects import CLUSTER_QUEUE_ANNOTATION
from extender.kube.api.resources import Resource, resource_of

Obj = dict[str, Any]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_EMPTY: Mapping[str, str] = {}
_NO_TEMPLATES: Obj = {}  # shared, never changed


class FinishedWorkload(Mapping[str, Any]):
    """A finished Workload as the cache keeps it: its identity, its owner, and that it
    finished. Nothing reads more of it again, and most Workloads of a cluster are finished;
    it reads as a (minimal) Workload object for the code that reads objects."""

    __slots__ = (
        "api_version",
        "finalizers",
        "finished_at",
        "name",
        "namespace",
        "owner",
        "queue_name",
        "resource_version",
        "uid",
    )

    def __init__(
        self,
        api_version: str,
        namespace: str,
        name: str,
        uid: str,
        resource_version: str,
        owner: tuple[str, str, str] | None,
        queue_name: str = "",
        finalizers: tuple[str, ...] = (),
        finished_at: str = "",
    ) -> None:
        self.api_version = api_version
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.resource_version = resource_version
        self.owner = owner  # (kind, name, "") of the Job or JobSet that controls it
        self.queue_name = queue_name  # its LocalQueue's (Kueue's finished_workloads gauges)
        self.finalizers = finalizers  # a finished one's are removed, as Kueue's (mostly none)
        # When it finished (its Finished condition's lastTransitionTime): its retention counts
        # from then (objectRetentionPolicies.workloads.afterFinished).
        self.finished_at = finished_at

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def _object(self) -> Obj:
        meta: Obj = {
            "name": self.name,
            "namespace": self.namespace,
            "uid": self.uid,
            "resourceVersion": self.resource_version,
        }
        if self.owner is not None:
            kind, name, _ = self.owner  # its uid is not kept: nothing compares it again
            meta["ownerReferences"] = [{"kind": kind, "name": name, "controller": True}]
        if self.finalizers:
            meta["finalizers"] = list(self.finalizers)
        finished = {"type": "Finished", "status": "True"}
        if self.finished_at:
            finished["lastTransitionTime"] = self.finished_at
        return {
            "apiVersion": self.api_version,
            "kind": "Workload",
            "metadata": meta,
            "status": {"conditions": [finished]},
        }

    def __getitem__(self, key: str) -> Any:
        return self._object()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(("apiVersion", "kind", "metadata", "status"))

    def __len__(self) -> int:
        return 4


# What of a Workload's pod templates is read: the requests and placement the core parses
# (extender/core/jobframework/jobs.py pod_set), and what eviction restores (objects.restore_patch).
_POD_FIELDS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "schedulingGates",
    "schedulerName",
    "overhead",
    "priorityClassName",
    "resourceClaims",  # the devices claimed (DRA), counted against quota
)


def _container(container: Any) -> Any:
    if not isinstance(container, Mapping):
        return container  # malformed: kept, so the parse says what is wrong with it
    return {k: container[k] for k in ("name", "resources", "restartPolicy") if k in container}


def _pod_template(template: Any) -> Any:
    """A pod template without what no reader of a Workload needs (images, commands,
    environment, volumes, probes...); anything malformed is kept as it is."""
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        return template
    spec = template["spec"]
    kept: Obj = {k: spec[k] for k in _POD_FIELDS if k in spec}
    for key in ("containers", "initContainers"):
        if key in spec:
            value = spec[key]
            kept[key] = [_container(c) for c in value] if isinstance(value, list) else value
    out: Obj = {"spec": kept}
    if "metadata" in template:
        meta = template["metadata"]
        out["metadata"] = (
            {k: meta[k] for k in ("labels", "annotations") if k in meta}
            if isinstance(meta, Mapping)
            else meta
        )
    return out


def workload(obj: Obj) -> Obj | FinishedWorkload:
    """A Workload as the cache keeps it: a finished one becomes a FinishedWorkload; the pod
    templates of the others keep only what is read of them."""
    obj = trim(obj)
    status = obj.get("status")
    finished = next(
        (
            c
            for c in (status.get("conditions") or [] if isinstance(status, dict) else [])
            if isinstance(c, Mapping) and c.get("type") == "Finished" and c.get("status") == "True"
        ),
        None,
    )
    if finished is None:
        spec = obj.get("spec")
        if isinstance(spec, Mapping) and isinstance(spec.get("podSets"), list):
            pod_sets = [
                {**ps, "template": _pod_template(ps["template"])}
                if isinstance(ps, Mapping) and "template" in ps
                else ps
                for ps in spec["podSets"]
            ]
            obj = {**obj, "spec": {**spec, "podSets": pod_sets}}
        return obj
    meta = _mapping(obj.get("metadata"))
    owner = next(
        (
            (sys.intern(str(o.get("kind"))), str(o.get("name")), "")
            for o in meta.get("ownerReferences") or []
            if isinstance(o, Mapping) and o.get("controller")
        ),
        None,
    )
    return FinishedWorkload(
        sys.intern(str(obj.get("apiVersion") or "")),
        sys.intern(str(meta.get("namespace") or "")),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        str(meta.get("resourceVersion") or ""),
        owner,
        queue_name=sys.intern(str(_mapping(obj.get("spec")).get("queueName") or "")),
        finalizers=tuple(sys.intern(str(f)) for f in meta.get("finalizers") or ()),
        finished_at=str(finished.get("lastTransitionTime") or ""),
    )


def trim(obj: Obj) -> Obj:
    """The object without what no reader needs (managedFields, kubectl's last-applied copy)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    if "managedFields" in meta or LAST_APPLIED in (meta.get("annotations") or {}):
        meta = {k: v for k, v in meta.items() if k != "managedFields"}
        annotations = meta.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            meta["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
        obj = {**obj, "metadata": meta}
    return obj


@dataclass(frozen=True, slots=True)
class JobView:
    """What the controller reads of a job of any managed kind (about a tenth of the object):
    its identity, its state as its adapter reads it, and the parts of its pod templates that
    a start sets and a stop restores."""

    adapter: JobAdapter
    namespace: str
    name: str
    uid: str
    resource_version: str
    queue_name: str | None  # the kueue.x-k8s.io/queue-name label
    priority_class: str | None  # the kueue.x-k8s.io/priority-class label
    cluster_queue: str | None  # the tower.dev/cluster-queue annotation (set when started)
    is_child: bool  # created and queued by a managed parent (a JobSet's Job)
    suspended: bool
    active: bool  # pods may still run
    started: bool  # its own controller counts it started (a Job's status.startTime)
    finished: tuple[str, str] | None  # (Succeeded or Failed, message)
    templates: Obj  # the spec's pod templates, trimmed to placement, in the kind's shape
    source: Obj | None = None  # the whole object, while its Workload must be created
    # Those of its adapter's kept_annotations that it has (a Job's job-min-parallelism).
    annotations: tuple[tuple[str, str], ...] = ()
    pods_ready: bool = False  # every pod the admission started is ready (Kueue's PodsReady)
    # Its finalizers, kept only while one is Kueue's (a pod's), which Tower takes off at its
    # end: the patch that does so writes the others back as they are.
    finalizers: tuple[str, ...] = ()
    # (Workload name, podSet) of a member of a group that shares one Workload (a pod group's
    # pod, a StatefulSet's): the group room follows it, not the job reconciler.
    group: tuple[str, str] | None = None
    # The Workload made for it beforehand (kueue.x-k8s.io/prebuilt-workload-name, annotation
    # or label): it is followed, never created (a MultiKueue worker's job).
    prebuilt: str | None = None
    managed_by: str | None = None  # its managedBy (MultiKueue's, on a manager's job)
    deleting: bool = False  # its deletionTimestamp is set
    # Its podSets' names, counts and resources as one number (core/jobframework/match.py), to
    # tell a running job that no longer matches its Workload; None: not read (a pod, a job
    # whose podSets come from other objects, or one that does not parse).
    shape_key: int | None = None
    # Kueue's admission-gated-by annotation as written: its Workload follows it.
    admission_gated_by: str = ""
    # Its kueue.x-k8s.io/max-exec-time-seconds, as Kueue reads it: its Workload follows it.
    max_exec_seconds: int | None = None
    # Its finished pods whose quota its Workload gives back (core/jobframework/reclaimable.py);
    # None for a kind that has none.
    reclaimable: tuple[tuple[str, int], ...] | None = None
    # (kind, name) of the managed parent that controls a child (a RayJob's RayCluster): a
    # change of the child is a change of what its parent follows.
    parent: tuple[str, str] | None = None

    @property
    def holds(self) -> bool:
        return bool(self.finalizers)

    @property
    def kind(self) -> str:
        return self.adapter.kind

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def labels(self) -> dict[str, str]:
        """The labels Tower reads (the others are not kept)."""
        out = {}
        if self.queue_name:
            out[QUEUE_NAME_LABEL] = self.queue_name
        if self.priority_class:
            out[PRIORITY_CLASS_LABEL] = self.priority_class
        return out

    @property
    def resource(self) -> Resource:
        return resource_of(self.adapter)

    def without_source(self) -> JobView:
        return self if self.source is None else replace(self, source=None)

    def as_object(self) -> Obj:
        """A job-shaped dict of the kept fields, for the adapters' patch builders and Events."""
        annotations = dict(self.annotations)
        if self.cluster_queue:
            annotations[CLUSTER_QUEUE_ANNOTATION] = self.cluster_queue
        return {
            "apiVersion": self.adapter.api_version,
            "kind": self.kind,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "resourceVersion": self.resource_version,
                "labels": self.labels,
                "annotations": annotations,
                **({"finalizers": list(self.finalizers)} if self.finalizers else {}),
            },
            "spec": {**self.adapter.suspend_patch(self.suspended)["spec"], **self.templates},
        }


def job_view(obj: Obj, *, keep_source: bool, adapter: JobAdapter | None = None) -> JobView | None:
    """A job as the cache keeps it; None for an object without a name or of no managed kind."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return None
    if adapter is None:
        adapter = registry.for_object(obj) or (
            None if obj.get("kind") else registry.ADAPTERS["batch/job"]
        )
        if adapter is None:
            return None
    labels = _mapping(meta.get("labels"))
    all_annotations = _mapping(meta.get("annotations"))
    cluster_queue = all_annotations.get(CLUSTER_QUEUE_ANNOTATION)
    kept_annotations = tuple(
        (k, str(all_annotations[k])) for k in adapter.kept_annotations if k in all_annotations
    )
    finished = adapter.finished(obj)
    group = adapter.group_of(obj)
    if finished is not None:
        finished = (finished[0], sys.intern(finished[1]))  # the same few messages, 100,000 times
    is_child = group is not None or adapter.is_child(obj)
    source = None
    if finished is not None:
        templates = _NO_TEMPLATES  # a finished job is never started or stopped again
    else:
        templates = adapter.kept(obj)
        if keep_source:
            source = {k: v for k, v in trim(obj).items() if k != "status"}
    return JobView(
        adapter=adapter,
        namespace=sys.intern(namespace),
        name=name,
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        queue_name=_label(labels, QUEUE_NAME_LABEL),
        priority_class=_label(labels, PRIORITY_CLASS_LABEL),
        cluster_queue=str(cluster_queue) if cluster_queue else None,
        is_child=is_child,
        suspended=adapter.is_suspended(obj),
        active=adapter.is_active(obj),
        started=adapter.is_started(obj),
        finished=finished,
        templates=templates,
        source=source,
        annotations=kept_annotations,
        admission_gated_by=gated_by(all_annotations),
        max_exec_seconds=exec_limit.limit_of(labels),
        pods_ready=finished is None and adapter.pods_ready(obj),
        finalizers=(
            tuple(str(f) for f in meta.get("finalizers") or ())
            if adapter.holds_finalizer(obj)
            else ()
        ),
        group=group,
        prebuilt=prebuilt_name(meta),
        managed_by=_interned(adapter.managed_by(obj)),
        deleting=bool(meta.get("deletionTimestamp")),
        shape_key=None if finished is not None or group is not None else _shape_key(adapter, obj),
        reclaimable=None if finished is not None else reclaimable.of_job(adapter.framework, obj),
        parent=_controller(meta) if is_child and group is None else None,
    )


def _controller(meta: Mapping[str, Any]) -> tuple[str, str] | None:
    for owner in meta.get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return sys.intern(str(owner.get("kind") or "")), str(owner.get("name") or "")
    return None


def _shape_key(adapter: JobAdapter, obj: Obj) -> int | None:
    if not adapter.can_suspend:
        return None  # a pod: its group's rules decide
    try:
        if adapter.references(obj):
            return None  # its podSets are read from other objects (a TrainJob's runtime)
        return match.key(match.job_shapes(adapter.pod_sets(obj)))
    except ManifestError:
        return None


def _interned(value: str | None) -> str | None:
    return sys.intern(value) if value else None


def prebuilt_name(meta: Mapping[str, Any]) -> str | None:
    """The prebuilt Workload a job names: the annotation first, then the label (Kueue's
    order: the annotation is what it writes by default, the label what older versions did)."""
    for source in (_mapping(meta.get("annotations")), _mapping(meta.get("labels"))):
        value = source.get(PREBUILT_WORKLOAD_LABEL)
        if isinstance(value, str) and value:
            return value
    return None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _label(labels: Mapping[str, Any], key: str) -> str | None:
    # Queue and class names repeat across thousands of Jobs: one string each.
    value = labels.get(key)
    return sys.intern(value) if isinstance(value, str) and value else None


def workload_key(job: JobView) -> str:
    """The key of the Workload Kueue names for a job (a group member's: its group's)."""
    if job.group is not None:
        return f"{job.namespace}/{job.group[0]}"
    if job.prebuilt is not None:
        return f"{job.namespace}/{job.prebuilt}"
    return f"{job.namespace}/{workload_name(job.kind, job.adapter.group, job.name, job.uid)}"


def owner_index(workload: Any) -> list[str]:
    """Index Workloads by the Job or JobSet that controls them ("Job/ns/name")."""
    meta = workload.get("metadata") or {} if isinstance(workload, dict) else {}
    return [
        f"{owner.get('kind')}/{meta.get('namespace')}/{owner.get('name')}"
        for owner in meta.get("ownerReferences") or []
        if isinstance(owner, dict) and owner.get("controller")
    ]

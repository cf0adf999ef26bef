"""What the watch caches keep of each object: only the fields the controller reads.

client-go's informers can transform objects before caching them (`SetTransform`); these are
Tower's transforms. Every object loses `managedFields` and kubectl's last-applied
annotation. A Job or JobSet becomes a `JobView`: its identity, its state (suspended,
active, finished) and the parts of its pod templates that admission and eviction patch. The
whole object is kept only while its Workload must still be created from it.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from extender.core.models import QUEUE_NAME_LABEL
from extender.kube.objects import CLUSTER_QUEUE_ANNOTATION, condition
from extender.kube.resources import JOBS, JOBSETS

Obj = dict[str, Any]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_EMPTY: Mapping[str, str] = {}


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
    """What the controller reads of a Job or JobSet (about a tenth of the object)."""

    kind: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    labels: Mapping[str, str]
    cluster_queue: str | None  # the tower.dev/cluster-queue annotation (set when started)
    controlled_by_jobset: bool
    suspended: bool
    active: bool  # pods may still run (status.active)
    started: bool  # status.startTime is set
    finished: tuple[str, str] | None  # (Succeeded or Failed, message)
    templates: Obj  # Job: {"template": placement fields}; JobSet: {"replicatedJobs": [...]}
    source: Obj | None = None  # the whole object, while its Workload must be created

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def queue_name(self) -> str | None:
        value = self.labels.get(QUEUE_NAME_LABEL)
        return value if isinstance(value, str) and value else None

    @property
    def resource(self) -> Any:
        return JOBSETS if self.kind == JOBSETS.kind else JOBS

    def without_source(self) -> JobView:
        return self if self.source is None else replace(self, source=None)

    def as_object(self) -> Obj:
        """A Job-shaped dict of the kept fields, for the patch builders and Events."""
        annotations = {CLUSTER_QUEUE_ANNOTATION: self.cluster_queue} if self.cluster_queue else {}
        return {
            "apiVersion": self.resource.api_version,
            "kind": self.kind,
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "uid": self.uid,
                "resourceVersion": self.resource_version,
                "labels": dict(self.labels),
                "annotations": annotations,
            },
            "spec": {"suspend": self.suspended, **self.templates},
        }


def _placement(template: Any) -> Obj:
    """The parts of a pod template that admission sets and eviction restores."""
    if not isinstance(template, Mapping):
        return {}
    out: Obj = {}
    meta = template.get("metadata")
    if isinstance(meta, Mapping):
        kept = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
        if kept:
            out["metadata"] = kept
    spec = template.get("spec")
    if isinstance(spec, Mapping):
        kept = {k: spec[k] for k in ("nodeSelector", "tolerations", "schedulingGates") if k in spec}
        if kept:
            out["spec"] = kept
    return out


def job_view(obj: Obj, *, keep_source: bool) -> JobView | None:
    """A Job or JobSet as the cache keeps it; None for an object without a name."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    name, namespace = meta.get("name"), meta.get("namespace")
    if not isinstance(name, str) or not isinstance(namespace, str):
        return None
    kind = str(obj.get("kind") or JOBS.kind)
    spec = _mapping(obj.get("spec"))
    status = _mapping(obj.get("status"))
    labels = meta.get("labels")
    cluster_queue = _mapping(meta.get("annotations")).get(CLUSTER_QUEUE_ANNOTATION)
    owners = meta.get("ownerReferences")
    if not isinstance(owners, list):
        owners = []
    if kind == JOBSETS.kind:
        active = any(
            isinstance(r, Mapping) and (r.get("active") or 0) > 0
            for r in status.get("replicatedJobsStatus") or []
        )
        templates: Obj = {"replicatedJobs": spec.get("replicatedJobs") or []}
    else:
        active = bool(status.get("active"))
        templates = {"template": _placement(spec.get("template"))}
    finished = None
    for kind_name, reason in (("Complete", "Succeeded"), ("Completed", "Succeeded")):
        entry = condition(obj, kind_name)
        if entry is not None and entry.get("status") == "True":
            finished = (reason, str(entry.get("message") or "Job finished successfully"))
            break
    else:
        entry = condition(obj, "Failed")
        if entry is not None and entry.get("status") == "True":
            finished = ("Failed", str(entry.get("message") or "Job failed"))
    source = None
    if keep_source and finished is None:
        source = {k: v for k, v in trim(obj).items() if k != "status"}
    return JobView(
        kind=sys.intern(kind),
        namespace=sys.intern(namespace),
        name=name,
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        labels=_interned(labels) if isinstance(labels, Mapping) and labels else _EMPTY,
        cluster_queue=str(cluster_queue) if cluster_queue else None,
        controlled_by_jobset=any(
            isinstance(o, Mapping) and o.get("controller") and o.get("kind") == JOBSETS.kind
            for o in owners
        ),
        suspended=spec.get("suspend") is True,
        active=active,
        started=bool(status.get("startTime")),
        finished=finished,
        templates=templates,
        source=source,
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _interned(labels: Mapping[str, Any]) -> dict[str, str]:
    # Label keys and values repeat across thousands of Jobs (queue names, classes).
    return {sys.intern(str(k)): sys.intern(str(v)) for k, v in labels.items()}

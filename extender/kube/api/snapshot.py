"""The cluster's queues read once, into the core's state, for `kubectl tower` (read-only).

The same parsers and the same ClusterState the controller decides with: configuration
first, then every Workload (an admitted one holds its quota, a pending one is queued). No
cycle is run and nothing is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.core import parse
from extender.core.cycle import ClusterState
from extender.core.models import Workload
from extender.core.parse import ManifestError
from extender.core.workloads import creation_seconds
from extender.core.workloads import workload as parse_workload
from extender.kube.api import objects as o
from extender.kube.api.client import KubeClient
from extender.kube.api.resources import (
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    NAMESPACES,
    PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)

Obj = dict[str, Any]


@dataclass
class Snapshot:
    """The core's state as of one read, and the Workload objects it came from."""

    state: ClusterState
    objects: dict[str, Obj] = field(default_factory=dict)  # Workload key -> object
    finished: dict[str, Obj] = field(default_factory=dict)
    by_job_uid: dict[str, str] = field(default_factory=dict)  # Job/JobSet uid -> Workload key
    invalid: dict[str, str] = field(default_factory=dict)  # object -> why it was left out

    def reason(self, key: str) -> tuple[str, str] | None:
        """Why it waits, as the controller wrote it: on its own Workload, or on the one of
        its equivalence class the scheduler tried for all of them."""
        return _reason(self, key)

    def status(self, key: str) -> tuple[str, str] | None:
        """The QuotaReserved=False (reason, message) the controller wrote, if any."""
        obj = self.objects.get(key) or {}
        for condition in (obj.get("status") or {}).get("conditions") or []:
            if condition.get("type") == o.QUOTA_RESERVED and condition.get("status") == "False":
                return str(condition.get("reason") or ""), str(condition.get("message") or "")
        return None


def _reason(snapshot: Snapshot, key: str) -> tuple[str, str] | None:
    written = snapshot.status(key)
    if written is None:
        head = snapshot.state.class_head(key)
        if head is not None and head != key:
            written = snapshot.status(head)  # one tried for its whole equivalence class
    return written


def load(client: KubeClient, now: float) -> Snapshot:
    """Read the configuration and the Workloads (list only: needs read access)."""
    state = ClusterState()
    snapshot = Snapshot(state)

    def items(resource: Any) -> list[Obj]:
        listed, _ = client.list(resource)
        # List items come without kind and apiVersion (as kube-apiserver sends them).
        return [{"apiVersion": resource.api_version, "kind": resource.kind, **i} for i in listed]

    def parsed(resource: Any, parser: Any) -> list[Any]:
        out = []
        for obj in items(resource):
            try:
                out.append(parser(obj))
            except ManifestError as err:
                name = (obj.get("metadata") or {}).get("name")
                snapshot.invalid[f"{resource.kind}/{name}"] = f"{err.path}: {err.message}"
        return out

    state.configure(
        flavors=parsed(RESOURCE_FLAVORS, parse.resource_flavor),
        cluster_queues=parsed(CLUSTER_QUEUES, parse.cluster_queue),
        cohorts=parsed(COHORTS, parse.cohort),
        local_queues=parsed(LOCAL_QUEUES, parse.local_queue),
        namespaces=parsed(NAMESPACES, parse.namespace),
    )
    parsed(WORKLOAD_PRIORITY_CLASSES, parse.workload_priority_class)
    parsed(PRIORITY_CLASSES, parse.priority_class)
    for obj in items(WORKLOADS):
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        job_uid = (meta.get("labels") or {}).get(o.JOB_UID_LABEL)
        if job_uid:
            snapshot.by_job_uid[str(job_uid)] = key
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid"):
                snapshot.by_job_uid[str(ref["uid"])] = key
        if o.is_true(obj, o.FINISHED):
            snapshot.finished[key] = obj
            continue
        if meta.get("deletionTimestamp") or (obj.get("spec") or {}).get("active") is False:
            continue
        try:
            model = parse_workload(obj)
        except ManifestError as err:
            snapshot.invalid[f"Workload/{key}"] = f"{err.path}: {err.message}"
            continue
        snapshot.objects[key] = obj
        admission = o.admission_of(obj) if o.is_true(obj, o.QUOTA_RESERVED) else None
        if admission is not None and admission.cluster_queue in state.tree.cluster_queues:
            state.assume(model, admission, _since(obj, o.QUOTA_RESERVED, now))
        else:
            state.add_workload(model)
    return snapshot


def _since(obj: Obj, kind: str, default: float) -> float:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("lastTransitionTime"):
            return creation_seconds(condition["lastTransitionTime"])
    return default


def queue_order(state: ClusterState, cq_name: str) -> list[Workload]:
    """The pending workloads of a ClusterQueue in the order the core tries them: Kueue's
    order (priority, then creation, then uid), as its visibility API lists them."""
    return sorted(state.pending_workloads_in(cq_name), key=lambda w: w.order)

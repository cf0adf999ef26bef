"""The cluster's queues read once, into the core's state, for `kubectl tower` (read-only).

The same builder and the same ClusterState the controller decides with: configuration
first, then every Workload (an admitted one holds its quota, a pending one is queued). No
cycle is run and nothing is written.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.core.api.models import Workload
from extender.core.scheduling.builder import StateBuilder
from extender.core.scheduling.cycle import ClusterState
from extender.core.scheduling.visibility import PendingWorkload
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

# What is read, in this order: configuration, then Workloads.
_READ = (
    RESOURCE_FLAVORS,
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    NAMESPACES,
    WORKLOAD_PRIORITY_CLASSES,
    PRIORITY_CLASSES,
    WORKLOADS,
)


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

    def items(resource: Any) -> list[Obj]:
        listed, _ = client.list(resource)
        # List items come without kind and apiVersion (as kube-apiserver sends them).
        return [{"apiVersion": resource.api_version, "kind": resource.kind, **i} for i in listed]

    objects = [obj for resource in _READ for obj in items(resource)]
    built = StateBuilder(state).build(objects, now)
    state.queues.keep_positions()  # the queues in the visibility API's order, sorted once
    snapshot = Snapshot(state, built.workloads, built.finished, invalid=built.invalid)
    for obj in objects:
        if obj["kind"] != WORKLOADS.kind:
            continue
        meta = obj.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        job_uid = (meta.get("labels") or {}).get(o.JOB_UID_LABEL)
        if job_uid and _rank(snapshot, key) >= _rank(snapshot, snapshot.by_job_uid.get(job_uid)):
            # An elastic job has Workload slices: the one that waits says why it is not
            # running at its size; else the one that runs it; a finished one last.
            snapshot.by_job_uid[str(job_uid)] = key
        for ref in meta.get("ownerReferences") or []:
            if isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid"):
                owner = str(ref["uid"])
                if _rank(snapshot, key) >= _rank(snapshot, snapshot.by_job_uid.get(owner)):
                    snapshot.by_job_uid[owner] = key
    return snapshot


def _rank(snapshot: Snapshot, key: str | None) -> int:
    if key is None:
        return -1
    if key in snapshot.finished:
        return 0
    return 2 if snapshot.state.pending_workload(key) is not None else 1


def pending_in(state: ClusterState, cq_name: str) -> list[PendingWorkload]:
    """The pending workloads of a ClusterQueue with their positions in it and in their
    LocalQueues (from 0), as Kueue's visibility API lists them: the very code the API's
    answers come from (extender/core/scheduling/visibility.py), so both say the same."""
    positions = state.queues.positions or state.queues.keep_positions()
    return positions.cluster_queue(cq_name, 0, sys.maxsize) or []


def queue_order(state: ClusterState, cq_name: str) -> list[Workload]:
    """The pending workloads of a ClusterQueue in the visibility API's order (`pending_in`
    without the positions)."""
    return [pending.workload for pending in pending_in(state, cq_name)]

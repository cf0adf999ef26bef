"""ClusterQueue and LocalQueue status from the controller's state (pure; written elsewhere)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from extender.core.api.models import ClusterQueue, FlavorResource, StopPolicy
from extender.core.api.quantity import format_amount
from extender.core.scheduling.cycle import ClusterState
from extender.kube.api import objects as o

Obj = dict[str, Any]


def _usage_list(cq: ClusterQueue, used: Counter[FlavorResource], with_borrowed: bool) -> list[Obj]:
    out = []
    for group in cq.resource_groups:
        for flavor in group.flavors:
            resources = []
            for quota in flavor.resources:
                total = used.get((flavor.name, quota.name), 0)
                entry: Obj = {"name": quota.name, "total": format_amount(quota.name, total)}
                if with_borrowed:
                    entry["borrowed"] = format_amount(quota.name, max(0, total - quota.nominal))
                resources.append(entry)
            out.append({"name": flavor.name, "resources": resources})
    return out


def cluster_queue_usage(state: ClusterState, name: str) -> tuple[Counter[FlavorResource], int]:
    """Quota held in a ClusterQueue per (flavor, resource), and by how many workloads."""
    used: Counter[FlavorResource] = Counter()
    count = 0
    for admitted in state.admitted_in(name):
        used.update(admitted.usage)
        count += 1
    return used, count


def cluster_queue_status(
    state: ClusterState, name: str, pending: int, used: Counter[FlavorResource], count: int
) -> Obj:
    """What `kubectl get clusterqueue -o wide` and `describe` show, given the quota held
    (`cluster_queue_usage`)."""
    cq = state.cluster_queue(name)
    assert cq is not None, name
    active, reason, message = state.cluster_queue_active(name)
    return {
        "pendingWorkloads": pending,
        "reservingWorkloads": count,
        "admittedWorkloads": count,
        "flavorsReservation": _usage_list(cq, used, True),
        "flavorsUsage": _usage_list(cq, used, True),
        "conditions": [
            {
                "type": "Active",
                "status": "True" if active else "False",
                "reason": reason,
                "message": message,
            }
        ],
    }


def local_queue_status(
    state: ClusterState,
    key: str,
    pending: int,
    admitted: int,
    used: Counter[FlavorResource],
) -> Obj:
    lq = state.local_queue(key)
    assert lq is not None, key
    cq = state.cluster_queue(lq.cluster_queue)
    if lq.stop_policy is not StopPolicy.NONE:  # Kueue says so before anything else
        active, reason, message = False, "Stopped", "LocalQueue is stopped"
        usage: list[Obj] = [] if cq is None else _usage_list(cq, used, False)
    elif cq is None:
        active, reason, message = (
            False,
            "ClusterQueueDoesNotExist",
            f"Can't submit new workloads to clusterQueue {lq.cluster_queue}",
        )
        usage = []
    else:
        cq_active, _, _ = state.cluster_queue_active(cq.name)
        active = cq_active
        reason = "Ready" if cq_active else "ClusterQueueIsInactive"
        message = (
            "Can submit new workloads to localQueue"
            if cq_active
            else f"Can't submit new workloads to clusterQueue {cq.name}"
        )
        usage = _usage_list(cq, used, False)
    status: Obj = {
        "pendingWorkloads": pending,
        "reservingWorkloads": admitted,
        "admittedWorkloads": admitted,
        "flavorsReservation": usage,
        "flavorsUsage": usage,
        "conditions": [
            {
                "type": "Active",
                "status": "True" if active else "False",
                "reason": reason,
                "message": message,
            }
        ],
    }
    ledger = state.fair_sharing_ledger
    sampled = ledger.status(key) if ledger is not None else None
    if sampled is not None:
        consumed, at = sampled
        status["fairSharing"] = {
            "weightedShare": 0,
            "admissionFairSharingStatus": {
                "consumedResources": {r: consumed_quantity(v) for r, v in consumed.items()},
                "lastUpdate": o.rfc3339(at),
            },
        }
    return status


def consumed_quantity(value: float) -> str:
    """A consumed amount (base units) as Kueue writes it, in nano-units below one unit."""
    if value == int(value):
        return str(int(value))
    return f"{math.floor(value * 1e9)}n"

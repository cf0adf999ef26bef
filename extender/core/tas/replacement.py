"""Kueue's node replacement: a failed host's pods placed again within their domain.

When a host named in a workload's topology assignment has failed (the controller records it
in status.unhealthyNodes, judged by node_failure.py), its pods are placed again: a required
podSet within its domain of the required level, a podSet in slices within the slice the
failure broke; the rest of the assignment stays. No replacement, or more than one failed
host, evicts the workload with Kueue's message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from extender.core.api.models import Admission, Workload
from extender.core.api.topology import (
    HOSTNAME,
    REQUIRED,
    DomainAssignment,
    SliceLayer,
    TopologyAssignment,
    TopologyRequest,
)
from extender.core.tas.cache import TopologyCache
from extender.core.tas.node_failure import MULTIPLE_FAILURES, NO_REPLACEMENT
from extender.core.tas.placement import TopologySnapshot, placement_of


def replace_failed(
    tas: TopologyCache,
    workload: Workload,
    admission: Admission,
    unhealthy: Sequence[str] | None = None,
) -> Admission | str | None:
    """The failed hosts of the workload's assignment (`unhealthy`: those its
    status.unhealthyNodes names; None: those gone or NotReady now) have their pods placed
    again, within the same domain of the required level (Kueue's node replacement). The
    admission with the new assignment, Kueue's eviction message when there is no
    replacement or more than one host failed, or None (no host of it failed)."""
    holds = tas.held.get(workload.key)
    if not holds:
        return None
    hosts = {
        d.values[-1]
        for h in holds
        for d in h.assignment.domains
        if h.assignment.levels[-1:] == (HOSTNAME,)
    }
    if unhealthy is None:
        failed = sorted(h for h in hosts if not tas.usable(h))
    else:
        failed = [h for h in dict.fromkeys(unhealthy) if h in hosts]
    if not failed:
        return None
    if len(failed) > 1:
        return MULTIPLE_FAILURES.format(", ".join(failed))
    pod_sets = {ps.name: ps for ps in workload.pod_sets}
    replaced: dict[str, TopologyAssignment] = {}
    for held in holds:
        gone = [d for d in held.assignment.domains if d.values[-1] == failed[0]]
        snap = tas.snapshot(held.flavor)
        ps = pod_sets.get(held.pod_set)
        if not gone or snap is None or ps is None:
            continue
        kept = [d for d in held.assignment.domains if d.values[-1] != failed[0]]
        missing = sum(d.count for d in gone)
        implied = not (ps.topology is not None and ps.topology.explicit)
        request = ps.topology or TopologyRequest()
        within, request = _replacement_scope(snap, request, implied, kept, missing)
        placement = placement_of(ps, missing, request, implied)
        found = snap.place_within(placement, within)
        if isinstance(found, str):
            return NO_REPLACEMENT.format(failed[0])
        counts: dict[tuple[str, ...], int] = {}
        for d in (*kept, *found.domains):
            counts[d.values] = counts.get(d.values, 0) + d.count
        order = sorted(counts, key=lambda v: snap.path_of(v) or v)
        replaced[held.pod_set] = TopologyAssignment(
            held.assignment.levels, tuple(DomainAssignment(v, counts[v]) for v in order)
        )
    if not replaced:
        return None
    now = [replace(h, assignment=replaced.get(h.pod_set, h.assignment)) for h in holds]
    tas.hold(workload.key, now)
    # Every podSet's assignment from the holds: an earlier replacement is kept.
    placed = {h.pod_set: h.assignment for h in now}
    return Admission(
        admission.cluster_queue,
        tuple(
            replace(psa, topology=placed[psa.name]) if psa.name in placed else psa
            for psa in admission.pod_set_assignments
        ),
    )


def _replacement_scope(
    snap: TopologySnapshot,
    request: TopologyRequest,
    implied: bool,
    kept: Sequence[DomainAssignment],
    missing: int,
) -> tuple[str | None, TopologyRequest]:
    """Where a failed host's `missing` pods may go, and the request they are placed by
    (Kueue's requiredReplacementDomain): a required podSet stays in its domain of the
    required level; a podSet in slices whose slice the failure broke is mended within that
    slice's domain, in the largest slice size the missing pods make up (single pods if
    none). None: anywhere."""
    key = snap.level_key(request, implied)
    if not kept or key not in snap.levels:
        return None, request
    if request.slices and missing % request.slices[0].size:
        layers = request.slices
        broken = next(s for s in reversed(layers) if missing % s.size)  # the innermost
        within = _incomplete_slice(snap, kept, missing, broken)
        if within is None:
            return None, request
        whole = next((s for s in reversed(layers) if missing % s.size == 0), None)
        return within, replace(request, slices=(whole,) if whole is not None else ())
    if request.mode != REQUIRED:
        return None, request
    path = snap.path_of(kept[0].values)
    if path is None:
        return None, request
    return ",".join(path[: snap.levels.index(key) + 1]), request


def _incomplete_slice(
    snap: TopologySnapshot, kept: Sequence[DomainAssignment], missing: int, layer: SliceLayer
) -> str | None:
    """The domain of the slice level whose pods, with the missing ones, make whole slices."""
    if layer.level not in snap.levels:
        return None
    depth = snap.levels.index(layer.level) + 1
    pods: dict[str, int] = {}
    for d in kept:
        path = snap.path_of(d.values)
        if path is not None:
            domain = ",".join(path[:depth])
            pods[domain] = pods.get(domain, 0) + d.count
    return next((d for d, n in pods.items() if (n + missing) % layer.size == 0), None)

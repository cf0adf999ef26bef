"""Which domain each gated pod of a topology-placed podSet goes to (Kueue's ungater).

A podSet placed on topology domains starts its pods behind the kueue.x-k8s.io/topology
scheduling gate. Each gated pod is given a domain (a nodeSelector with the domain's label
at every level of the assignment) and let through. Pods are matched to domains by rank when
the podSet numbers its pods (a Job's completion index, a JobSet's job index times its size
plus the completion index): the assignment's domains, in order, hold ranks 0, 1, ... by
their counts. Without usable ranks (a label missing or out of range, two pods with one rank,
a pod already let through elsewhere), the domains are filled in order with what each still
lacks, as Kueue's greedy fallback does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from extender.core.api.topology import TopologyAssignment, TopologyRequest


@dataclass(frozen=True, slots=True)
class PodOnDomains:
    """A pod of the podSet: gated or let through (with the nodeSelector it was given)."""

    key: str
    gated: bool
    labels: Mapping[str, str]
    node_selector: Mapping[str, str]


def _index(labels: Mapping[str, str], label: str, bound: int) -> int | None:
    value = labels.get(label)
    if value is None or not value.isdigit():
        return None
    index = int(value)
    return index if index < bound else None


def rank_offsets(pod_sets: Sequence[tuple[str, int, str | None]]) -> dict[str, int]:
    """Where each podSet's pod indexes start: 0, but in a group of two podSets (a
    LeaderWorkerSet's leader and workers) the larger one's start after the smaller one's
    (the leader is index 0, its workers 1..n), as Kueue's ungater reads them. `pod_sets`:
    (name, count, podSetGroupName)."""
    groups: dict[str, list[tuple[str, int]]] = {}
    for i, (name, count, group) in enumerate(pod_sets):
        groups.setdefault(group or f"\x00{i}", []).append((name, count))
    out: dict[str, int] = {}
    for members in groups.values():
        if len(members) > 1:
            smaller, larger = members[0], members[1]
            if smaller[1] > larger[1]:
                smaller, larger = larger, smaller
            out[smaller[0]] = 0
            out[larger[0]] = smaller[1]
        else:
            out[members[0][0]] = 0
    return out


def ranks(
    pods: Sequence[PodOnDomains],
    request: TopologyRequest | None,
    count: int,
    offset: int = 0,
) -> dict[str, int] | None:
    """Each pod's rank, or None when ranks cannot be used for this podSet."""
    if request is None or not request.pod_index_label:
        return None
    out: dict[str, int] = {}
    single = count
    if request.sub_group_index_label:
        groups = request.sub_group_count or 0
        if groups <= 0:
            return None
        single = count // groups
    for pod in pods:
        index = _index(pod.labels, request.pod_index_label, single + offset)
        if index is None:
            return None
        rank = index - offset
        if request.sub_group_index_label:
            job = _index(pod.labels, request.sub_group_index_label, request.sub_group_count or 0)
            if job is None:
                return None
            rank += job * single
        if rank < 0 or rank >= count:
            return None
        out[pod.key] = rank
    if len(set(out.values())) != len(out):
        return None  # two pods with one rank
    return out


def domains_for_gated(
    assignment: TopologyAssignment,
    pods: Sequence[PodOnDomains],
    request: TopologyRequest | None,
    count: int,
    offset: int = 0,
) -> dict[str, dict[str, str]]:
    """For each gated pod to let through now, the nodeSelector of its domain."""
    levels = assignment.levels
    slots = [d.values for d in assignment.domains for _ in range(d.count)]

    def selector(values: Sequence[str]) -> dict[str, str]:
        return dict(zip(levels, values, strict=True))

    def domain_of(pod: PodOnDomains) -> tuple[str, ...]:
        return tuple(pod.node_selector.get(level, "") for level in levels)

    by_rank = ranks(pods, request, count, offset)
    if by_rank is not None and all(r < len(slots) for r in by_rank.values()):
        consistent = all(domain_of(pod) == slots[by_rank[pod.key]] for pod in pods if not pod.gated)
        if consistent:
            return {p.key: selector(slots[by_rank[p.key]]) for p in pods if p.gated}
    # Greedy: what each domain still lacks, in the assignment's order.
    placed: dict[tuple[str, ...], int] = {}
    for pod in pods:
        if not pod.gated:
            placed[domain_of(pod)] = placed.get(domain_of(pod), 0) + 1
    gated = [p for p in pods if p.gated]
    out: dict[str, dict[str, str]] = {}
    for domain in assignment.domains:
        lacking = domain.count - placed.get(domain.values, 0)
        while lacking > 0 and gated:
            out[gated.pop(0).key] = selector(domain.values)
            lacking -= 1
    return out

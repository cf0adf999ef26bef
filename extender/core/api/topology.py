"""Topology-aware scheduling's objects: a Topology, a podSet's request, and an assignment.

A Topology names node labels from the widest level to the narrowest (block, rack, host). A
podSet asks to be placed within one domain of a level (required), within one if it can
(preferred), or anywhere (unconstrained); the answer is an assignment: pods per domain.
Kueue's Workload stores an assignment in a compact form (v1beta2) or as a list (v1beta1);
`encode` and `decode` turn one into the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

HOSTNAME = "kubernetes.io/hostname"

REQUIRED = "required"
PREFERRED = "preferred"
UNCONSTRAINED = "unconstrained"
IMPLICIT = "implicit"  # no annotation, in a ClusterQueue whose flavors are all topology-aware


@dataclass(frozen=True, slots=True)
class Topology:
    """A Topology: its node labels, widest level first."""

    name: str
    levels: tuple[str, ...]

    @property
    def hostname_lowest(self) -> bool:
        return bool(self.levels) and self.levels[-1] == HOSTNAME


@dataclass(frozen=True, slots=True)
class SliceLayer:
    """Pods in slices of `size`, each slice within one domain of `level`."""

    level: str
    size: int


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """spec.podSets[].topologyRequest: how the pods of one podSet are to be placed."""

    mode: str = IMPLICIT  # REQUIRED, PREFERRED, UNCONSTRAINED or IMPLICIT
    level: str | None = None  # the node label of the level (required or preferred)
    slices: tuple[SliceLayer, ...] = ()  # widest first
    group: str | None = None  # podSetGroupName: placed with the other podSet of the group
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None

    @property
    def explicit(self) -> bool:
        """Kueue's IsExplicitlyRequestingTAS: a mode or a slice layer was asked for."""
        return self.mode != IMPLICIT or bool(self.slices)


@dataclass(frozen=True, slots=True)
class DomainAssignment:
    """Pods placed in one domain: its label value at each level of the assignment."""

    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    """Where a podSet's pods go: the levels named and pods per domain, in domain order.
    When the Topology's lowest level is the hostname, that is the only level named."""

    levels: tuple[str, ...]
    domains: tuple[DomainAssignment, ...]

    def total(self) -> int:
        return sum(d.count for d in self.domains)


def topology_request(raw: Any) -> TopologyRequest | None:
    """A Workload's spec.podSets[].topologyRequest (either version), already schema-checked."""
    if not isinstance(raw, Mapping):
        return None

    def text(key: str) -> str | None:
        value = raw.get(key)
        return value if isinstance(value, str) and value else None

    def number(key: str) -> int | None:
        value = raw.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    mode, level = IMPLICIT, None
    if (level := text("required")) is not None:
        mode = REQUIRED
    elif (level := text("preferred")) is not None:
        mode = PREFERRED
    elif raw.get("unconstrained") is True:
        mode = UNCONSTRAINED
    slices: tuple[SliceLayer, ...] = ()
    constraints = raw.get("podsetSliceRequiredTopologyConstraints")
    if isinstance(constraints, list) and constraints:
        slices = tuple(
            SliceLayer(str(c.get("topology")), int(c.get("size") or 1))
            for c in constraints
            if isinstance(c, Mapping)
        )
    elif (slice_level := text("podSetSliceRequiredTopology")) is not None:
        slices = (SliceLayer(slice_level, number("podSetSliceSize") or 1),)
    return TopologyRequest(
        mode,
        level,
        slices,
        text("podSetGroupName"),
        text("podIndexLabel"),
        text("subGroupIndexLabel"),
        number("subGroupCount"),
    )


# spec.podSets' delayedTopologyRequest (status.admission.podSetAssignments[]).
DELAYED_PENDING = "Pending"
DELAYED_READY = "Ready"


def level_key(request: TopologyRequest, levels: Sequence[str], implied: bool) -> str | None:
    """The level a podSet's pods are kept within (Kueue's levelKey, with the implied
    fallback): the one it names, the widest for slices alone, the lowest when unconstrained
    or implied; None when it asks for nothing."""
    if request.mode in (REQUIRED, PREFERRED):
        return request.level
    if request.slices:  # slices alone: anywhere, slice by slice
        return levels[0] if levels else None
    if request.mode == UNCONSTRAINED or (request.mode == IMPLICIT and implied):
        return levels[-1] if levels else None
    return None


def has_levels(request: TopologyRequest, levels: Sequence[str], implied: bool) -> bool:
    """Kueue's HasLevel: every level the request names is one of the Topology's."""
    key = level_key(request, levels, implied)
    if key is None or key not in levels:
        return False
    return all(layer.level in levels for layer in request.slices)


# ----- the Workload's forms of an assignment -----------------------------------------------


def _compact_values(values: Sequence[str]) -> dict[str, Any]:
    """One level's values in a slice: one universal value, or roots between a common prefix
    and suffix (Kueue's compact encoding; the prefix gives way where the two would overlap)."""
    first = values[0]
    prefix = suffix = first
    shortest = longest = len(first)
    for value in values[1:]:
        n = len(value)
        shortest, longest = min(shortest, n), max(longest, n)
        prefix, suffix = prefix[:n], suffix[max(len(suffix) - n, 0) :]
        i = 0
        while i < len(prefix) and value[i] == prefix[i]:
            i += 1
        prefix = prefix[:i]
        j = 0
        while j < len(suffix) and value[n - 1 - j] == suffix[len(suffix) - 1 - j]:
            j += 1
        suffix = suffix[len(suffix) - j :]
    if len(prefix) == longest:
        return {"universal": prefix}
    if len(prefix) + len(suffix) > shortest:
        prefix = prefix[: shortest - len(suffix)]
    individual: dict[str, Any] = {}
    if prefix:
        individual["prefix"] = prefix
    if suffix:
        individual["suffix"] = suffix
    individual["roots"] = [v[len(prefix) : len(v) - len(suffix)] for v in values]
    return {"individual": individual}


def encode(assignment: TopologyAssignment) -> dict[str, Any]:
    """The v1beta2 form: one slice, each level's values and the counts compacted."""
    out: dict[str, Any] = {"levels": list(assignment.levels), "slices": []}
    domains = assignment.domains
    if not domains:
        return out
    counts = [d.count for d in domains]
    out["slices"].append(
        {
            "domainCount": len(domains),
            "valuesPerLevel": [
                _compact_values([d.values[i] for d in domains])
                for i in range(len(assignment.levels))
            ],
            "podCounts": (
                {"universal": counts[0]}
                if all(c == counts[0] for c in counts)
                else {"individual": counts}
            ),
        }
    )
    return out


def decode(raw: Mapping[str, Any]) -> TopologyAssignment:
    """A v1beta2 topologyAssignment (schema-checked) as domains, slice by slice."""
    levels = tuple(str(level) for level in raw.get("levels") or ())
    domains: list[DomainAssignment] = []
    for piece in raw.get("slices") or ():
        n = int(piece.get("domainCount") or 0)
        per_level = piece.get("valuesPerLevel") or ()
        counts = piece.get("podCounts") or {}
        for i in range(n):
            values = []
            for level_values in per_level:
                if "universal" in level_values:
                    values.append(str(level_values["universal"]))
                else:
                    ind = level_values.get("individual") or {}
                    values.append(
                        f"{ind.get('prefix', '')}{ind['roots'][i]}{ind.get('suffix', '')}"
                    )
            count = counts["universal"] if "universal" in counts else counts["individual"][i]
            domains.append(DomainAssignment(tuple(values), int(count)))
    return TopologyAssignment(levels, tuple(domains))


def to_v1beta1(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A v1beta2 topologyAssignment in v1beta1's form: every domain listed."""
    assignment = decode(raw)
    return {
        "levels": list(assignment.levels),
        "domains": [{"values": list(d.values), "count": d.count} for d in assignment.domains],
    }


def from_v1beta1(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A v1beta1 topologyAssignment in v1beta2's compact form."""
    levels = tuple(str(level) for level in raw.get("levels") or ())
    domains = tuple(
        DomainAssignment(tuple(str(v) for v in d.get("values") or ()), int(d.get("count") or 0))
        for d in raw.get("domains") or ()
        if isinstance(d, Mapping)
    )
    return encode(TopologyAssignment(levels, domains))


def sorted_domains(domains: Iterable[DomainAssignment]) -> tuple[DomainAssignment, ...]:
    """Domains in Kueue's order: by their values, level by level."""
    return tuple(sorted(domains, key=lambda d: d.values))

"""What placement reads and decides: which resources are checked, nodes, pods and plans."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.core.api.labels import NodeSelectorTerm, Taint
from extender.core.api.quantity import QuantityError, to_amount


def is_extended_resource(name: str) -> bool:
    """Kubernetes' extended resources: a domain-prefixed name outside kubernetes.io (GPUs,
    TPUs, RDMA devices); cpu, memory, hugepages and storage are not."""
    if "/" not in name or name.startswith("hugepages-"):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def checked_resources(names: str | None) -> Callable[[str], bool]:
    """`--physical-resources`: a comma-separated list, or every extended resource when unset."""
    if names is None or not names.strip():
        return is_extended_resource
    chosen = frozenset(n.strip() for n in names.split(",") if n.strip())
    return chosen.__contains__


@dataclass(frozen=True, slots=True)
class Node:
    """What placement needs of a Node."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Mapping[str, int] = field(default_factory=dict)
    unschedulable: bool = False
    ready: bool = True

    @property
    def usable(self) -> bool:
        return self.ready and not self.unschedulable


def node_of(obj: Mapping[str, Any]) -> Node:
    """A v1 Node manifest as placement reads it (an unreadable amount counts as none)."""

    def m(value: Any) -> Mapping[str, Any]:
        return value if isinstance(value, Mapping) else {}

    meta, spec, status = m(obj.get("metadata")), m(obj.get("spec")), m(obj.get("status"))
    allocatable: dict[str, int] = {}
    for resource, value in m(status.get("allocatable")).items():
        try:
            allocatable[sys.intern(str(resource))] = to_amount(str(resource), value)
        except (QuantityError, ValueError, TypeError):
            continue
    taints = tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in spec.get("taints") or ()
        if isinstance(t, Mapping)
    )
    ready = any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )
    labels = {sys.intern(str(k)): sys.intern(str(v)) for k, v in m(meta.get("labels")).items()}
    name = str(meta.get("name") or "")
    return Node(name, labels, taints, allocatable, bool(spec.get("unschedulable")), ready)


@dataclass(frozen=True, slots=True)
class Pod:
    """A non-terminal pod bound to a node: its checked requests, and its Tower workload."""

    key: str  # namespace/name
    node: str
    requests: Mapping[str, int]
    workload: str | None = None  # namespace/name of the Workload it belongs to
    pod_set: str | None = None


@dataclass(frozen=True, slots=True)
class PlannedPodSet:
    """One podSet's part of a plan: each pod's checked requests, and pods per node."""

    requests: Mapping[str, int]
    nodes: Mapping[str, int]
    flavors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """Where the pods of one admitted workload go."""

    workload: str
    pod_sets: Mapping[str, PlannedPodSet]

    def as_annotation(self) -> dict[str, dict[str, int]]:
        """podSet -> node -> pods, the JSON kept on the Workload."""
        return {name: dict(sorted(ps.nodes.items())) for name, ps in sorted(self.pod_sets.items())}

    def nodes(self) -> Iterator[str]:
        for ps in self.pod_sets.values():
            yield from ps.nodes


def matches_affinity(terms: tuple[NodeSelectorTerm, ...], labels: Mapping[str, str]) -> bool:
    """A podSet's required node affinity against a node's labels (no terms: any node)."""
    if not terms:
        return True
    return any(all(r.matches(labels) for r in term.match_expressions) for term in terms)

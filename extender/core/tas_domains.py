"""The domains of a Topology for one flavor: the tree of nodes, and what each can take.

A leaf is a host when the lowest level is kubernetes.io/hostname, else every node with the
same labels. Its room is its nodes' allocatable, less what pods outside topology-aware
scheduling use, less what admitted topology-aware workloads hold there (`use`). `fill_counts`
counts, bottom-up, how many pods (and slices) of one podSet each domain can take, as Kueue
v0.19.2's fillInCounts does; tas_placement.py searches those counts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from extender.core.labels import NodeSelectorTerm, Taint, Toleration, tolerated
from extender.core.placement_model import Node, matches_affinity
from extender.core.tas_model import (
    SliceLayer,
    Topology,
    TopologyAssignment,
    TopologyRequest,
)

PODS = "pods"  # every pod takes one of a node's `pods` allocatable
MAX_COUNT = 2**31 - 1
_SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")

Requests = Mapping[str, int]


def count_in(requests: Requests, room: Requests) -> tuple[int, str]:
    """How many times `requests` fits in `room`, and the resource that limits it (ties: the
    alphabetically first), as Kueue's CountInWithLimitingResource."""
    best: int | None = None
    limiting = ""
    for resource, amount in requests.items():
        fits = MAX_COUNT if amount == 0 else max(0, min(room.get(resource, 0) // amount, MAX_COUNT))
        if best is None or fits < best or (fits == best and resource < limiting):
            best, limiting = fits, resource
    return (best or 0), limiting


def minus(room: dict[str, int], used: Requests, times: int = 1) -> None:
    for resource, amount in used.items():
        room[resource] = room.get(resource, 0) - amount * times


def with_pod(requests: Requests) -> dict[str, int]:
    """A pod's requests and the one `pods` slot it takes."""
    out = dict(requests)
    out[PODS] = out.get(PODS, 0) + 1
    return out


@dataclass(frozen=True, slots=True)
class PodSetPlacement:
    """One podSet to place: its pods' requests and constraints and its topology request."""

    name: str
    count: int
    requests: Requests  # one pod's, without the `pods` slot
    request: TopologyRequest
    implied: bool = False  # no request of its own, in a ClusterQueue of topology flavors only
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


class Domain:
    """A domain of the tree, with the counts of the current placement (reset each time)."""

    __slots__ = (
        "children",
        "free",
        "id",
        "leaders",
        "level",
        "node",
        "pods",
        "pods_with_leader",
        "slices",
        "slices_with_leader",
        "values",
    )

    def __init__(self, id_: str, values: tuple[str, ...], level: int) -> None:
        self.id = id_
        self.values = values
        self.level = level
        self.children: list[Domain] = []
        self.node: Node | None = None  # a host leaf's node: the pod's constraints are checked
        self.free: dict[str, int] = {}  # a leaf's allocatable less what other pods use
        self.pods = self.pods_with_leader = self.slices = self.slices_with_leader = 0
        self.leaders = 0


@dataclass(slots=True)
class Stats:
    """Why leaves were left out, for the refusal's "excluded:" list."""

    total: int = 0
    node_selector: int = 0
    affinity: int = 0
    topology_domain: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)

    def suffix(self) -> str:
        if not (
            self.node_selector
            or self.affinity
            or self.taints
            or self.topology_domain
            or self.resources
        ):
            return ""
        reasons = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        if self.topology_domain:
            reasons.append(f"topologyDomain: {self.topology_domain}")
        reasons += [f'taint "{t}": {n}' for t, n in self.taints.items()]
        reasons += [f'resource "{r}": {n}' for r, n in self.resources.items()]
        return f". Total nodes: {self.total}; excluded: {', '.join(sorted(reasons))}"


def _taint_text(taint: Taint) -> str:
    if taint.value:
        return f"{taint.key}={taint.value}:{taint.effect}"
    return f"{taint.key}:{taint.effect}"


@dataclass(slots=True)
class Search:
    """One podSet (and its leader) being placed: what is asked and what was found."""

    count: int
    leaders: int
    slice_size: int
    slice_level: int
    required: bool
    unconstrained: bool  # Kueue's LeastFreeCapacity (TASProfileMixed, on by default)
    inner_sizes: dict[int, int]  # level -> slice size of an inner slice layer
    layers: tuple[SliceLayer, ...]  # the multi-layer constraints, when there are inner ones
    stats: Stats = field(default_factory=Stats)


class TopologyDomains:
    """One topology-aware flavor's nodes as domains, and what is used on them.

    Not thread-safe. `use` keeps what admitted workloads hold; the counts of a placement are
    reset by each `fill_counts`."""

    def __init__(
        self,
        topology: Topology,
        nodes: Iterable[Node],
        tolerations: tuple[Toleration, ...] = (),
        other_usage: Mapping[str, Requests] | None = None,
    ) -> None:
        """`nodes`: the flavor's usable nodes that carry every level's label; `other_usage`:
        per node, what pods outside topology-aware scheduling request (their `pods` too)."""
        self.name = topology.name
        self.levels = topology.levels
        self.hostname_lowest = topology.hostname_lowest
        self.tolerations = tolerations
        self.by_level: list[dict[str, Domain]] = [{} for _ in self.levels]
        self.leaves: dict[str, Domain] = {}
        self.used: dict[str, dict[str, int]] = {}  # leaf id -> held by admitted workloads
        other = other_usage or {}
        last = len(self.levels) - 1
        for node in nodes:
            values = tuple(node.labels[key] for key in self.levels)
            leaf_id = values[-1] if self.hostname_lowest else ",".join(values)
            leaf = self.by_level[last].get(leaf_id)
            if leaf is None:
                leaf = self._add(values, last, leaf_id)
            if self.hostname_lowest:
                leaf.node = node
            for resource, amount in node.allocatable.items():
                leaf.free[resource] = leaf.free.get(resource, 0) + amount
            minus(leaf.free, other.get(node.name, {}))
        self.roots = (
            sorted(self.by_level[0].values(), key=lambda d: d.values) if self.levels else []
        )

    def _add(self, values: tuple[str, ...], level: int, id_: str | None = None) -> Domain:
        domain = Domain(id_ if id_ is not None else ",".join(values[: level + 1]), values, level)
        self.by_level[level][domain.id] = domain
        if level == len(self.levels) - 1:
            self.leaves[domain.id] = domain
        if level > 0:
            parent_id = ",".join(values[:level])
            parent = self.by_level[level - 1].get(parent_id)
            if parent is None:
                parent = self._add(values[:level], level - 1)
            parent.children.append(domain)
        return domain

    def leaf_of(self, values: Sequence[str]) -> Domain | None:
        """The leaf an assignment's domain names (its hostname, or every level's value)."""
        key = values[-1] if self.hostname_lowest else ",".join(values)
        return self.leaves.get(key)

    def use(self, assignment: TopologyAssignment, requests: Requests, sign: int = 1) -> None:
        """Hold (or, with sign -1, give back) one podSet's pods on its domains; a domain with
        no leaf here (its node left) holds nothing."""
        per_pod = with_pod(requests)
        for domain in assignment.domains:
            leaf = self.leaf_of(domain.values)
            if leaf is None:
                continue
            used = self.used.setdefault(leaf.id, {})
            for resource, amount in per_pod.items():
                used[resource] = used.get(resource, 0) + sign * amount * domain.count

    def fill_counts(
        self,
        workers: PodSetPlacement,
        leader: PodSetPlacement | None,
        assumed: Mapping[str, Requests],
        simulate_empty: bool,
        within: str | None,
        search: Search,
    ) -> None:
        for domains in self.by_level:
            for d in domains.values():
                d.pods = d.pods_with_leader = d.slices = d.slices_with_leader = d.leaders = 0
        stats = search.stats
        worker_req = with_pod(workers.requests)
        leader_req = with_pod(leader.requests) if leader is not None else None
        tolerations = workers.tolerations + self.tolerations
        stats.total += len(self.leaves)
        for leaf in self.leaves.values():
            node = leaf.node
            if node is not None and not self._admits(node, workers, tolerations, stats):
                continue
            if within is not None:
                path = ",".join(leaf.values)
                if path != within and not path.startswith(within + ","):
                    stats.topology_domain += 1
                    continue
            room = dict(leaf.free)
            if not simulate_empty:
                minus(room, self.used.get(leaf.id, {}))
            minus(room, assumed.get(leaf.id, {}))
            leaf.pods, limiting = count_in(worker_req, room)
            if leaf.pods == 0 and limiting:
                stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
            if leader_req is not None and count_in(leader_req, room)[0] > 0:
                leaf.leaders = 1
                minus(room, leader_req)
            leaf.pods_with_leader = count_in(worker_req, room)[0]
        for root in self.roots:
            self._count(root, search)

    @staticmethod
    def _admits(
        node: Node, pod_set: PodSetPlacement, tolerations: tuple[Toleration, ...], stats: Stats
    ) -> bool:
        """A host leaf's node against the pods' taints, nodeSelector and required affinity."""
        for taint in node.taints:
            if taint.effect in _SCHEDULING_EFFECTS and not tolerated(taint, tolerations):
                text = _taint_text(taint)
                stats.taints[text] = stats.taints.get(text, 0) + 1
                return False
        labels = node.labels
        if any(labels.get(k) != v for k, v in pod_set.node_selector.items()):
            stats.node_selector += 1
            return False
        if not matches_affinity(pod_set.required_terms, labels):
            stats.affinity += 1
            return False
        return True

    def _count(self, domain: Domain, search: Search) -> None:
        size = search.slice_size
        if not domain.children:
            if domain.level == search.slice_level:
                domain.slices = domain.pods // size
                domain.slices_with_leader = domain.pods_with_leader // size
            return
        inner = search.inner_sizes.get(domain.level + 1)
        pods = slices = leaders = 0
        contributes = False
        least_pod_loss = least_slice_loss = MAX_COUNT
        for child in domain.children:
            self._count(child, search)
            child_pods, child_with_leader = child.pods, child.pods_with_leader
            if inner:
                child_pods = child_pods // inner * inner
                child_with_leader = child_with_leader // inner * inner
            pods += child_pods
            slices += child.slices
            if not search.leaders or child.leaders > 0:
                contributes = True
                least_pod_loss = min(least_pod_loss, child_pods - child_with_leader)
                least_slice_loss = min(least_slice_loss, child.slices - child.slices_with_leader)
            leaders = max(leaders, child.leaders)
        domain.pods = pods
        slices_with_leader = 0
        if contributes:
            domain.pods_with_leader = pods - least_pod_loss
            slices_with_leader = slices - least_slice_loss
        else:
            domain.pods_with_leader = 0
        domain.leaders = leaders
        if domain.level == search.slice_level:
            slices = domain.pods // size
            slices_with_leader = domain.pods_with_leader // size
        domain.slices = slices
        domain.slices_with_leader = slices_with_leader

"""The domains of a Topology for one flavor: the tree of nodes, and what each can take.

A leaf is a host when the lowest level is kubernetes.io/hostname, else every node with the
same labels. Its room is its nodes' allocatable, less what pods outside topology-aware
scheduling use, less what admitted topology-aware workloads hold there (`use`). `counts_for`
counts, bottom-up, how many pods (and slices) of one podSet each domain can take, as Kueue
v0.19.2's fillInCounts does; tas/placement.py searches those counts.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from extender.core.api.labels import NodeSelectorTerm, Taint, Toleration, tolerated
from extender.core.api.topology import (
    SliceLayer,
    Topology,
    TopologyAssignment,
    TopologyRequest,
)
from extender.core.placement.model import Node, matches_affinity

PODS = "pods"  # every pod takes one of a node's `pods` allocatable
MAX_COUNT = 2**31 - 1
_SCHEDULING_EFFECTS = ("NoSchedule", "NoExecute")

Requests = Mapping[str, int]


def count_in(requests: Requests, room: Requests) -> tuple[int, str]:
    """How many times `requests` fits in `room`, and the resource that limits it (ties: the
    alphabetically first), as Kueue's CountInWithLimitingResource."""
    best = -1
    limiting = ""
    get = room.get
    for resource, amount in requests.items():
        if amount == 0:
            fits = MAX_COUNT
        else:
            fits = get(resource, 0) // amount
            if fits < 0:
                fits = 0
            elif fits > MAX_COUNT:
                fits = MAX_COUNT
        if best < 0 or fits < best or (fits == best and resource < limiting):
            best, limiting = fits, resource
    return (best if best > 0 else 0), limiting


def fits_in(items: Sequence[tuple[str, int]], room: Requests) -> tuple[int, str]:
    """`count_in` for requests given as (resource, amount) pairs sorted by resource, every
    amount above zero (`positive_items`): the same count, and the same limiting resource
    whenever the count is 0. The hot path of counting a leaf."""
    best, limiting = MAX_COUNT, ""
    get = room.get
    for resource, amount in items:
        fits = get(resource, 0) // amount
        if fits < best:
            if fits <= 0:
                return 0, resource  # sorted: no later resource is limiting on a tie at 0
            best, limiting = fits, resource
    return best, limiting


def positive_items(requests: Requests) -> tuple[tuple[str, int], ...]:
    """The requests `fits_in` takes: sorted by resource, without zero amounts."""
    return tuple(sorted((r, a) for r, a in requests.items() if a > 0))


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
        "parent",
        "pods",
        "pods_with_leader",
        "room",
        "slices",
        "slices_with_leader",
        "values",
    )

    def __init__(self, id_: str, values: tuple[str, ...], level: int) -> None:
        self.id = id_
        self.values = values
        self.level = level
        self.children: list[Domain] = []
        self.parent: Domain | None = None
        self.node: Node | None = None  # a host leaf's node: the pod's constraints are checked
        self.free: dict[str, int] = {}  # a leaf's allocatable less what other pods use
        self.room: dict[str, int] = {}  # and less what admitted workloads hold (`use`)
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
    counts: Counts | None = None  # what each domain can take (`counts_for`)


class TopologyDomains:
    """One topology-aware flavor's nodes as domains, and what is used on them.

    Not thread-safe. `use` keeps what admitted workloads hold; `counts_for` what each domain
    can take of one request, kept current as usage changes."""

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
        self._counts: dict[tuple[object, ...], Counts] = {}  # per request, kept current
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
        for leaf in self.leaves.values():
            leaf.room = dict(leaf.free)
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
            domain.parent = parent
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
            room = leaf.room
            for resource, amount in per_pod.items():
                taken = sign * amount * domain.count
                used[resource] = used.get(resource, 0) + taken
                room[resource] = room.get(resource, 0) - taken
            for counts in self._counts.values():
                if not counts.empty:  # counted on free room, which holds do not change
                    counts.dirty.add(leaf)

    def other_use(self, node: Node, requests: Requests, sign: int) -> None:
        """A pod outside topology-aware scheduling came to (1) or left (-1) this node: its
        leaf's room changes, and with it the kept counts of that leaf."""
        leaf = self.leaf_of(tuple(node.labels.get(level, "") for level in self.levels))
        if leaf is None:
            return
        free, room = leaf.free, leaf.room
        for resource, amount in requests.items():
            free[resource] = free.get(resource, 0) - sign * amount
            room[resource] = room.get(resource, 0) - sign * amount
        for counts in self._counts.values():
            counts.dirty.add(leaf)

    # ----- what each domain can take, for one request --------------------------------------

    def counts_for(
        self,
        workers: PodSetPlacement,
        leader: PodSetPlacement | None,
        assumed: Mapping[str, Requests],
        simulate_empty: bool,
        within: str | None,
        search: Search,
    ) -> Counts:
        """How many pods (slices, leaders) of this request each domain can take. Kept per
        request and brought up to date from the leaves whose room changed since, so a
        placement costs what changed, not the whole tree; a placement with assumed usage, a
        restriction to one domain is counted afresh. Counts on empty domains (usage
        ignored, Kueue's simulateEmpty) are kept too: only pods outside topology-aware
        scheduling and nodes change them."""
        worker_req = with_pod(workers.requests)
        leader_req = with_pod(leader.requests) if leader is not None else None
        filters = (
            (
                tuple(sorted(workers.node_selector.items())),
                workers.required_terms,
                workers.tolerations,
            )
            if self.hostname_lowest
            else None
        )
        fresh = bool(assumed) or within is not None
        key = (
            tuple(sorted(worker_req.items())),
            tuple(sorted(leader_req.items())) if leader_req is not None else None,
            filters,
            search.slice_size,
            search.slice_level,
            tuple(sorted(search.inner_sizes.items())),
            simulate_empty,
        )
        counts = None if fresh else self._counts.get(key)
        if counts is None:
            counts = Counts(worker_req, leader_req, workers, self.tolerations + workers.tolerations)
            counts.empty = simulate_empty
            counts.search = search
            room_of = self._room_of(assumed, simulate_empty)
            for leaf in self.leaves.values():
                self._count_leaf(leaf, counts, room_of, within, search)
            for root in self.roots:
                self._count_subtree(root, counts, search)
            if not fresh:
                if len(self._counts) >= _KEPT_COUNTS:
                    self._counts.pop(next(iter(self._counts)))
                self._counts[key] = counts
                counts.kept = True
        elif counts.dirty:
            self._refresh(counts)
        counts.uses += 1
        return counts

    def settle(self) -> None:
        """Bring every kept count up to date now (a workload's hold was given back): the
        work is done when the room changes, for the hosts it changed on, so the next cycle
        finds the counts current."""
        for counts in self._counts.values():
            if counts.dirty:
                self._refresh(counts)

    def _refresh(self, counts: Counts) -> None:
        """Recount a kept count's dirty leaves, then their ancestors: by the change in pods
        and slices up each leaf's path when no leader or inner slice layer makes a parent
        more than its children's sum, else each ancestor afresh (the deepest first). Only
        what changed is reindexed."""
        search = counts.search
        assert search is not None
        room_of = self._room_of({}, counts.empty)
        records = counts.records
        changed: set[Domain] = set()
        summed = counts.leader_req is None and not search.inner_sizes
        size, slice_level = search.slice_size, search.slice_level
        for leaf in counts.dirty:
            record = records.get(leaf)
            before = tuple(record) if record is not None else (0, 0, 0, 0, 0)
            self._count_leaf(leaf, counts, room_of, None, search)
            record = records[leaf]
            if before == tuple(record):
                continue
            pods, slices = record[0] - before[0], record[2] - before[2]
            changed.add(leaf)
            parent = leaf.parent
            if not summed:
                while parent is not None and parent not in changed:
                    changed.add(parent)
                    parent = parent.parent
                continue
            while parent is not None and (pods or slices):
                up = records[parent]
                up[0] += pods
                if parent.level == slice_level:
                    whole = up[0] // size
                    slices, up[2] = whole - up[2], whole
                else:
                    up[2] += slices
                up[1], up[3] = up[0], up[2]  # no leader: "with the leader" is the same
                changed.add(parent)
                parent = parent.parent
        counts.dirty.clear()
        if not summed:
            for parent in sorted((d for d in changed if d.children), key=_deepest_first):
                self._count_parent(parent, counts, search)
        if counts.index:
            for domain in changed:
                counts.reindex(domain)

    def marks(self) -> dict[tuple[object, ...], tuple[Counts, int, frozenset[Domain]]]:
        """Each kept count's dirty hosts, and how often it was read so far."""
        return {k: (c, c.uses, frozenset(c.dirty)) for k, c in self._counts.items()}

    def restore_marks(
        self, saved: Mapping[tuple[object, ...], tuple[Counts, int, frozenset[Domain]]]
    ) -> None:
        """Usage taken off and put back: a kept count not read meanwhile is as it was."""
        for key, counts in self._counts.items():
            before = saved.get(key)
            if before is not None and before[0] is counts and before[1] == counts.uses:
                counts.dirty = set(before[2])

    def _room_of(
        self, assumed: Mapping[str, Requests], simulate_empty: bool
    ) -> Callable[[Domain], Mapping[str, int]]:
        def room_of(leaf: Domain) -> Mapping[str, int]:
            room = leaf.free if simulate_empty else leaf.room
            held = assumed.get(leaf.id) if assumed else None
            if held:
                room = dict(room)
                minus(room, held)
            return room

        return room_of

    def _count_leaf(
        self,
        leaf: Domain,
        counts: Counts,
        room_of: Callable[[Domain], Mapping[str, int]],
        within: str | None,
        search: Search,
    ) -> None:
        """A leaf's record, and why it is excluded when it is (for a refusal's message)."""
        record = counts.records.get(leaf)
        if record is None:
            record = counts.records[leaf] = [0, 0, 0, 0, 0]
        node = leaf.node
        if node is not None and (node.taints or counts.constrained):
            why = _excluded(node, counts.pod_set, counts.tolerations)
            if why is not None:
                record[:] = (0, 0, 0, 0, 0)
                counts.exclude(leaf, why)
                return
        if within is not None:
            path = ",".join(leaf.values)
            if path != within and not path.startswith(within + ","):
                record[:] = (0, 0, 0, 0, 0)
                counts.exclude(leaf, ("topologyDomain", ""))
                return
        room = room_of(leaf)
        leader_req = counts.leader_req
        pods, limiting = fits_in(counts.worker_items, room)
        pods_with_leader, leaders = pods, 0
        if leader_req is not None:
            room = dict(room)  # the leader's share comes off
            if count_in(leader_req, room)[0] > 0:
                leaders = 1
                minus(room, leader_req)
            pods_with_leader = fits_in(counts.worker_items, room)[0]
        if pods == 0:
            counts.exclude(leaf, ("resource", limiting))
        elif leaf in counts.excluded:
            counts.include(leaf)
        if leaf.level == search.slice_level:
            size = search.slice_size
            record[:] = (pods, pods_with_leader, pods // size, pods_with_leader // size, leaders)
        else:
            record[:] = (pods, pods_with_leader, 0, 0, leaders)

    def _count_subtree(self, domain: Domain, counts: Counts, search: Search) -> None:
        if not domain.children:
            return
        for child in domain.children:
            self._count_subtree(child, counts, search)
        self._count_parent(domain, counts, search)

    def _count_parent(self, domain: Domain, counts: Counts, search: Search) -> None:
        """A parent's record from its children's (Kueue's fillInCountsHelper)."""
        records = counts.records
        inner = search.inner_sizes.get(domain.level + 1)
        pods = slices = leaders = 0
        contributes = False
        least_pod_loss = least_slice_loss = MAX_COUNT
        need_leader = search.leaders > 0
        for child in domain.children:
            c_pods, c_with_leader, c_slices, c_slices_with_leader, c_leaders = records[child]
            if inner:
                c_pods = c_pods // inner * inner
                c_with_leader = c_with_leader // inner * inner
            pods += c_pods
            slices += c_slices
            if not need_leader or c_leaders > 0:
                contributes = True
                loss = c_pods - c_with_leader
                if loss < least_pod_loss:
                    least_pod_loss = loss
                loss = c_slices - c_slices_with_leader
                if loss < least_slice_loss:
                    least_slice_loss = loss
            if c_leaders > leaders:
                leaders = c_leaders
        pods_with_leader = slices_with_leader = 0
        if contributes:
            pods_with_leader = pods - least_pod_loss
            slices_with_leader = slices - least_slice_loss
        if domain.level == search.slice_level:
            slices = pods // search.slice_size
            slices_with_leader = pods_with_leader // search.slice_size
        record = records.get(domain)
        if record is None:
            records[domain] = [pods, pods_with_leader, slices, slices_with_leader, leaders]
        else:
            record[:] = (pods, pods_with_leader, slices, slices_with_leader, leaders)

    def stats_of(self, counts: Counts) -> Stats:
        """Why leaves are left out, as a refusal words it (Kueue's exclusion stats), from
        the tally the count keeps as leaves are excluded and let back in."""
        stats = Stats(total=len(self.leaves))
        for (kind, detail), leaves in counts.tally.items():
            if kind == "nodeSelector":
                stats.node_selector += leaves
            elif kind == "affinity":
                stats.affinity += leaves
            elif kind == "topologyDomain":
                stats.topology_domain += leaves
            elif kind == "taint":
                stats.taints[detail] = stats.taints.get(detail, 0) + leaves
            else:
                stats.resources[detail] = stats.resources.get(detail, 0) + leaves
        return stats


def _deepest_first(domain: Domain) -> int:
    return -domain.level


_KEPT_COUNTS = 32  # requests whose counts are kept up to date at once (the oldest goes)


class Counts:
    """One request's counts on every domain: [pods, pods with the leader, slices, slices with
    the leader, leaders], kept up to date from the leaves whose room changed (`dirty`)."""

    __slots__ = (
        "by_values",
        "constrained",
        "dirty",
        "empty",
        "excluded",
        "index",
        "kept",
        "keys",
        "leader_req",
        "pod_set",
        "records",
        "search",
        "tally",
        "tolerations",
        "uses",
        "worker_items",
        "worker_req",
    )

    def __init__(
        self,
        worker_req: Requests,
        leader_req: Requests | None,
        pod_set: PodSetPlacement,
        tolerations: tuple[Toleration, ...],
    ) -> None:
        self.worker_req = worker_req
        self.worker_items = positive_items(worker_req)
        self.leader_req = leader_req
        self.pod_set = pod_set
        self.tolerations = tolerations
        # Only a host's node is checked against the pods (Kueue checks nothing on a leaf of
        # many nodes), and only when something could exclude it.
        self.constrained = bool(pod_set.node_selector or pod_set.required_terms)
        self.records: dict[Domain, list[int]] = {}
        self.excluded: dict[Domain, tuple[str, str]] = {}
        self.tally: dict[tuple[str, str], int] = {}  # leaves excluded, per reason
        self.search: Search | None = None  # the shape counted (to recount dirty leaves)
        self.dirty: set[Domain] = set()
        self.kept = False  # kept current across placements (then worth an index)
        self.empty = False  # counted on free room (usage ignored: Kueue's simulateEmpty)
        self.uses = 0  # how often a placement read it
        # Per level asked for, its domains by (slices, pods, values): the tightest that
        # holds a count is found by bisection, and kept in order as records change.
        self.index: dict[int, list[tuple[int, int, tuple[str, ...]]]] = {}
        self.keys: dict[Domain, tuple[int, int, tuple[str, ...]]] = {}
        self.by_values: dict[tuple[str, ...], Domain] = {}

    def exclude(self, leaf: Domain, why: tuple[str, str]) -> None:
        old = self.excluded.get(leaf)
        if old == why:
            return
        if old is not None:
            self._untally(old)
        self.excluded[leaf] = why
        self.tally[why] = self.tally.get(why, 0) + 1

    def include(self, leaf: Domain) -> None:
        old = self.excluded.pop(leaf, None)
        if old is not None:
            self._untally(old)

    def _untally(self, why: tuple[str, str]) -> None:
        left = self.tally[why] - 1
        if left:
            self.tally[why] = left
        else:
            del self.tally[why]

    def tightest(self, domains: Iterable[Domain], level: int, need: int) -> Domain | None:
        """The domain of the level with the fewest slices (then pods, then values) that
        still holds `need` slices, from the level's index (built when first asked)."""
        ordered = self.index.get(level)
        if ordered is None:
            records, keys, by_values = self.records, self.keys, self.by_values
            ordered = []
            for d in domains:
                record = records[d]
                key = keys[d] = (record[2], record[0], d.values)
                by_values[d.values] = d
                ordered.append(key)
            ordered.sort()
            self.index[level] = ordered
        at = bisect_left(ordered, (need,))
        return self.by_values[ordered[at][2]] if at < len(ordered) else None

    def reindex(self, domain: Domain) -> None:
        """A domain's record changed: its place in its level's index follows."""
        old = self.keys.get(domain)
        if old is None:
            return
        record = self.records[domain]
        if old[0] == record[2] and old[1] == record[0]:
            return
        ordered = self.index[domain.level]
        del ordered[bisect_left(ordered, old)]
        new = self.keys[domain] = (record[2], record[0], domain.values)
        insort(ordered, new)

    def load(self, domains: Iterable[Domain]) -> None:
        """These domains' counts into their working fields (a placement changes those)."""
        records = self.records
        for d in domains:
            d.pods, d.pods_with_leader, d.slices, d.slices_with_leader, d.leaders = records[d]


def _excluded(
    node: Node, pod_set: PodSetPlacement, tolerations: tuple[Toleration, ...]
) -> tuple[str, str] | None:
    """Why a host's node cannot take the pods (its taints, nodeSelector, required affinity)."""
    for taint in node.taints:
        if taint.effect in _SCHEDULING_EFFECTS and not tolerated(taint, tolerations):
            return ("taint", _taint_text(taint))
    labels = node.labels
    if any(labels.get(k) != v for k, v in pod_set.node_selector.items()):
        return ("nodeSelector", "")
    if not matches_affinity(pod_set.required_terms, labels):
        return ("affinity", "")
    return None

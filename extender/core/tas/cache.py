"""Kueue's TAS cache: each topology flavor's domains, and what admitted workloads hold there.

The room of a domain is its nodes' allocatable (Ready and schedulable nodes with the flavor's
labels and every level's label), less what pods outside topology-aware scheduling request
there, less what admitted topology-aware workloads hold. Snapshots of a flavor's domains are
built when first asked for and dropped when what they are built from changes; holds are
applied to them as they change. The cycle's check on it is `scheduling.TopologyScheduling`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from extender.core.api.models import ResourceFlavor
from extender.core.api.topology import HOSTNAME, Topology, TopologyAssignment
from extender.core.placement.model import Node
from extender.core.tas.node_failure import plainly_healthy
from extender.core.tas.placement import TopologySnapshot, with_pod


@dataclass(frozen=True, slots=True)
class Held:
    """One podSet's pods placed on a topology flavor's domains."""

    flavor: str
    pod_set: str
    assignment: TopologyAssignment
    requests: Mapping[str, int]  # one pod's


class TopologyCache:
    """Every topology flavor's domains, built from nodes, other pods and Topologies, and
    what admitted workloads hold on them (Kueue's TAS cache).

    Not thread-safe: the caller holds one lock around it. Snapshots are built when first
    asked for and dropped when what they are built from changes (a node, a pod outside
    topology-aware scheduling, a flavor, a Topology); holds are applied as they change."""

    def __init__(self) -> None:
        self.topologies: dict[str, Topology] = {}
        self.flavors: dict[str, ResourceFlavor] = {}  # the topology flavors
        self.nodes: dict[str, Node] = {}
        self._hosts: dict[str, str] = {}  # kubernetes.io/hostname label -> node name
        self._other: dict[str, dict[str, int]] = {}  # node -> what other pods request there
        self._pods: dict[str, tuple[str, Mapping[str, int]]] = {}  # pod -> (node, requests)
        self.held: dict[str, tuple[Held, ...]] = {}  # workload key -> its holds
        self._snapshots: dict[str, TopologySnapshot] = {}
        self._waiting: dict[str, tuple[str, frozenset[str]]] = {}  # workload -> (CQ, flavors)
        self.grown: set[str] = set()  # topology flavors whose room grew
        self.disturbed: set[str] = set()  # workloads to judge again on their hosts
        self._gone: set[str] = set()  # hosts deleted while a workload was placed there
        self._placed_on: dict[str, tuple[tuple[Held, ...], frozenset[str]]] = {}
        self._reserved: list[str] = []  # holds that last until the cycle ends

    def set_topologies(self, topologies: Iterable[Topology]) -> None:
        fresh = {t.name: t for t in topologies}
        if fresh != self.topologies:
            self.topologies = fresh
            self._snapshots.clear()
            self.grown.update(self.flavors)

    def set_flavors(self, flavors: Iterable[ResourceFlavor]) -> None:
        fresh = {f.name: f for f in flavors if f.topology_name}
        if fresh != self.flavors:
            self.flavors = fresh
            self._snapshots.clear()
            self.grown.update(fresh)

    def set_node(self, node: Node) -> None:
        old = self.nodes.get(node.name)
        if old == node:
            return
        self.nodes[node.name] = node
        self._hosts[node.labels.get(HOSTNAME, node.name)] = node.name
        self._changed_on(node, old)

    def delete_node(self, name: str) -> None:
        old = self.nodes.pop(name, None)
        if old is not None:
            self._changed_on(old, old)

    def set_pod(self, key: str, node: str | None, requests: Mapping[str, int] | None) -> None:
        """A pod's usage outside topology-aware scheduling: bound to `node` and running
        (requests given), or gone, terminated or a topology-aware pod (None)."""
        old = self._pods.pop(key, None)
        new = None
        if node is not None and requests is not None:
            new = self._pods[key] = (node, with_pod(requests))
        if old == new:
            return
        # The change is applied to the snapshots in place (their kept counts follow the
        # host), not by building them again: pods come and go all the time.
        for change, sign in ((old, -1), (new, 1)):
            if change is None:
                continue
            self._add_other(change[0], change[1], sign)
            known = self.nodes.get(change[0])
            if known is None:
                continue
            for name, snap in self._snapshots.items():
                if self.member(self.flavors[name], known):
                    snap.other_use(known, change[1], sign)
                    if sign < 0:
                        self.grown.add(name)

    def _add_other(self, node: str, requests: Mapping[str, int], sign: int) -> None:
        used = self._other.setdefault(node, {})
        for resource, amount in requests.items():
            used[resource] = used.get(resource, 0) + sign * amount
            if not used[resource]:
                del used[resource]
        if not used:
            del self._other[node]

    def _changed_on(self, node: Node, old: Node | None) -> None:
        # A host gone, back, or whose readiness or taints changed, is judged again for the
        # workloads placed on it (node_failure.py); a cordoned one keeps its running pods.
        host = node.labels.get(HOSTNAME, node.name)
        if old is None:
            if host in self._gone:  # it came back: a record of it may be taken back
                self._gone.discard(host)
                self._host_failed(host)
        elif node is old or old.ready != node.ready or old.taints != node.taints:
            placed = self._host_failed(old.labels.get(HOSTNAME, old.name))
            if node is old and placed:
                self._gone.add(host)
        for name, flavor in self.flavors.items():
            if self.member(flavor, node) or (old is not None and self.member(flavor, old)):
                self._snapshots.pop(name, None)
                self.grown.add(name)

    def member(self, flavor: ResourceFlavor, node: Node) -> bool:
        topology = self.topologies.get(flavor.topology_name or "")
        labels = node.labels
        return (
            topology is not None
            and node.usable
            and all(labels.get(k) == v for k, v in flavor.node_labels.items())
            and all(level in labels for level in topology.levels)
        )

    def snapshot(self, flavor_name: str) -> TopologySnapshot | None:
        """The flavor's domains with what is held on them (None: no such Topology)."""
        snap = self._snapshots.get(flavor_name)
        if snap is not None:
            return snap
        flavor = self.flavors.get(flavor_name)
        topology = self.topologies.get(flavor.topology_name or "") if flavor else None
        if flavor is None or topology is None:
            return None
        nodes = [n for n in self.nodes.values() if self.member(flavor, n)]
        snap = TopologySnapshot(topology, nodes, flavor.tolerations, self._other)
        for holds in self.held.values():
            for held in holds:
                if self._shares(held.flavor, flavor_name, snap):
                    snap.use(held.assignment, held.requests)
        self._snapshots[flavor_name] = snap
        return snap

    def _shares(self, held_flavor: str, flavor: str, snap: TopologySnapshot) -> bool:
        """Whether what is held in `held_flavor` takes room in `flavor`: its own, and, on
        hosts, another topology flavor's on the same host (Kueue's overlapping flavors)."""
        if held_flavor == flavor:
            return True
        other = self.flavors.get(held_flavor)
        topology = self.topologies.get(other.topology_name or "") if other else None
        return snap.hostname_lowest and topology is not None and topology.hostname_lowest

    def pod_left(self, workload: str, node: str) -> None:
        """A pod of a placed workload stopped running on a node (it terminated, or is being
        deleted, or is gone): the workload is judged again if the node is not plainly
        healthy, for Kueue waits for that to call a NotReady or tainted node failed."""
        known = self.nodes.get(node)
        if workload in self.held and (
            known is None or not plainly_healthy(known.ready, known.taints)
        ):
            self.disturbed.add(workload)

    def pod_held_to(self, workload: str, host: str) -> None:
        """A pod of a placed workload waits, unbound, for the host its nodeSelector names: the
        workload is looked at again if that host is not plainly healthy or not one of its
        assignment's (Kueue fails such late pods)."""
        holds = self.held.get(workload)
        if not holds:
            return
        known = self.nodes.get(self._hosts.get(host, host))
        if host not in self._hosts_of(workload, holds) or (
            known is None or not plainly_healthy(known.ready, known.taints)
        ):
            self.disturbed.add(workload)

    def _hosts_of(self, workload: str, holds: tuple[Held, ...]) -> frozenset[str]:
        """The hosts a workload is placed on, kept while its holds are the same (each of its
        pods asks, once let through)."""
        memo = self._placed_on.get(workload)
        if memo is None or memo[0] is not holds:
            hosts = frozenset(d.values[-1] for h in holds for d in h.assignment.domains)
            memo = self._placed_on[workload] = (holds, hosts)
        return memo[1]

    def _host_failed(self, host: str) -> bool:
        """The workloads placed on a host are judged again; whether there were any."""
        found = False
        for key, holds in self.held.items():
            if any(d.values[-1] == host for h in holds for d in h.assignment.domains):
                self.disturbed.add(key)
                found = True
        return found

    def hold(self, key: str, holds: Iterable[Held]) -> None:
        """What an admitted workload holds (read from its Workload, or assumed in a cycle)."""
        holds = tuple(holds)
        if self.held.get(key) == holds:
            return
        self.release(key)
        if holds:
            self.held[key] = holds
            self._apply(holds, 1)

    def release(self, key: str) -> None:
        """The workload's quota is freed: so is its room on the domains."""
        self._waiting.pop(key, None)
        self._placed_on.pop(key, None)
        holds = self.held.pop(key, None)
        if holds:
            self._apply(holds, -1)
            self.grown.update(h.flavor for h in holds)
            for snap in self._snapshots.values():
                snap.settle()  # recounted now, for the hosts it left, not in the next cycle

    def _apply(self, holds: tuple[Held, ...], sign: int) -> None:
        for name, snap in self._snapshots.items():
            for held in holds:
                if self._shares(held.flavor, name, snap):
                    snap.use(held.assignment, held.requests, sign)

    def _apply_among(
        self, snaps: Mapping[str, TopologySnapshot | None], held: Held, sign: int
    ) -> None:
        for name, snap in snaps.items():
            if name != held.flavor and snap is not None and self._shares(held.flavor, name, snap):
                snap.use(held.assignment, held.requests, sign)

    def to_requeue(self) -> set[str]:
        """The ClusterQueues whose refused workloads wait on a flavor whose room grew."""
        grown, self.grown = self.grown, set()
        if not grown or not self._waiting:
            return set()
        ready = [k for k, (_, flavors) in self._waiting.items() if flavors & grown]
        return {self._waiting.pop(k)[0] for k in ready}

    def is_topology_flavor(self, name: str) -> bool:
        return name in self.flavors

    def take_disturbed(self) -> set[str]:
        disturbed, self.disturbed = self.disturbed, set()
        return disturbed

    def usable(self, host: str) -> bool:
        """Whether the node of this hostname exists and is Ready."""
        node = self.nodes.get(self._hosts.get(host, host))
        return node is not None and node.ready


def within_assignment(
    tas: TopologyCache, key: str, pod_set: str, names: Iterable[str]
) -> set[str] | None:
    """Which of these nodes lie in a domain of the podSet's topology assignment (None:
    it has none); costs what the candidates are, not every node."""
    holds = [h for h in tas.held.get(key, ()) if h.pod_set == pod_set]
    if not holds:
        return None
    out: set[str] = set()
    for name in names:
        node = tas.nodes.get(name)
        if node is None:
            continue
        for held in holds:
            values = tuple(node.labels.get(level, "") for level in held.assignment.levels)
            flavor = tas.flavors.get(held.flavor)
            if any(d.values == values for d in held.assignment.domains) and (
                flavor is None or tas.member(flavor, node)
            ):
                out.add(name)
                break
    return out

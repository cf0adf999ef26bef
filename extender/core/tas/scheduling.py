"""Topology-aware scheduling in the cycle: each topology flavor's domains and the check.

A ResourceFlavor that names a Topology (spec.topologyName) is a topology flavor. Once quota
fits, a workload admitted to such a flavor is placed on its domains (tas_placement.py): the
admission then carries a topology assignment per podSet, and the pods it places are held on
their domains until the workload's quota is freed. A podSet that cannot be placed keeps the
workload pending with Kueue's message ("couldn't assign flavors to pod set main: topology
"default" allows to fit only 3 out of 4 pod(s)").

The room of a domain is its nodes' allocatable (Ready and schedulable nodes with the flavor's
labels and every level's label), less what pods outside topology-aware scheduling request
there, less what admitted topology-aware workloads hold (Kueue's TAS cache).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

from extender.core.admission.provisioning import CONTROLLER as PROVISIONING_CONTROLLER
from extender.core.api.models import (
    Admission,
    AdmissionCheck,
    ClusterQueue,
    ResourceFlavor,
    Workload,
)
from extender.core.api.topology import (
    DELAYED_PENDING,
    DELAYED_READY,
    HOSTNAME,
    Topology,
    TopologyAssignment,
    TopologyRequest,
)
from extender.core.placement.model import Node
from extender.core.tas.placement import (
    PodSetPlacement,
    TopologySnapshot,
    placement_of,
    with_pod,
)
from extender.core.tas.replacement import replace_failed


@dataclass(frozen=True, slots=True)
class Held:
    """One podSet's pods placed on a topology flavor's domains."""

    flavor: str
    pod_set: str
    assignment: TopologyAssignment
    requests: Mapping[str, int]  # one pod's


class TopologyScheduling:
    """Kueue's TAS cache and the in-cycle check (`__call__`), for every topology flavor.

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
        self.disturbed: set[str] = set()  # workloads with pods on a host that failed
        self._reserved: list[str] = []  # holds that last until the cycle ends

    # ----- what the domains are built from -----------------------------------------------

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
        # A host that failed (gone, or NotReady); a cordoned one keeps its running pods.
        if old is not None and old.ready and (node is old or not node.ready):
            self._host_failed(old.labels.get(HOSTNAME, old.name))
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

    def _host_failed(self, host: str) -> None:
        for key, holds in self.held.items():
            if any(d.values[-1] == host for h in holds for d in h.assignment.domains):
                self.disturbed.add(key)

    # ----- what admitted workloads hold --------------------------------------------------

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

    # ----- the check in the cycle ----------------------------------------------------------

    def is_topology_flavor(self, name: str) -> bool:
        return name in self.flavors

    def __call__(self, workload: Workload, admission: Admission) -> str | Admission | None:
        """Place the podSets admitted to topology flavors: the admission with their
        assignments (held from now on), a refusal in Kueue's words, or None (none is).
        A podSet whose placement is delayed (delayedTopologyRequest Pending) waits for
        `place_delayed`."""
        by_flavor = self._placements(workload, admission)
        if isinstance(by_flavor, str):
            return by_flavor
        return self._place(workload, admission, by_flavor, ()) if by_flavor else None

    def place_delayed(self, workload: Workload, admission: Admission) -> str | Admission | None:
        """Kueue's second pass: the podSets whose placement waited for their admission
        checks (a ProvisioningRequest) are placed now, their delayedTopologyRequest Ready;
        a refusal in Kueue's words, or None when none waits."""
        by_flavor = self._placements(workload, admission, delayed=True)
        if isinstance(by_flavor, str) or not by_flavor:
            return by_flavor if isinstance(by_flavor, str) else None
        return self._place(workload, admission, by_flavor, self.held.get(workload.key, ()))

    def _place(
        self,
        workload: Workload,
        admission: Admission,
        by_flavor: Mapping[str, list[PodSetPlacement]],
        kept: tuple[Held, ...],
    ) -> str | Admission:
        assignments: dict[str, TopologyAssignment] = {}
        holds: list[Held] = []
        snaps = {flavor: self.snapshot(flavor) for flavor in sorted(by_flavor)}
        try:
            for flavor, snap in snaps.items():
                assert snap is not None  # checked by _placements
                placed = snap.assign(by_flavor[flavor])
                if placed.failed:
                    self._waiting[workload.key] = (admission.cluster_queue, frozenset(by_flavor))
                    return _refusal(placed.failed[0], placed.reason)
                for placement in by_flavor[flavor]:
                    assignment = placed.assignments[placement.name]
                    assignments[placement.name] = assignment
                    held = Held(flavor, placement.name, assignment, placement.requests)
                    holds.append(held)
                    # A sibling flavor over the same hosts sees it while its own podSets
                    # are placed (Kueue's overlapping flavors).
                    self._apply_among(snaps, held, 1)
        finally:
            for held in holds:
                self._apply_among(snaps, held, -1)
        self._waiting.pop(workload.key, None)
        self.hold(workload.key, (*kept, *holds))
        return Admission(
            admission.cluster_queue,
            tuple(
                replace(
                    psa,
                    topology=assignments[psa.name],
                    delayed_topology=DELAYED_READY if psa.delayed_topology else None,
                )
                if psa.name in assignments
                else psa
                for psa in admission.pod_set_assignments
            ),
        )

    def prepare(self, workload: Workload, flavors: Iterable[str]) -> None:
        """A workload was queued in a ClusterQueue with these flavors: what each domain of
        its topology flavors can take of its podSets' requests is counted now, once per
        request shape, outside the cycle that will place it (the cycle then brings kept
        counts up to date from the hosts that changed, instead of counting every host)."""
        asking = [
            placement_of(ps, ps.count, ps.topology, False)
            for ps in workload.pod_sets
            if ps.topology is not None and ps.count
        ]
        if not asking:
            return
        for flavor in flavors:
            snap = self.snapshot(flavor) if flavor in self.flavors else None
            if snap is not None:
                snap.warm(asking)

    def fits_without(
        self, workload: Workload, admission: Admission, victims: Sequence[str] | None
    ) -> bool:
        """Whether the workload's topology podSets could be placed were these admitted
        workloads gone (None: were every topology-aware workload gone, Kueue's
        "simulate empty"). Nothing is held; what the victims hold is put back."""
        by_flavor = self._placements(workload, admission)
        if isinstance(by_flavor, str):
            return False
        if victims is None:
            return all(
                not snap.assign(placements, simulate_empty=True).failed
                for flavor, placements in by_flavor.items()
                if (snap := self.snapshot(flavor)) is not None
            )
        with _taken_off(self, victims, by_flavor):
            return all(
                not snap.assign(placements).failed
                for flavor, placements in by_flavor.items()
                if (snap := self.snapshot(flavor)) is not None
            )

    def reserve(
        self, workload: Workload, admission: Admission, victims: Sequence[str] | None
    ) -> None:
        """For the rest of a cycle, the domains a workload waiting on preemption will take
        once its victims are gone (None: once every topology-aware workload is, for one that
        found no victims but keeps what it needs from later ones), as Kueue's cycle counts
        them: later workloads of the cycle cannot take that room meanwhile."""
        by_flavor = self._placements(workload, admission)
        if isinstance(by_flavor, str) or not by_flavor:
            return
        reserved: list[Held] = []
        with _taken_off(self, victims or (), by_flavor):
            for flavor, placements in sorted(by_flavor.items()):
                snap = self.snapshot(flavor)
                if snap is None:
                    continue
                placed = snap.assign(placements, simulate_empty=victims is None)
                reserved.extend(
                    Held(flavor, p.name, placed.assignments[p.name], p.requests)
                    for p in placements
                    if p.name in placed.assignments
                )
        if reserved:
            key = f"{workload.key}\x00reserved"
            self.held[key] = tuple(reserved)
            self._apply(self.held[key], 1)
            self._reserved.append(key)

    def end_cycle(self) -> None:
        """The cycle is over: what it reserved is given back (nothing was admitted by it)."""
        for key in self._reserved:
            holds = self.held.pop(key, None)
            if holds:
                self._apply(holds, -1)
        self._reserved.clear()

    def _placements(
        self, workload: Workload, admission: Admission, delayed: bool = False
    ) -> dict[str, list[PodSetPlacement]] | str:
        """Per topology flavor, the podSets admitted to it, as the placement takes them; a
        refusal in Kueue's words when one cannot be placed there at all."""
        pod_sets = {ps.name: ps for ps in workload.pod_sets}
        by_flavor: dict[str, list[PodSetPlacement]] = {}
        for psa in admission.pod_set_assignments:
            ps = pod_sets.get(psa.name)
            if ps is None or psa.count == 0 or (psa.delayed_topology == DELAYED_PENDING) != delayed:
                continue
            explicit = ps.topology is not None and ps.topology.explicit
            chosen = sorted({f for f in psa.flavors.values() if f in self.flavors})
            if not chosen:
                if explicit and self.flavors and psa.flavors:
                    flavor = next(iter(psa.flavors.values()))
                    return _refusal(
                        ps.name, f'Flavor "{flavor}" does not support TopologyAwareScheduling'
                    )
                if explicit and not psa.flavors:
                    # A podSet that asks for a topology but requests nothing of its own, and
                    # has no group to take its flavor from (Kueue's pod-set errors).
                    uses_topology = any(
                        f in self.flavors
                        for other in admission.pod_set_assignments
                        for f in other.flavors.values()
                    )
                    error = (
                        "no TAS flavor assigned"
                        if uses_topology
                        else "workload requires Topology, but there is no TAS cache information"
                    )
                    return f"failed to assign flavors to pod set {ps.name}: {error}"
                continue
            if len(chosen) > 1:
                return (
                    f"failed to assign flavors to pod set {ps.name}: more than one TAS flavor "
                    f"assigned: {', '.join(chosen)}"
                )
            request = ps.topology or TopologyRequest()
            # A podSet without a request of its own reaches a topology flavor only in a
            # ClusterQueue of topology flavors alone (the flavor search keeps it off them
            # elsewhere, as Kueue's): it is placed implicitly, unconstrained.
            implied = not explicit
            snap = self.snapshot(chosen[0])
            if snap is None:
                return _refusal(
                    ps.name, "workload requires Topology, but there is no TAS cache information"
                )
            if explicit and not snap.has_level(request, implied):
                return _refusal(
                    ps.name, f'Flavor "{chosen[0]}" does not contain the requested level'
                )
            by_flavor.setdefault(chosen[0], []).append(
                placement_of(ps, psa.count, request, implied)
            )
        return by_flavor

    def take_disturbed(self) -> set[str]:
        disturbed, self.disturbed = self.disturbed, set()
        return disturbed

    def replace(self, workload: Workload, admission: Admission) -> Admission | str | None:
        """A host of the workload's assignment failed: see tas_replacement.replace_failed."""
        return replace_failed(self, workload, admission)

    def usable(self, host: str) -> bool:
        """Whether the node of this hostname exists and is Ready."""
        node = self.nodes.get(self._hosts.get(host, host))
        return node is not None and node.ready


@contextmanager
def _taken_off(
    tas: TopologyScheduling, victims: Sequence[str], flavors: Iterable[str]
) -> Iterator[None]:
    """These workloads' holds taken off while a placement is tried, then put back. The
    kept counts that no placement read meanwhile keep their marks: for them nothing
    changed, and recounting the hosts would be wasted."""
    for flavor in flavors:
        tas.snapshot(flavor)  # built with every hold, before any is taken off
    gone = [tas.held[k] for k in victims if k in tas.held]
    marks = {name: snap.marks() for name, snap in tas._snapshots.items()} if gone else {}
    for holds in gone:
        tas._apply(holds, -1)
    try:
        yield
    finally:
        for holds in gone:
            tas._apply(holds, 1)
        for name, saved in marks.items():
            snap = tas._snapshots.get(name)
            if snap is not None:
                snap.restore_marks(saved)


def within_assignment(
    tas: TopologyScheduling, key: str, pod_set: str, names: Iterable[str]
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


MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"


def with_delayed_topology(
    admission: Admission,
    cq: ClusterQueue,
    checks: Mapping[str, AdmissionCheck],
    flavors: Mapping[str, ResourceFlavor],
) -> Admission:
    """Kueue's delayed topology request: a podSet admitted to a topology flavor on which a
    ProvisioningRequest check applies (or in a ClusterQueue with a MultiKueue check) is not
    placed when its quota is reserved; its delayedTopologyRequest is Pending until the
    checks are Ready and the second pass (`place_delayed`) places it where the capacity
    was provisioned."""
    if not cq.admission_checks:
        return admission
    provisioning: list[frozenset[str]] = []
    everywhere = False
    for rule in cq.admission_checks:
        check = checks.get(rule.name)
        if check is None:
            continue
        if check.controller_name == MULTIKUEUE_CONTROLLER:
            everywhere = True
        elif check.controller_name == PROVISIONING_CONTROLLER:
            provisioning.append(rule.on_flavors)
    if not everywhere and not provisioning:
        return admission
    changed = False
    out = []
    for psa in admission.pod_set_assignments:
        topology = {f for f in psa.flavors.values() if (rf := flavors.get(f)) and rf.topology_name}
        if (
            psa.count
            and topology
            and psa.topology is None
            and psa.delayed_topology is None
            and (everywhere or any(not on or on & topology for on in provisioning))
        ):
            psa = replace(psa, delayed_topology=DELAYED_PENDING)
            changed = True
        out.append(psa)
    return Admission(admission.cluster_queue, tuple(out)) if changed else admission


def _refusal(pod_set: str, reason: str) -> str:
    return f"couldn't assign flavors to pod set {pod_set}: {reason}"

"""Topology-aware scheduling in the cycle: the check that places podSets on their domains.

A ResourceFlavor that names a Topology (spec.topologyName) is a topology flavor. Once quota
fits, a workload admitted to such a flavor is placed on its domains (tas/placement.py): the
admission then carries a topology assignment per podSet, and the pods it places are held on
their domains until the workload's quota is freed. A podSet that cannot be placed keeps the
workload pending with Kueue's message ("couldn't assign flavors to pod set main: topology
"default" allows to fit only 3 out of 4 pod(s)").

The room of each domain is kept by Kueue's TAS cache (tas/cache.py), which this check extends.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace

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
    TopologyAssignment,
    TopologyRequest,
)
from extender.core.tas.cache import Held, TopologyCache
from extender.core.tas.placement import PodSetPlacement, placement_of
from extender.core.tas.replacement import replace_failed


class TopologyScheduling(TopologyCache):
    """The in-cycle check on the TAS cache (`__call__`), for every topology flavor: place a
    workload's topology podSets, try a placement with victims gone, reserve for a workload
    that waits on preemption, place again after a host failed."""

    def __init__(self) -> None:
        super().__init__()
        self._reserved: list[str] = []  # holds that last until the cycle ends

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

    def replace(
        self, workload: Workload, admission: Admission, unhealthy: Sequence[str] | None = None
    ) -> Admission | str | None:
        """A host of the workload's assignment failed: see replacement.replace_failed."""
        return replace_failed(self, workload, admission, unhealthy)


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

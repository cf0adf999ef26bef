"""Kueue's topology-aware placement: how many pods each domain of a Topology gets.

One `TopologySnapshot` per topology-aware flavor holds its nodes as a tree of domains, one
level per node label of the Topology (the leaves are hosts when the lowest level is
kubernetes.io/hostname, else groups of nodes with the same labels). A leaf's room is its
nodes' allocatable, less what pods outside topology-aware scheduling use, less what admitted
topology-aware workloads hold there. `assign` places the podSets of one workload the way
Kueue v0.19.2 does with its default feature gates (pkg/cache/scheduler/tas_flavor_snapshot.go):

1. count, bottom-up, how many pods (and slices) each domain can take;
2. find the domain(s) at the requested level: BestFit (the tightest domain that holds it all)
   for required and preferred requests, LeastFreeCapacity for unconstrained ones; a preferred
   request climbs a level when no domain holds it, and spreads at the top;
3. walk down to the leaves, giving each chosen domain's pods to as few children as possible;
4. list pods per leaf, sorted by the leaves' label values.

A podSet that cannot be placed gets Kueue's reason ("topology "default" allows to fit only 3
out of 4 pod(s)"), with what excluded nodes ("Total nodes: 4; excluded: resource "cpu": 1").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from extender.core.api.models import PodSet
from extender.core.api.topology import (
    PREFERRED,
    REQUIRED,
    UNCONSTRAINED,
    DomainAssignment,
    TopologyAssignment,
    TopologyRequest,
    has_levels,
    level_key,
)
from extender.core.tas.domains import (
    MAX_COUNT,
    PODS,
    Domain,
    PodSetPlacement,
    Requests,
    Search,
    Stats,
    TopologyDomains,
    count_in,
    minus,
    with_pod,
)

__all__ = [
    "PODS",
    "Placed",
    "PodSetPlacement",
    "TopologySnapshot",
    "count_in",
    "placement_of",
    "with_pod",
]


def placement_of(
    pod_set: PodSet, count: int, request: TopologyRequest, implied: bool
) -> PodSetPlacement:
    """`count` pods of a workload's podSet to place, as their pods ask of a node."""
    return PodSetPlacement(
        pod_set.name,
        count,
        pod_set.pod_requests,
        request,
        implied,
        pod_set.node_selector,
        pod_set.required_terms,
        pod_set.tolerations,
    )


def _groups(
    pod_sets: Sequence[PodSetPlacement],
) -> list[tuple[PodSetPlacement, PodSetPlacement | None]]:
    """A workload's podSets as they are placed: alone, or a group's workers with their
    leader (the smaller of the two)."""
    groups: dict[str, list[PodSetPlacement]] = {}
    for i, ps in enumerate(pod_sets):
        groups.setdefault(ps.request.group or str(i), []).append(ps)
    out: list[tuple[PodSetPlacement, PodSetPlacement | None]] = []
    for members in groups.values():
        workers, leader = members[0], members[1] if len(members) > 1 else None
        if leader is not None and leader.count > workers.count:
            workers, leader = leader, workers
        out.append((workers, leader))
    return out


@dataclass(frozen=True, slots=True)
class Placed:
    """The answer for a workload: an assignment per podSet, or the first podSets (a group
    fails together) that could not be placed, and why."""

    assignments: Mapping[str, TopologyAssignment]
    failed: tuple[str, ...] = ()
    reason: str = ""


def _sorted_with_leader(domains: Iterable[Domain], lfc: bool) -> list[Domain]:
    sign = 1 if lfc else -1
    return sorted(
        domains,
        key=lambda d: (-d.leaders, sign * d.slices_with_leader, d.pods_with_leader, d.values),
    )


def _sorted(domains: Iterable[Domain], lfc: bool) -> list[Domain]:
    sign = 1 if lfc else -1
    return sorted(domains, key=lambda d: (sign * d.slices, d.pods, d.values))


def _best_fit(domains: Sequence[Domain], needed: int, leaders: int, slices: bool) -> Domain:
    """The first domain holding `needed` with the least to spare (else the first)."""
    best, best_count = domains[0], MAX_COUNT
    found = False
    for d in domains:
        if d.leaders < leaders:
            continue
        if slices:
            count = d.slices_with_leader if leaders > 0 else d.slices
        else:
            count = d.pods_with_leader if leaders > 0 else d.pods
        if needed <= count < best_count:
            best, best_count, found = d, count, True
    return best if found else domains[0]


def _leader_first(
    domains: list[Domain], count: int, leaders: int, unit: int, slices: bool
) -> list[Domain]:
    """Kueue's prioritizeLeaderDomain: the first domain that can hold the leader without
    leaving the rest short goes first."""
    if leaders == 0 or len(domains) < 2:
        return domains
    needed = count // unit if slices else count
    room = sum(d.slices if slices else d.pods for d in domains)
    for i, d in enumerate(domains):
        if d.leaders < leaders:
            continue
        loss = d.slices - d.slices_with_leader if slices else d.pods - d.pods_with_leader
        if room - loss < needed:
            continue
        if i == 0:
            return domains
        return [d, *domains[:i], *domains[i + 1 :]]
    return domains


class TopologySnapshot(TopologyDomains):
    """One topology-aware flavor's nodes as domains, and what is used on them.

    Not thread-safe. `use` and `release` keep what admitted workloads hold; `assign` reads it
    and changes only the per-placement counts."""

    # ----- what admitted workloads hold ------------------------------------------------

    def has_level(self, request: TopologyRequest, implied: bool) -> bool:
        """Kueue's HasLevel: every level the request names is one of this Topology's."""
        return has_levels(request, self.levels, implied)

    # ----- placing a workload ----------------------------------------------------------

    def assign(
        self,
        pod_sets: Sequence[PodSetPlacement],
        *,
        simulate_empty: bool = False,
        assumed: dict[str, dict[str, int]] | None = None,
    ) -> Placed:
        """Place a workload's podSets (those of one group together, a leader and its
        workers); `simulate_empty` ignores what admitted workloads hold (would preemption
        make room?). What each placed podSet takes is added to `assumed` for the next."""
        assumed = {} if assumed is None else assumed
        out: dict[str, TopologyAssignment] = {}
        for workers, leader in _groups(pod_sets):
            members = (workers,) if leader is None else (workers, leader)
            found = self._find(workers, leader, assumed, simulate_empty)
            if isinstance(found, str):
                names = tuple(ps.name for ps in pod_sets if ps in members)
                return Placed(out, names, found)
            for ps in members:
                out[ps.name] = found[ps.name]
                for domain in found[ps.name].domains:
                    leaf = self.leaf_of(domain.values)
                    if leaf is not None:
                        minus(assumed.setdefault(leaf.id, {}), with_pod(ps.requests), -domain.count)
        return Placed(out)

    def place_within(
        self, pod_set: PodSetPlacement, within: str | None
    ) -> TopologyAssignment | str:
        """Place one podSet's pods (a failed host's, again) only under the domain `within`
        (its path of label values, "b1,r2"), or anywhere when None."""
        found = self._find(pod_set, None, {}, False, within)
        return found if isinstance(found, str) else found[pod_set.name]

    def path_of(self, values: Sequence[str]) -> tuple[str, ...] | None:
        """A leaf's label values at every level, from an assignment's domain."""
        leaf = self.leaf_of(values)
        return None if leaf is None else leaf.values

    def level_key(self, request: TopologyRequest, implied: bool) -> str | None:
        return level_key(request, self.levels, implied)

    def _search(self, workers: PodSetPlacement, leader: PodSetPlacement | None) -> Search | str:
        """What a placement of these podSets looks for (levels, slices, leaders), or Kueue's
        message for a request this topology cannot read."""
        request = workers.request
        slice_size = request.slices[0].size if request.slices else 1
        if slice_size <= 0:
            return "slice topology requested, but slice size not provided"
        key = self.level_key(request, workers.implied)
        if key is None:
            return "topology level not specified"
        if key not in self.levels:
            return f"no requested topology level: {key}"
        slice_key = request.slices[0].level if request.slices else self.levels[-1]
        if slice_key not in self.levels:
            return f"no requested topology level for slices: {slice_key}"
        level, slice_level = self.levels.index(key), self.levels.index(slice_key)
        if level > slice_level:
            return f"podset slice topology {slice_key} is above the podset topology {key}"
        inner: dict[int, int] = {}
        size, at = slice_size, slice_level
        for layer in request.slices[1:]:
            if layer.level not in self.levels:
                return f"no requested topology level for additional slice layer: {layer.level}"
            here = self.levels.index(layer.level)
            if here <= at:
                return (
                    f"additional slice layer topology {layer.level} must be at a lower level "
                    f"than {self.levels[at]}"
                )
            if size % layer.size:
                return (
                    f"additional slice layer size {layer.size} must evenly divide parent "
                    f"layer size {size}"
                )
            for lvl in range(at + 1, here + 1):
                inner[lvl] = layer.size
            size, at = layer.size, here
        search = Search(
            count=workers.count,
            leaders=1 if leader is not None else 0,
            slice_size=slice_size,
            slice_level=slice_level,
            required=request.mode == REQUIRED,
            unconstrained=request.mode == UNCONSTRAINED
            or workers.implied
            or (request.mode not in (REQUIRED, PREFERRED) and bool(request.slices)),
            inner_sizes=inner,
            layers=request.slices if inner else (),
        )
        return search

    def warm(self, pod_sets: Sequence[PodSetPlacement]) -> None:
        """Count what each domain can take of these podSets' requests now, on the domains
        as they are and as if empty (preemption's question), so that the cycle that places
        them finds the counts kept and only brings them up to date. A request it cannot
        read is left to the cycle, which says why."""
        for workers, leader in _groups(pod_sets):
            search = self._search(workers, leader)
            if isinstance(search, str):
                continue
            for simulate_empty in (False, True):
                self.counts_for(workers, leader, {}, simulate_empty, None, search)

    def _find(
        self,
        workers: PodSetPlacement,
        leader: PodSetPlacement | None,
        assumed: Mapping[str, Requests],
        simulate_empty: bool,
        within: str | None = None,
    ) -> dict[str, TopologyAssignment] | str:
        search = self._search(workers, leader)
        if isinstance(search, str):
            return search
        level = self.levels.index(self.level_key(workers.request, workers.implied) or "")
        slice_size, slice_level, inner = search.slice_size, search.slice_level, search.inner_sizes
        search.counts = self.counts_for(workers, leader, assumed, simulate_empty, within, search)
        chosen = self._fit_level(level, search)
        if isinstance(chosen, str):
            return chosen
        fit_level, fit = chosen
        lfc = search.unconstrained
        fit = self._spread(fit, search.count, search.leaders, slice_size, lfc, True)
        last = len(self.levels) - 1
        current = fit_level
        counts = search.counts
        assert counts is not None
        while current < min(last, slice_level):
            pooled = [c for d in fit for c in d.children]
            counts.load(pooled)
            pooled = _sorted(pooled, lfc)
            fit = self._spread(pooled, search.count, search.leaders, slice_size, lfc, True)
            current += 1
        while current < last:
            unit = inner.get(current + 1, 1)
            below: list[Domain] = []
            for parent in fit:
                counts.load(parent.children)
                children = _sorted(parent.children, lfc)
                if unit > 1:
                    for child in children:
                        child.slices = child.pods // unit
                        child.slices_with_leader = child.pods_with_leader // unit
                below += self._spread(children, parent.pods, parent.leaders, unit, lfc, unit > 1)
            fit = below
            current += 1
        out: dict[str, TopologyAssignment] = {}
        if leader is not None:
            out[leader.name] = self._assignment((d, d.leaders) for d in fit if d.leaders > 0)
        out[workers.name] = self._assignment((d, d.pods) for d in fit)
        return out

    # ----- step 2: the domains at the level that hold it ---------------------------------

    def _stats(self, search: Search) -> Stats:
        assert search.counts is not None
        return self.stats_of(search.counts)

    def _not_fit(self, level: int, fit: int, total: int, search: Search) -> str:
        if search.layers:
            text = f'topology "{self.name}" doesn\'t allow to fit'
            best = None
            for d in self.by_level[level].values():
                if (
                    best is None
                    or d.slices > best.slices
                    or (d.slices == best.slices and d.id < best.id)
                ):
                    best = d
            if best is None:
                return text
            for layer in search.layers:
                if layer.level not in self.levels:
                    continue
                target = self.levels.index(layer.level)
                fits = self._slices_below(best, target, layer.size, search)
                text += f"; {fits}/{search.count // layer.size} slice(s) fit on level {layer.level}"
            return text + self._stats(search).suffix()
        unit = "pod" if search.slice_size == 1 else "slice"
        if fit == 0:
            text = f'topology "{self.name}" doesn\'t allow to fit any of {total} {unit}(s)'
        else:
            text = f'topology "{self.name}" allows to fit only {fit} out of {total} {unit}(s)'
        return text + self._stats(search).suffix()

    def _slices_below(self, domain: Domain, target: int, size: int, search: Search) -> int:
        assert search.counts is not None
        if domain.level == target:
            return search.counts.records[domain][0] // size
        return sum(self._slices_below(c, target, size, search) for c in domain.children)

    def _fit_level(self, level: int, search: Search) -> tuple[int, list[Domain]] | str:
        domains = self.by_level[level].values()
        if not domains:
            return f"no topology domains at level: {self.levels[level]}"
        counts = search.counts
        assert counts is not None
        need, leaders = search.count // search.slice_size, search.leaders
        if leaders == 0:
            # One domain that holds it all: BestFit takes the tightest, LeastFreeCapacity the
            # least free that holds it, and both come to the same key (without a leader every
            # "with leader" count is the plain one). One pass, no sort, nothing loaded but it.
            records = counts.records
            best, best_key = None, None
            if counts.kept:  # an index of the level, kept in order (Counts.tightest)
                best = counts.tightest(domains, level, need)
            else:
                for d in domains:
                    record = records[d]
                    if record[2] >= need:
                        key = (record[2], record[0], d.values)
                        if best_key is None or key < best_key:
                            best, best_key = d, key
            if best is not None:
                counts.load((best,))
                return level, [best]
        counts.load(domains)
        lfc = search.unconstrained
        ordered = _sorted_with_leader(domains, lfc)
        top = ordered[0]
        if not lfc and top.slices_with_leader >= need and top.leaders >= leaders:
            top = _best_fit(ordered, need, leaders, True)
        if lfc:
            for d in ordered:
                room = d.slices
                if leaders > 0:
                    if d.leaders < leaders:
                        continue
                    room = d.slices_with_leader
                if room >= need:
                    return level, [d]
            if search.required:
                return self._not_fit(level, ordered[-1].pods, need, search)
        if top.slices_with_leader >= need and top.leaders >= leaders:
            return level, [top]
        if search.required:
            return self._not_fit(level, top.slices, need, search)
        if level > 0 and not search.unconstrained:
            return self._fit_level(level - 1, search)
        # At the top (or unconstrained at its level): several domains together.
        ordered = _leader_first(ordered, search.count, leaders, search.slice_size, True)
        chosen: list[Domain] = []
        left_slices, left_leaders = need, leaders
        i = 0
        while left_leaders > 0 and i < len(ordered) and ordered[i].leaders > 0:
            d = ordered[i]
            if not lfc and d.slices_with_leader >= left_slices:
                d = _best_fit(ordered[i:], left_slices, left_leaders, True)
            chosen.append(d)
            left_leaders -= d.leaders
            left_slices -= d.slices_with_leader
            i += 1
        if left_leaders > 0:
            return self._not_fit(level, leaders - left_leaders, need, search)
        rest = _sorted(ordered[i:], lfc)
        j = 0
        while left_slices > 0 and j < len(rest):
            d = rest[j]
            if not lfc and d.slices >= left_slices:
                d = _best_fit(rest[j:], left_slices, 0, True)
            chosen.append(d)
            left_slices -= d.slices
            j += 1
        if left_slices > 0:
            return self._not_fit(level, need - left_slices, need, search)
        return level, chosen

    # ----- step 3: as few domains as possible, level by level ----------------------------

    def _spread(
        self,
        domains: list[Domain],
        count: int,
        leaders: int,
        unit: int,
        lfc: bool,
        slices: bool,
    ) -> list[Domain]:
        """Kueue's updateCountsToMinimumGeneric: `count` pods (in slices of `unit` when
        `slices`) and `leaders` over `domains` in order, the last one the tightest fit."""
        domains = _leader_first(domains, count, leaders, unit, slices)
        left = count // unit if slices else count
        left_leaders = leaders
        out: list[Domain] = []
        for i, d in enumerate(domains):
            if left_leaders > 0:
                with_leader = d.slices_with_leader if slices else d.pods_with_leader
                if not lfc and with_leader >= left and d.leaders >= left_leaders:
                    d = _best_fit(domains[i:], left, left_leaders, slices)
                    with_leader = d.slices_with_leader if slices else d.pods_with_leader
                step = unit if slices else 1
                if with_leader >= left and d.leaders >= left_leaders:
                    if slices:
                        d.slices = left
                    d.leaders = left_leaders
                    d.pods = left * step
                    out.append(d)
                    return out
                with_leader = min(with_leader, left)
                if slices:
                    d.slices_with_leader = with_leader
                    d.slices = with_leader
                else:
                    d.pods_with_leader = with_leader
                d.leaders = min(d.leaders, left_leaders)
                d.pods = with_leader * step
                left_leaders -= d.leaders
                left -= with_leader
                out.append(d)
                continue
            room = d.slices if slices else d.pods
            if not lfc and room >= left:
                d = _best_fit(domains[i:], left, 0, slices)
            d.leaders = 0
            room = d.slices if slices else d.pods
            if room >= left:
                d.pods = left * unit if slices else left
                if slices:
                    d.slices = left
                out.append(d)
                return out
            if slices:
                d.pods = room * unit
            left -= room
            out.append(d)
        return []  # Kueue's "code assumptions violated": the counts above make it unreachable

    # ----- step 4: pods per leaf ---------------------------------------------------------

    def _assignment(self, counted: Iterable[tuple[Domain, int]]) -> TopologyAssignment:
        first = len(self.levels) - 1 if self.hostname_lowest else 0
        domains = sorted(((d.values, n) for d, n in counted if n > 0), key=lambda x: x[0])
        return TopologyAssignment(
            self.levels[first:],
            tuple(DomainAssignment(values[first:], n) for values, n in domains),
        )

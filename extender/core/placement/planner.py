"""The placement planner: a node for every pod of a workload, or why there is none."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from extender.core.api.labels import Toleration, tolerated
from extender.core.api.models import Admission, PodSet, ResourceFlavor, Workload
from extender.core.api.quantity import format_amount
from extender.core.placement.inventory import FreeIndex, NodeInventory
from extender.core.placement.model import Node, Plan, PlannedPodSet, matches_affinity
from extender.core.placement.shortcuts import Shortcuts

_SHOWN_NODES = 5  # nodes named in a refusal message


@dataclass(frozen=True, slots=True)
class _Group:
    """The pods of one podSet that still need a node, and where they may go."""

    pod_set: PodSet
    requests: Mapping[str, int]  # checked resources only, per pod
    count: int
    flavors: tuple[ResourceFlavor, ...]  # every flavor assigned to the podSet
    tolerations: tuple[Toleration, ...]
    primary: str  # the checked resource it needs most of: its free index is searched
    flavor: str  # the flavor of the primary resource

    def describe(self) -> str:
        return " and ".join(f"{format_amount(r, v)} {r}" for r, v in sorted(self.requests.items()))


class Planner:
    """First-fit decreasing over the inventory: the biggest pods first, each on the tightest
    node that holds it, in one topology domain when its flavor names a topology label. It
    reads the inventory and holds nothing itself: the caller assumes the plan it returns."""

    def __init__(self, inventory: NodeInventory) -> None:
        self.inventory = inventory
        self.shortcuts = Shortcuts(inventory)

    def needs_plan(self, workload: Workload) -> bool:
        return any(self.inventory.checked_requests(ps.pod_requests) for ps in workload.pod_sets)

    def plan(
        self, workload: Workload, admission: Admission, keep: Plan | None = None
    ) -> Plan | str:
        """A node for every pod that uses a checked resource, or why there is none.

        With `keep`, the pods of that plan on nodes still usable stay where they are and only
        the rest is placed again (a node of the plan died or was cordoned)."""
        if keep is None and len(workload.pod_sets) == 1:
            quick = self.shortcuts.plan_one_pod_set(workload, admission)
            if quick is not None:
                return quick
        groups = self._groups(workload, admission)
        if not groups:
            return Plan(workload.key, {})
        kept: dict[str, dict[str, int]] = {g.pod_set.name: {} for g in groups}
        if keep is not None:
            for name, ps in keep.pod_sets.items():
                for node_name, count in ps.nodes.items():
                    node = self.inventory.nodes.get(node_name)
                    if node is None or not node.ready:
                        continue  # its pods must go elsewhere
                    if node.unschedulable:  # what is already bound there may stay
                        count = min(count, self.inventory.bound(workload.key, name, node_name))
                    if count and name in kept:
                        kept[name][node_name] = count
        groups = [
            _Group(
                g.pod_set,
                g.requests,
                g.count - sum(kept[g.pod_set.name].values()),
                g.flavors,
                g.tolerations,
                g.primary,
                g.flavor,
            )
            for g in groups
        ]
        # First-fit decreasing: the biggest pods first.
        groups.sort(key=lambda g: (-sum(g.requests.values()), g.pod_set.name))
        ignoring = workload.key if keep is not None else None
        topology = next((f.topology_key for g in groups for f in g.flavors if f.topology_key), None)
        # A workload of several podSets is told which one does not fit.
        named = len(workload.pod_sets) > 1
        if topology is None:
            placed = self._place(groups, kept, ignoring, None, named)
        else:
            placed = self._place_in_domain(groups, kept, ignoring, topology, named)
        if isinstance(placed, str):
            return placed
        return Plan(
            workload.key,
            {
                g.pod_set.name: PlannedPodSet(
                    g.requests,
                    {n: c for n, c in placed[g.pod_set.name].items() if c},
                    tuple(f.name for f in g.flavors),
                )
                for g in groups
            },
        )

    def flavor_of(self, admission: Admission) -> str:
        """The flavor a refused workload waits on: its first checked resource's."""
        for psa in admission.pod_set_assignments:
            for resource, flavor in psa.flavors.items():
                if self.inventory.is_checked(resource):
                    return flavor
        return ""

    def _groups(self, workload: Workload, admission: Admission) -> list[_Group]:
        inventory = self.inventory
        known = inventory.flavors
        assignments = {psa.name: psa for psa in admission.pod_set_assignments}
        groups = []
        for ps in workload.pod_sets:
            requests = inventory.checked_requests(ps.pod_requests)
            psa = assignments.get(ps.name)
            if not requests or psa is None:
                continue
            names = dict.fromkeys(psa.flavors.values())
            flavors = tuple(known[n] for n in names if n in known)
            tolerations = ps.tolerations + tuple(t for f in flavors for t in f.tolerations)
            count = psa.count or ps.count
            primary = max(sorted(requests), key=lambda r: requests[r])
            flavor = psa.flavors.get(primary, "")
            groups.append(_Group(ps, requests, count, flavors, tolerations, primary, flavor))
        return groups

    def _eligible(self, group: _Group, node: Node) -> bool:
        if not node.usable:
            return False
        labels = node.labels
        for flavor in group.flavors:
            if flavor.node_labels and any(
                labels.get(k) != v for k, v in flavor.node_labels.items()
            ):
                return False
        for taint in node.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not tolerated(
                taint, group.tolerations
            ):
                return False
        pod_set = group.pod_set
        if pod_set.node_selector and any(
            labels.get(k) != v for k, v in pod_set.node_selector.items()
        ):
            return False
        return not pod_set.required_terms or matches_affinity(pod_set.required_terms, labels)

    def _candidates(self, group: _Group) -> FreeIndex:
        """The flavor's nodes by free amount of the group's primary resource."""
        return self.inventory.free_index(group.flavor, group.primary)

    def _place(
        self,
        groups: list[_Group],
        kept: dict[str, dict[str, int]],
        ignoring: str | None,
        domain: tuple[str, str] | None,
        named: bool = False,
    ) -> dict[str, dict[str, int]] | str:
        inventory = self.inventory
        nodes_by_name, free_of = inventory.nodes, inventory.free
        taken: dict[str, dict[str, int]] = {}  # node -> what this plan takes there

        def take(node: str, group: _Group, pods: int) -> None:
            used = taken.setdefault(node, {})
            for r, v in group.requests.items():
                used[r] = used.get(r, 0) + v * pods

        for name, nodes in kept.items():
            group = next(g for g in groups if g.pod_set.name == name)
            for node_name, pods in nodes.items():
                # Pods bound there already count as used; the others are taken by the plan.
                bound = inventory.bound(ignoring or "", name, node_name)
                take(node_name, group, max(0, pods - bound))
        placed = {name: dict(nodes) for name, nodes in kept.items()}

        indexed = inventory.free_amounts

        def room(node: str, group: _Group) -> int:
            """How many more of the group's pods fit on the node."""
            fits = math.inf
            have = indexed.get(node, {})  # free amounts, kept current by _reindex
            mine = taken.get(node)
            for r, v in group.requests.items():
                free = have.get(r, 0) if ignoring is None else free_of(node, r, ignoring=ignoring)
                if mine:
                    free -= mine.get(r, 0)
                fits = min(fits, free // v)
            return max(0, int(fits))

        for group in groups:
            remaining = group.count
            if remaining <= 0:
                continue
            need = group.requests[group.primary]
            entries = self._candidates(group)
            if ignoring is not None or domain is not None:
                # The indexed amounts do not know what is ignored or which domain counts.
                candidates: Iterable[str] = [n for _, n in entries.at_least(-(2**62))]
            else:
                # Nodes this plan already uses come first (the workload packed together),
                # then the tightest node that can hold one pod, then roomier ones.
                candidates = _chain(taken, (n for _, n in entries.at_least(need)))
            tried: set[str] = set()
            for node_name in candidates:
                if node_name in tried:
                    continue
                tried.add(node_name)
                node = nodes_by_name[node_name]
                if domain is not None and node.labels.get(domain[0]) != domain[1]:
                    continue
                if not self._eligible(group, node):
                    continue
                pods = min(remaining, room(node_name, group))
                if pods <= 0:
                    continue
                take(node_name, group, pods)
                slot = placed.setdefault(group.pod_set.name, {})
                slot[node_name] = slot.get(node_name, 0) + pods
                remaining -= pods
                if remaining == 0:
                    break
            if remaining:
                why = self._refusal(group, remaining, ignoring, domain)
                return f"pod set {group.pod_set.name}: {why}" if named else why
        return placed

    def _place_in_domain(
        self,
        groups: list[_Group],
        kept: dict[str, dict[str, int]],
        ignoring: str | None,
        key: str,
        named: bool = False,
    ) -> dict[str, dict[str, int]] | str:
        """All pods in one domain of the topology label: the tightest domain that holds them."""
        inventory = self.inventory
        nodes_by_name = inventory.nodes
        kept_domains = {nodes_by_name[n].labels.get(key) for nodes in kept.values() for n in nodes}
        free_by_domain: dict[str, int] = {}
        group = groups[0]
        for _, name in self._candidates(group).at_least(-(2**62)):
            node = nodes_by_name[name]
            value = node.labels.get(key)
            if value is not None and self._eligible(group, node):
                free = inventory.free(name, group.primary, ignoring=ignoring)
                free_by_domain[value] = free_by_domain.get(value, 0) + max(0, free)
        if kept_domains - {None}:
            free_by_domain = {d: f for d, f in free_by_domain.items() if d in kept_domains}
        total = sum(g.requests.get(group.primary, 0) * g.count for g in groups)
        first_refusal = None
        for value, free in sorted(free_by_domain.items(), key=lambda kv: (kv[1], kv[0])):
            if free < total:
                continue
            placed = self._place(groups, kept, ignoring, (key, value), named)
            if not isinstance(placed, str):
                return placed
            first_refusal = first_refusal or placed
        flavor = group.flavor
        roomiest = sorted(free_by_domain.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{d}: {f}" for d, f in roomiest[:_SHOWN_NODES])
        return (
            f"needs {format_amount(group.primary, total)} {group.primary} in one {key} domain "
            f"of flavor {flavor}; "
            + (f"the domains have at most {shown} free" if shown else "no domain has a usable node")
            + (f" ({first_refusal})" if first_refusal else "")
        )

    def _refusal(
        self,
        group: _Group,
        remaining: int,
        ignoring: str | None,
        domain: tuple[str, str] | None,
    ) -> str:
        inventory = self.inventory
        flavor = inventory.flavors.get(group.flavor)
        name = group.flavor
        r = group.primary
        # The roomiest eligible nodes, walking the index from its roomy end: a refusal costs
        # what it shows, not the number of nodes (ties are read on a little, to name them in
        # order).
        found: list[tuple[int, str]] = []
        for free, node_name in self._candidates(group).roomiest():
            if len(found) >= _SHOWN_NODES and (free < found[-1][0] or len(found) > 16):
                break
            node = inventory.nodes[node_name]
            if not self._eligible(group, node):
                continue
            if domain is not None and node.labels.get(domain[0]) != domain[1]:
                continue
            if ignoring is not None:
                free = inventory.free(node_name, r, ignoring=ignoring)
            found.append((max(0, free), node_name))
        if not found:
            labels = (
                ",".join(f"{k}={v}" for k, v in sorted(flavor.node_labels.items()))
                if flavor
                else ""
            )
            where = (
                f"carries the labels of flavor {name} ({labels})"
                if labels
                else f"is in flavor {name}"
            )
            return f"no Ready, schedulable node that the pods tolerate {where}"
        frees = sorted(found, key=lambda fn: (-fn[0], fn[1]))[:_SHOWN_NODES]
        what = group.describe()
        if group.count == 1:
            shown = ", ".join(f"{n}: {format_amount(r, f)}" for f, n in frees)
            most = format_amount(r, frees[0][0])
            return (
                f"needs {what} on one node; the nodes of flavor {name} have at most "
                f"{most} free ({shown})"
            )
        shown = ", ".join(f"{n}: {format_amount(r, f)} free" for f, n in frees)
        return (
            f"needs {group.count} pods of {what} each; the nodes of flavor {name} hold "
            f"{group.count - remaining} of them ({shown})"
        )


def _chain(first: Iterable[str], rest: Iterable[str]) -> Iterator[str]:
    yield from list(first)
    yield from rest

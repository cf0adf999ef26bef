"""The commonest workloads planned without the general search: one podSet, no topology."""

from __future__ import annotations

from extender.core.api.labels import tolerated
from extender.core.api.models import Admission, Workload
from extender.core.placement.inventory import NodeInventory
from extender.core.placement.model import Plan, PlannedPodSet, matches_affinity


class Shortcuts:
    """Plans for one podSet without topology, read from the tightest bucket of free amounts.

    A cycle admits up to a thousand of these; these paths are what keep placement from
    doubling the cycle (see docs/performance.md). Each answers None when the general search
    must (a refusal, which it phrases, included)."""

    def __init__(self, inventory: NodeInventory) -> None:
        self.inventory = inventory

    def hold_one_pod(self, workload: Workload, admission: Admission) -> Plan | None:
        """Plan and hold, in one step, the commonest workload of all: one pod that needs one
        checked resource of a flavor without topology or tolerations, on an untainted node,
        with nothing held or bound for it yet. None when the general path must answer."""
        pod_sets = workload.pod_sets
        if len(pod_sets) != 1:
            return None
        ps = pod_sets[0]
        psas = admission.pod_set_assignments
        if (
            len(psas) != 1
            or (psas[0].count or ps.count) != 1
            or ps.node_selector
            or ps.required_terms
            or ps.tolerations
        ):
            return None
        psa = psas[0]
        resource, need = "", 0
        inventory = self.inventory
        memo, checked = inventory.checked_memo, inventory.is_checked
        for r, v in ps.requests.items():
            if v > 0 and (memo[r] if r in memo else checked(r)):
                if resource:
                    return None  # more than one checked resource
                resource, need = r, v
        if not resource:
            return None
        flavors = inventory.flavors
        flavor_name = psa.flavors.get(resource, "")
        flavor = flavors.get(flavor_name)
        if flavor is None or flavor.topology_key is not None or flavor.tolerations:
            return None
        for other in psa.flavors.values():
            if other != flavor_name and (other not in flavors or flavors[other].node_labels):
                return None
        key = workload.key
        holds = inventory.holds
        if holds.has_plan(key):
            return None
        found = inventory.free_index(flavor_name, resource).tightest(need)
        if found is None:
            return None
        _, name = found
        if inventory.nodes[name].taints:
            return None
        flavors_used = tuple(dict.fromkeys(psa.flavors.values()))
        plan = Plan(key, {ps.name: PlannedPodSet({resource: need}, {name: 1}, flavors_used)})
        holds.assume_on_one_node(plan, name, {resource: need})
        return plan

    def plan_one_pod_set(self, workload: Workload, admission: Admission) -> Plan | None:
        """The common case at a fraction of the cost: one podSet, no topology, placed from
        the tightest node that holds one pod. None when the general search must answer
        (a refusal, which it phrases, included)."""
        inventory = self.inventory
        ps = workload.pod_sets[0]
        requests = inventory.checked_requests(ps.requests)
        if not requests:
            return Plan(workload.key, {})
        psas = admission.pod_set_assignments
        if len(psas) != 1 or psas[0].name != ps.name:
            return None
        psa = psas[0]
        primary = (
            next(iter(requests))
            if len(requests) == 1
            else max(sorted(requests), key=requests.__getitem__)
        )
        flavor_name = psa.flavors.get(primary)
        flavors = inventory.flavors
        flavor = flavors.get(flavor_name or "")
        if flavor is None or flavor.topology_key is not None:
            return None
        for other in psa.flavors.values():
            if other != flavor_name and (other not in flavors or flavors[other].node_labels):
                return None
        entries = inventory.free_index(flavor.name, primary)
        need = requests[primary]
        most = entries.most()
        if most is None or most < need:
            return None
        remaining = psa.count or ps.count
        constrained = bool(ps.node_selector or ps.required_terms)
        tolerations = ps.tolerations + flavor.tolerations
        indexed, nodes_by_name = inventory.free_amounts, inventory.nodes
        placed: dict[str, int] = {}
        for free, name in entries.at_least(need):
            node = nodes_by_name[name]
            if node.taints and any(
                t.effect in ("NoSchedule", "NoExecute") and not tolerated(t, tolerations)
                for t in node.taints
            ):
                continue
            if constrained and not (
                all(node.labels.get(k) == v for k, v in ps.node_selector.items())
                and matches_affinity(ps.required_terms, node.labels)
            ):
                continue
            fits = free // need
            if len(requests) > 1:
                have = indexed[name]
                fits = min(fits, *(have.get(r, 0) // v for r, v in requests.items()))
            if fits <= 0:
                continue
            pods = min(remaining, fits)
            placed[name] = pods
            remaining -= pods
            if not remaining:
                used = tuple(dict.fromkeys(psa.flavors.values()))
                return Plan(workload.key, {ps.name: PlannedPodSet(requests, placed, used)})
        return None

"""The scheduler extender's answers from the inventory: where a pod may go, and scores."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from extender.core.api.quantity import format_amount
from extender.core.placement.inventory import NodeInventory
from extender.core.placement.model import PlannedPodSet


class ExtenderAnswers:
    """kube-scheduler's filter and prioritize for one pod: a pod of a planned workload goes to
    the nodes of its plan; any other pod may not take what a plan holds."""

    def __init__(self, inventory: NodeInventory) -> None:
        self.inventory = inventory

    def filter(
        self,
        namespace: str,
        workload: str | None,
        pod_set: str | None,
        requests: Mapping[str, int],
        candidates: Iterable[str],
    ) -> tuple[list[str], dict[str, str]]:
        """The nodes a pod may go to, and why each other one may not."""
        inventory = self.inventory
        checked = inventory.checked_requests(requests)
        key = f"{namespace}/{workload}" if workload else None
        plan = inventory.plan_of(key) if key else None
        planned = plan.pod_sets.get(pod_set or "") if plan else None
        members = [(f, inventory.nodes_of(f)) for f in planned.flavors] if planned else []
        nodes, holds_on = inventory.nodes, inventory.holds_on
        passed: list[str] = []
        failed: dict[str, str] = {}
        for name in candidates:
            if name not in nodes:
                passed.append(name)  # not known yet: kube-scheduler's own checks decide
                continue
            if planned is not None and key is not None:
                why = self._off_plan(key, pod_set or "", planned, members, name, checked)
            elif holds_on(name):
                why = self._reserved(name, checked)
            else:
                why = None  # no plan holds anything there: the common case, at once
            if why is None:
                passed.append(name)
            else:
                failed[name] = why
        return passed, failed

    def _off_plan(
        self,
        key: str,
        pod_set: str,
        planned: PlannedPodSet,
        members: list[tuple[str, AbstractSet[str]]],
        node: str,
        requests: Mapping[str, int],
    ) -> str | None:
        """A pod of a planned workload goes where its plan has room for it."""
        if node not in planned.nodes:
            for flavor, nodes in members:
                if node not in nodes:
                    return f"not a node of flavor {flavor}"
            return "planned for other pods of this workload"
        inventory = self.inventory
        if inventory.bound(key, pod_set, node) >= planned.nodes[node]:
            return "planned for other pods of this workload"
        for r, v in sorted(requests.items()):
            # What its own plan holds there is room for this pod.
            free = inventory.free(node, r, ignoring=key)
            if free < v:
                have, need = format_amount(r, max(0, free)), format_amount(r, v)
                return f"{have} {r} free, the pod needs {need}"
        return None

    def _reserved(self, node: str, requests: Mapping[str, int]) -> str | None:
        """A pod outside any plan may not take what a plan holds on the node."""
        inventory = self.inventory
        n = inventory.nodes[node]
        for r, v in sorted(requests.items()):
            unplanned = n.allocatable.get(r, 0) - inventory.used(node, r)
            if v <= unplanned and v > inventory.free(node, r):
                return f"reserved for workload {inventory.holds.holder(node, r)}"
        return None

    def prioritize(
        self, namespace: str, workload: str | None, pod_set: str | None, candidates: Iterable[str]
    ) -> list[tuple[str, int]]:
        """Scores 0-10: the nodes of the pod's plan first, then the fullest nodes (packing
        leaves whole nodes free for big jobs)."""
        inventory = self.inventory
        plan = inventory.plan_of(f"{namespace}/{workload}") if workload else None
        planned = plan.pod_sets.get(pod_set or "") if plan else None
        score = inventory.score_of
        if planned is None:
            return [(name, score(name)) for name in candidates]
        mine = planned.nodes
        return [(name, 10 if name in mine else score(name)) for name in candidates]

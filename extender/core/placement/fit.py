"""Physical fit on accelerator nodes: the inventory with its planner and extender, and the check.

Kueue admits on quota alone, so an 8-GPU pod can be admitted while the free GPUs are spread
four and four over two nodes. Here a workload that uses a physically checked resource (by
default every extended resource: nvidia.com/gpu, google.com/tpu, ...) is admitted only with
a plan: a node for every pod of every podSet, found first-fit decreasing on the tightest node,
in one topology domain when its flavor names a topology label. The plan is held on the nodes
(reserved) until the pods it planned are bound there.

Costs grow with what a decision touches: nodes are indexed by flavor and, per checked
resource, sorted by free amount, so a plan starts at the tightest node that can hold its
biggest pod (a bisection), and a refusal whose pod is larger than any free space costs O(1).

The parts, one module each: model (nodes, pods, plans), inventory (what is where), holds
(what plans reserve), planner and shortcuts (plans), extender (the scheduler extender's
answers). `Inventory` puts them together for their callers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from extender.core.api.models import Admission, Workload
from extender.core.placement.extender import ExtenderAnswers
from extender.core.placement.inventory import NodeInventory
from extender.core.placement.model import (
    Node,
    Plan,
    PlannedPodSet,
    Pod,
    checked_resources,
    is_extended_resource,
    node_of,
)
from extender.core.placement.planner import Planner

__all__ = [
    "Inventory",
    "Node",
    "PlacementCheck",
    "Plan",
    "PlannedPodSet",
    "Pod",
    "checked_resources",
    "is_extended_resource",
    "node_of",
]


class Inventory(NodeInventory):
    """The node inventory, with the planner that reads it and the scheduler extender's
    answers from it. Not thread-safe: the caller holds one lock around it."""

    def __init__(self, checked: Callable[[str], bool] = is_extended_resource) -> None:
        super().__init__(checked)
        self.planner = Planner(self)
        self.extender = ExtenderAnswers(self)

    # ----- planning (Planner) ------------------------------------------------------------

    def needs_plan(self, workload: Workload) -> bool:
        return self.planner.needs_plan(workload)

    def plan(
        self, workload: Workload, admission: Admission, keep: Plan | None = None
    ) -> Plan | str:
        """A node for every pod that uses a checked resource, or why there is none; with
        `keep`, the pods of that plan on nodes still usable stay where they are."""
        return self.planner.plan(workload, admission, keep)

    def hold_one_pod(self, workload: Workload, admission: Admission) -> Plan | None:
        """Plan and hold, in one step, one pod of one checked resource (None: use `plan`)."""
        return self.planner.shortcuts.hold_one_pod(workload, admission)

    def flavor_of(self, admission: Admission) -> str:
        """The flavor a refused workload waits on: its first checked resource's."""
        return self.planner.flavor_of(admission)

    # ----- the scheduler extender (ExtenderAnswers) --------------------------------------

    def filter(
        self,
        namespace: str,
        workload: str | None,
        pod_set: str | None,
        requests: Mapping[str, int],
        candidates: Iterable[str],
    ) -> tuple[list[str], dict[str, str]]:
        """The nodes a pod may go to, and why each other one may not."""
        return self.extender.filter(namespace, workload, pod_set, requests, candidates)

    def prioritize(
        self, namespace: str, workload: str | None, pod_set: str | None, candidates: Iterable[str]
    ) -> list[tuple[str, int]]:
        """Scores 0-10: the nodes of the pod's plan first, then the fullest nodes."""
        return self.extender.prioritize(namespace, workload, pod_set, candidates)


class PlacementCheck:
    """The admission check that needs a plan: plugged into `ClusterState.admission_checks`.

    A workload refused here waits until a node of its flavor gains room; `to_requeue`
    says which ClusterQueues then try their set-aside workloads again."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._planner = inventory.planner
        self._waiting: dict[str, tuple[str, str]] = {}  # workload -> (ClusterQueue, flavor)

    def __call__(self, workload: Workload, admission: Admission) -> str | None:
        if self._topology_placed(admission):
            return None  # topology-aware scheduling places its pods (tas/scheduling.py)
        planner = self._planner
        if planner.shortcuts.hold_one_pod(workload, admission) is not None:
            if self._waiting:
                self._waiting.pop(workload.key, None)
            return None
        plan = planner.plan(workload, admission)
        if isinstance(plan, str):
            self._waiting[workload.key] = (admission.cluster_queue, planner.flavor_of(admission))
            return plan
        if plan.pod_sets:  # nothing checked: no plan needed
            self._waiting.pop(workload.key, None)
            self.inventory.assume(plan)
        return None

    def _topology_placed(self, admission: Admission) -> bool:
        flavors = self.inventory.flavors
        return any(
            (flavor := flavors.get(name)) is not None and flavor.topology_name
            for psa in admission.pod_set_assignments
            for name in psa.flavors.values()
        )

    def to_requeue(self, grown: set[str]) -> set[str]:
        """The ClusterQueues whose refused workloads wait on a flavor that gained room."""
        if not grown or not self._waiting:
            return set()
        ready = [k for k, (_, flavor) in self._waiting.items() if flavor in grown]
        return {self._waiting.pop(k)[0] for k in ready}

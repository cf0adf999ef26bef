"""The plans held on nodes: what each still reserves there until its pods are bound."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from extender.core.placement.model import Plan


class PlanHolds:
    """The plans known, read from admitted Workloads or assumed by this replica, and what
    each holds on its nodes: its planned pods there that are not bound yet.

    The inventory keeps the bound-pod counts this reads, and `moved` is its hook to move a
    node in its free indexes: called after each plan change on each node it touches, but not
    by `rehold`, whose caller (a pod bound or gone) moves the node itself."""

    def __init__(
        self, bound: Mapping[tuple[str, str, str], int], moved: Callable[[str], None]
    ) -> None:
        self._bound = bound  # (workload, podSet, node) -> pods bound there
        self._moved = moved
        self._recorded: dict[str, Plan] = {}  # plans read from admitted Workloads
        self._assumed: dict[str, Plan] = {}  # plans of this replica's admissions, not yet read
        # node -> workload -> what its plan still holds there (pods not bound yet)
        self.on_node: dict[str, dict[str, dict[str, int]]] = {}
        self.total: dict[str, dict[str, int]] = {}  # node -> what all plans hold there

    def plan_of(self, workload: str) -> Plan | None:
        """The plan held for a workload: the one read from the API, else this replica's."""
        return self._recorded.get(workload) or self._assumed.get(workload)

    def plans(self) -> Iterator[tuple[str, Plan]]:
        for key in {*self._recorded, *self._assumed}:
            plan = self.plan_of(key)
            if plan is not None:
                yield key, plan

    def has_plan(self, workload: str) -> bool:
        """Whether a plan is held for the workload (recorded or this replica's)."""
        return workload in self._assumed or workload in self._recorded

    def count(self) -> int:
        return len({*self._recorded, *self._assumed})

    def assume(self, plan: Plan) -> None:
        """Hold a plan this replica decided, before the admission is written."""
        key = plan.workload
        if key in self._assumed or key in self._recorded:
            self._set_plan(key, lambda: self._assumed.__setitem__(key, plan))
            return
        self._assumed[key] = plan  # the cycle's case: nothing held for it yet, nothing bound
        if len(plan.pod_sets) != 1:
            for node in set(plan.nodes()):
                self.rehold(key, node)
                self._moved(node)
            return
        ((name, ps),) = plan.pod_sets.items()
        bound = self._bound if self._bound else None
        for node, count in ps.nodes.items():
            if bound is not None and bound.get((key, name, node)):
                self.rehold(key, node)
                self._moved(node)
                continue
            self._hold(node, key, {r: count * v for r, v in ps.requests.items()})
            self._moved(node)

    def assume_on_one_node(self, plan: Plan, node: str, held: dict[str, int]) -> None:
        """`assume` for a new plan, on one node, for a workload with nothing held or bound."""
        self._hold(node, plan.workload, held)
        self._assumed[plan.workload] = plan
        self._moved(node)

    def _hold(self, node: str, workload: str, held: dict[str, int]) -> None:
        """A new plan holds `held` on a node where it held nothing."""
        on_node = self.on_node.get(node)
        if on_node is None:
            self.on_node[node] = {workload: held}
        else:
            on_node[workload] = held
        total = self.total.get(node)
        if total is None:
            self.total[node] = dict(held)
        else:
            for r, v in held.items():
                total[r] = total.get(r, 0) + v

    def forget(self, workload: str) -> None:
        """This replica's plan is void (the admission was not written, or quota was freed)."""
        plan = self._assumed.get(workload)
        if plan is None:
            return
        if workload in self._recorded:
            self._set_plan(workload, lambda: self._assumed.pop(workload, None))
            return
        del self._assumed[workload]
        for node in set(plan.nodes()):
            self.rehold(workload, node)
            self._moved(node)

    def forget_all(self) -> None:
        """A new term as leader: what an earlier term assumed is known from the API or void."""
        for workload in list(self._assumed):
            self.forget(workload)

    def record(self, workload: str, plan: Plan | None) -> None:
        """The plan an admitted Workload carries, or None once it holds no quota."""
        if plan is None:
            self._set_plan(workload, lambda: self._recorded.pop(workload, None))
        elif self._recorded.get(workload) != plan:
            self._set_plan(workload, lambda: self._recorded.__setitem__(workload, plan))

    def _set_plan(self, workload: str, change: Callable[[], object]) -> None:
        before = self.plan_of(workload)
        change()
        after = self.plan_of(workload)
        if before == after:
            return
        nodes = set(before.nodes() if before else ()) | set(after.nodes() if after else ())
        for node in nodes:
            self.rehold(workload, node)
            self._moved(node)

    def rehold(self, workload: str, node: str) -> None:
        """What a plan still holds on a node: its planned pods there not bound yet."""
        plan = self.plan_of(workload)
        held: dict[str, int] = {}
        if plan is not None:
            for name, ps in plan.pod_sets.items():
                waiting = ps.nodes.get(node, 0) - self._bound.get((workload, name, node), 0)
                for r, v in ps.requests.items():
                    if waiting > 0:
                        held[r] = held.get(r, 0) + waiting * v
        on_node = self.on_node.get(node)
        before = on_node.get(workload) if on_node is not None else None
        if before == (held or None):
            return
        total = self.total.setdefault(node, {})
        for r, v in (before or {}).items():
            total[r] -= v
        for r, v in held.items():
            total[r] = total.get(r, 0) + v
        if held:
            self.on_node.setdefault(node, {})[workload] = held
        elif on_node is not None:
            on_node.pop(workload, None)
            if not on_node:
                del self.on_node[node]
        if not any(total.values()):
            del self.total[node]

    def holder(self, node: str, resource: str) -> str | None:
        """The workload whose plan holds the most of a resource on a node."""
        holders = self.on_node.get(node, {})
        best = max(holders.items(), key=lambda kv: (kv[1].get(resource, 0), kv[0]), default=None)
        return best[0] if best and best[1].get(resource, 0) > 0 else None

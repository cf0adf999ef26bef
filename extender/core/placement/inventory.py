"""The node inventory: nodes per flavor by free amount, their pods, and the plans held on them.

A plan is held on its nodes (reserved) until the pods it planned are bound there: `holds`
keeps the plans and what they hold, the inventory the nodes, their pods and the indexes. Nodes are
indexed by flavor and, per checked resource, bucketed by free amount, so the planner starts at
the tightest node that can hold a pod (a bisection) and sees at once when none can.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet

from extender.core.api.models import ResourceFlavor
from extender.core.placement.holds import PlanHolds
from extender.core.placement.model import Node, Plan, Pod, is_extended_resource


class FreeIndex:
    """The nodes of one flavor by their free amount of one resource: a bucket per amount,
    the amounts kept sorted. Accelerators come in few amounts (0-8 GPUs a node), so moving a
    node costs a few list and dict operations, not a shift of a list as long as the cluster.

    A bucket is a list with each node's position beside it (removal swaps in the last), not
    a dict: nodes move between buckets all the time, and a dict that has lost many keys
    makes finding its first one walk every slot they left."""

    __slots__ = ("_amounts", "_buckets", "_position")

    def __init__(self) -> None:
        self._buckets: dict[int, list[str]] = {}
        self._amounts: list[int] = []
        self._position: dict[str, int] = {}

    def add(self, amount: int, name: str) -> None:
        bucket = self._buckets.get(amount)
        if bucket is None:
            bucket = self._buckets[amount] = []
            bisect.insort(self._amounts, amount)
        self._position[name] = len(bucket)
        bucket.append(name)

    def remove(self, amount: int, name: str) -> None:
        bucket = self._buckets.get(amount)
        at = self._position.get(name)
        if bucket is None or at is None or at >= len(bucket) or bucket[at] != name:
            return
        del self._position[name]
        last = bucket.pop()
        if at < len(bucket):
            bucket[at] = last
            self._position[last] = at
        if not bucket:
            del self._buckets[amount]
            del self._amounts[bisect.bisect_left(self._amounts, amount)]

    def most(self) -> int | None:
        return self._amounts[-1] if self._amounts else None

    def at_least(self, need: int) -> Iterator[tuple[int, str]]:
        """(free, node), tightest first, for the nodes with at least `need` free."""
        amounts, buckets = self._amounts, self._buckets
        for i in range(bisect.bisect_left(amounts, need), len(amounts)):
            amount = amounts[i]
            for name in buckets[amount]:
                yield amount, name

    def tightest(self, need: int) -> tuple[int, str] | None:
        """(free, node) of a node in the tightest bucket with at least `need` free."""
        amounts = self._amounts
        i = bisect.bisect_left(amounts, need)
        if i == len(amounts):
            return None
        amount = amounts[i]
        return amount, self._buckets[amount][0]  # the node `at_least` would give first

    def roomiest(self) -> Iterator[tuple[int, str]]:
        """(free, node), roomiest first."""
        for amount in reversed(self._amounts):
            for name in self._buckets[amount]:
                yield amount, name


NO_NODES = FreeIndex()  # what a flavor without nodes of a resource has
_NOTHING: Mapping[str, int] = {}
_NO_NAMES: AbstractSet[str] = frozenset()


class NodeInventory:
    """Nodes, the pods bound to them and the plans held on them; the planner and the
    scheduler extender read it. Not thread-safe: the caller holds one lock around it.

    The plans and what they hold are `holds` (a PlanHolds); the inventory tells it which pods
    are bound, and it has the inventory move a node in the free indexes when a plan changes."""

    def __init__(self, checked: Callable[[str], bool] = is_extended_resource) -> None:
        self.checked = checked
        self.nodes: dict[str, Node] = {}
        self.flavors: dict[str, ResourceFlavor] = {}
        self._pods: dict[str, Pod] = {}
        self._used: dict[str, dict[str, int]] = {}  # node -> checked resource -> by pods
        self._bound: dict[tuple[str, str, str], int] = {}  # (workload, podSet, node) -> pods
        self.holds = PlanHolds(self._bound, self._reindex)
        # The holds' own dicts (never replaced), read here without a hop: free() and _reindex
        # run per candidate node and per pod.
        self._held = self.holds.on_node  # node -> workload -> what its plan still holds there
        self._held_total = self.holds.total  # node -> what all plans hold there
        self._members: dict[str, set[str]] = {}  # flavor -> its usable nodes
        self._flavors_of: dict[str, tuple[str, ...]] = {}  # node -> flavors it belongs to
        self._free: dict[tuple[str, str], FreeIndex] = {}  # (flavor, resource) -> nodes
        # node -> checked resource -> its free amount as indexed (read by the planner)
        self.free_amounts: dict[str, dict[str, int]] = {}
        self._score: dict[str, int] = {}  # node -> packing score (prioritize)
        # resource -> whether it is checked, as asked so far (read by the shortcuts)
        self.checked_memo: dict[str, bool] = {}
        # What the controller acts on: flavors whose free room grew, plans a node change broke.
        self.grown: set[str] = set()
        self.disturbed: set[str] = set()

    # ----- what is checked ---------------------------------------------------------------

    def is_checked(self, resource: str) -> bool:
        known = self.checked_memo.get(resource)
        if known is None:
            known = self.checked_memo[resource] = self.checked(resource)
        return known

    def checked_requests(self, requests: Mapping[str, int]) -> dict[str, int]:
        return {r: v for r, v in requests.items() if v > 0 and self.is_checked(r)}

    # ----- nodes and flavors -------------------------------------------------------------

    def set_flavors(self, flavors: Iterable[ResourceFlavor]) -> None:
        """The ResourceFlavors changed: every node's membership is worked out again."""
        fresh = {f.name: f for f in flavors}
        if fresh == self.flavors:
            return
        for name in list(self.nodes):
            self._unindex(name)
        self.flavors = fresh
        self._members = {name: set() for name in fresh}
        for name in self.nodes:
            self._index(name)
        self.grown.update(fresh)

    def set_node(self, node: Node) -> None:
        old = self.nodes.get(node.name)
        if old == node:
            return
        self._unindex(node.name)
        self.nodes[node.name] = node
        self._index(node.name)
        if old is None or (node.usable and not old.usable) or node.allocatable != old.allocatable:
            self.grown.update(self._flavors_of.get(node.name, ()))
        if old is not None and old.usable and not node.usable:
            self._disturb(node.name)

    def delete_node(self, name: str) -> None:
        if name not in self.nodes:
            return
        self._unindex(name)
        self._disturb(name)
        del self.nodes[name]

    def _disturb(self, node: str) -> None:
        self.disturbed.update(k for k, p in self.holds.plans() if node in p.nodes())

    def _node_flavors(self, node: Node) -> tuple[str, ...]:
        if not node.usable:
            return ()
        return tuple(
            name
            for name, flavor in self.flavors.items()
            if all(node.labels.get(k) == v for k, v in flavor.node_labels.items())
        )

    def _unindex(self, name: str) -> None:
        indexed = self.free_amounts.pop(name, {})
        self._score.pop(name, None)
        for flavor in self._flavors_of.pop(name, ()):
            self._members[flavor].discard(name)
            for resource, free in indexed.items():
                entries = self._free.get((flavor, resource))
                if entries is not None:
                    entries.remove(free, name)

    def _index(self, name: str) -> None:
        node = self.nodes[name]
        flavors = self._node_flavors(node)
        self._flavors_of[name] = flavors
        free = {
            r: self.free(name, r) for r, v in node.allocatable.items() if v and self.is_checked(r)
        }
        self.free_amounts[name] = free
        for flavor in flavors:
            self._members.setdefault(flavor, set()).add(name)
            for resource, amount in free.items():
                index = self._free.get((flavor, resource))
                if index is None:
                    index = self._free[(flavor, resource)] = FreeIndex()
                index.add(amount, name)

    def _reindex(self, name: str) -> None:
        """The node's free amounts changed (pods, plans): move it in the sorted indexes."""
        indexed = self.free_amounts.get(name)
        if indexed is None:
            return
        allocatable = self.nodes[name].allocatable
        used = self._used.get(name, _NOTHING)
        held = self._held_total.get(name, _NOTHING)
        flavors: tuple[str, ...] | None = None
        grew = False
        for resource, old in indexed.items():
            new = allocatable.get(resource, 0) - used.get(resource, 0) - held.get(resource, 0)
            if new == old:
                continue
            if flavors is None:
                flavors = self._flavors_of.get(name, ())
                self._score.pop(name, None)  # worked out again when the extender asks
            grew |= new > old
            indexed[resource] = new
            for flavor in flavors:
                index = self._free[(flavor, resource)]
                index.remove(old, name)
                index.add(new, name)
        if grew and flavors:
            self.grown.update(flavors)

    def score_of(self, name: str) -> int:
        """The extender's packing score of a node, worked out when first asked after a change."""
        score = self._score.get(name)
        if score is None:
            node, free = self.nodes.get(name), self.free_amounts.get(name)
            score = 0 if node is None or free is None else _score(node, free)
            self._score[name] = score
        return score

    # ----- pods --------------------------------------------------------------------------

    def set_pod(self, pod: Pod) -> None:
        """A pod bound to a node and not terminated (a new one, or one that changed)."""
        old = self._pods.get(pod.key)
        if old == pod:
            return
        if old is not None:
            self._remove_pod(old)
        requests = self.checked_requests(pod.requests)
        if not requests and pod.workload is None:
            return  # it uses nothing checked, and no plan waits for it
        pod = Pod(pod.key, pod.node, requests, pod.workload, pod.pod_set)
        self._pods[pod.key] = pod
        used = self._used.setdefault(pod.node, {})
        for r, v in requests.items():
            used[r] = used.get(r, 0) + v
        if pod.workload is not None and pod.pod_set is not None:
            slot = (pod.workload, pod.pod_set, pod.node)
            self._bound[slot] = self._bound.get(slot, 0) + 1
            self.holds.rehold(pod.workload, pod.node)
        self._reindex(pod.node)

    def delete_pod(self, key: str) -> None:
        """A pod is gone, or terminated (Succeeded or Failed: it holds nothing)."""
        old = self._pods.get(key)
        if old is not None:
            self._remove_pod(old)
            self._reindex(old.node)

    def _remove_pod(self, pod: Pod) -> None:
        del self._pods[pod.key]
        used = self._used.get(pod.node, {})
        for r, v in pod.requests.items():
            used[r] = used.get(r, 0) - v
            if used[r] <= 0:
                del used[r]
        if not used:
            self._used.pop(pod.node, None)
        if pod.workload is not None and pod.pod_set is not None:
            slot = (pod.workload, pod.pod_set, pod.node)
            self._bound[slot] -= 1
            if not self._bound[slot]:
                del self._bound[slot]
            self.holds.rehold(pod.workload, pod.node)

    # ----- plans (PlanHolds) -------------------------------------------------------------

    def plan_of(self, workload: str) -> Plan | None:
        """The plan held for a workload: the one read from the API, else this replica's."""
        return self.holds.plan_of(workload)

    def assume(self, plan: Plan) -> None:
        """Hold a plan this replica decided, before the admission is written."""
        self.holds.assume(plan)

    def forget(self, workload: str) -> None:
        """This replica's plan is void (the admission was not written, or quota was freed)."""
        self.holds.forget(workload)

    def forget_all(self) -> None:
        """A new term as leader: what an earlier term assumed is known from the API or void."""
        self.holds.forget_all()

    def record(self, workload: str, plan: Plan | None) -> None:
        """The plan an admitted Workload carries, or None once it holds no quota."""
        self.holds.record(workload, plan)

    # ----- free room ---------------------------------------------------------------------

    def free(self, node: str, resource: str, *, ignoring: str | None = None) -> int:
        """Allocatable minus what bound pods use and plans hold (a plan may be ignored)."""
        n = self.nodes.get(node)
        if n is None:
            return 0
        amount = n.allocatable.get(resource, 0) - self._used.get(node, {}).get(resource, 0)
        total = self._held_total.get(node)
        if total is not None:
            amount -= total.get(resource, 0)
            if ignoring is not None:
                amount += self._held[node].get(ignoring, {}).get(resource, 0)
        return amount

    # ----- what the planner and the extender read ----------------------------------------

    def free_index(self, flavor: str, resource: str) -> FreeIndex:
        """The flavor's nodes by their free amount of a resource."""
        return self._free.get((flavor, resource), NO_NODES)

    def nodes_of(self, flavor: str) -> AbstractSet[str]:
        """The usable nodes of a flavor."""
        return self._members.get(flavor, _NO_NAMES)

    def bound(self, workload: str, pod_set: str, node: str) -> int:
        """How many of a podSet's pods are bound to a node."""
        return self._bound.get((workload, pod_set, node), 0)

    def holds_on(self, node: str) -> bool:
        """Whether any plan holds anything on a node."""
        return node in self._held

    def used(self, node: str, resource: str) -> int:
        """What the pods bound to a node use of a resource."""
        return self._used.get(node, _NOTHING).get(resource, 0)

    # ----- what the controller acts on ---------------------------------------------------

    def take_grown(self) -> set[str]:
        grown, self.grown = self.grown, set()
        return grown

    def take_disturbed(self) -> set[str]:
        disturbed, self.disturbed = self.disturbed, set()
        return disturbed

    def counts(self) -> tuple[int, int, int]:
        """(nodes, pods, plans) held."""
        return len(self.nodes), len(self._pods), self.holds.count()


def _score(node: Node, free: Mapping[str, int]) -> int:
    """The extender's packing score: how full the node's fullest checked resource is, 0-9
    (a plan's own nodes score 10)."""
    fullest = max(
        ((node.allocatable[r] - max(0, f)) / node.allocatable[r] for r, f in free.items()),
        default=0.0,
    )
    return min(9, int(fullest * 9))

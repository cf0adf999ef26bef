"""Physical fit on accelerator nodes: node inventory, placement planner, extender filter and scores.

Kueue admits on quota alone, so an 8-GPU pod can be admitted while the free GPUs are spread
four and four over two nodes. Here a workload that uses a physically checked resource (by
default every extended resource: nvidia.com/gpu, google.com/tpu, ...) is admitted only with
a plan: a node for every pod of every podSet, found first-fit decreasing on the tightest node,
in one topology domain when its flavor names a topology label. The plan is held on the nodes
(reserved) until the pods it planned are bound there.

Costs grow with what a decision touches: nodes are indexed by flavor and, per checked
resource, sorted by free amount, so a plan starts at the tightest node that can hold its
biggest pod (a bisection), and a refusal whose pod is larger than any free space costs O(1).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from extender.core.labels import Toleration, tolerated
from extender.core.models import Admission, PodSet, ResourceFlavor, Workload
from extender.core.placement_model import (
    Node,
    Plan,
    PlannedPodSet,
    Pod,
    checked_resources,
    is_extended_resource,
    matches_affinity,
    node_of,
)
from extender.core.quantity import format_amount

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

_SHOWN_NODES = 5  # nodes named in a refusal message


class _FreeIndex:
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


_NO_NODES = _FreeIndex()
_NOTHING: Mapping[str, int] = {}


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


class Inventory:
    """Nodes, the pods bound to them and the plans held on them; the planner and the
    scheduler extender read it. Not thread-safe: the caller holds one lock around it."""

    def __init__(self, checked: Callable[[str], bool] = is_extended_resource) -> None:
        self.checked = checked
        self.nodes: dict[str, Node] = {}
        self.flavors: dict[str, ResourceFlavor] = {}
        self._pods: dict[str, Pod] = {}
        self._used: dict[str, dict[str, int]] = {}  # node -> checked resource -> by pods
        # node -> workload -> what its plan still holds there (pods not bound yet)
        self._held: dict[str, dict[str, dict[str, int]]] = {}
        self._held_total: dict[str, dict[str, int]] = {}  # node -> what all plans hold there
        self._recorded: dict[str, Plan] = {}  # plans read from admitted Workloads
        self._assumed: dict[str, Plan] = {}  # plans of this replica's admissions, not yet read
        self._bound: dict[tuple[str, str, str], int] = {}  # (workload, podSet, node) -> pods
        self._members: dict[str, set[str]] = {}  # flavor -> its usable nodes
        self._flavors_of: dict[str, tuple[str, ...]] = {}  # node -> flavors it belongs to
        self._free: dict[tuple[str, str], _FreeIndex] = {}  # (flavor, resource) -> nodes
        self._indexed: dict[str, dict[str, int]] = {}  # node -> the free amounts indexed
        self._score: dict[str, int] = {}  # node -> packing score (prioritize)
        self._checked_memo: dict[str, bool] = {}
        # What the controller acts on: flavors whose free room grew, plans a node change broke.
        self.grown: set[str] = set()
        self.disturbed: set[str] = set()

    # ----- what is checked ---------------------------------------------------------------

    def is_checked(self, resource: str) -> bool:
        known = self._checked_memo.get(resource)
        if known is None:
            known = self._checked_memo[resource] = self.checked(resource)
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
        self.disturbed.update(k for k, p in self.plans() if node in p.nodes())

    def _node_flavors(self, node: Node) -> tuple[str, ...]:
        if not node.usable:
            return ()
        return tuple(
            name
            for name, flavor in self.flavors.items()
            if all(node.labels.get(k) == v for k, v in flavor.node_labels.items())
        )

    def _unindex(self, name: str) -> None:
        indexed = self._indexed.pop(name, {})
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
        self._indexed[name] = free
        for flavor in flavors:
            self._members.setdefault(flavor, set()).add(name)
            for resource, amount in free.items():
                index = self._free.get((flavor, resource))
                if index is None:
                    index = self._free[(flavor, resource)] = _FreeIndex()
                index.add(amount, name)

    def _reindex(self, name: str) -> None:
        """The node's free amounts changed (pods, plans): move it in the sorted indexes."""
        indexed = self._indexed.get(name)
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

    def _score_of(self, name: str) -> int:
        score = self._score.get(name)
        if score is None:
            node, free = self.nodes.get(name), self._indexed.get(name)
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
            self._rehold(pod.workload, pod.node)
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
            self._rehold(pod.workload, pod.node)

    # ----- plans -------------------------------------------------------------------------

    def plan_of(self, workload: str) -> Plan | None:
        """The plan held for a workload: the one read from the API, else this replica's."""
        return self._recorded.get(workload) or self._assumed.get(workload)

    def plans(self) -> Iterator[tuple[str, Plan]]:
        for key in {*self._recorded, *self._assumed}:
            plan = self.plan_of(key)
            if plan is not None:
                yield key, plan

    def assume(self, plan: Plan) -> None:
        """Hold a plan this replica decided, before the admission is written."""
        key = plan.workload
        if key in self._assumed or key in self._recorded:
            self._set_plan(key, lambda: self._assumed.__setitem__(key, plan))
            return
        self._assumed[key] = plan  # the cycle's case: nothing held for it yet, nothing bound
        if len(plan.pod_sets) != 1:
            for node in set(plan.nodes()):
                self._rehold(key, node)
                self._reindex(node)
            return
        ((name, ps),) = plan.pod_sets.items()
        bound = self._bound if self._bound else None
        for node, count in ps.nodes.items():
            if bound is not None and bound.get((key, name, node)):
                self._rehold(key, node)
                self._reindex(node)
                continue
            self._hold(node, key, {r: count * v for r, v in ps.requests.items()})
            self._reindex(node)

    def _hold(self, node: str, workload: str, held: dict[str, int]) -> None:
        """A new plan holds `held` on a node where it held nothing."""
        on_node = self._held.get(node)
        if on_node is None:
            self._held[node] = {workload: held}
        else:
            on_node[workload] = held
        total = self._held_total.get(node)
        if total is None:
            self._held_total[node] = dict(held)
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
            self._rehold(workload, node)
            self._reindex(node)

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
            self._rehold(workload, node)
            self._reindex(node)

    def _rehold(self, workload: str, node: str) -> None:
        """What a plan still holds on a node: its planned pods there not bound yet."""
        plan = self.plan_of(workload)
        held: dict[str, int] = {}
        if plan is not None:
            for name, ps in plan.pod_sets.items():
                waiting = ps.nodes.get(node, 0) - self._bound.get((workload, name, node), 0)
                for r, v in ps.requests.items():
                    if waiting > 0:
                        held[r] = held.get(r, 0) + waiting * v
        on_node = self._held.get(node)
        before = on_node.get(workload) if on_node is not None else None
        if before == (held or None):
            return
        total = self._held_total.setdefault(node, {})
        for r, v in (before or {}).items():
            total[r] -= v
        for r, v in held.items():
            total[r] = total.get(r, 0) + v
        if held:
            self._held.setdefault(node, {})[workload] = held
        elif on_node is not None:
            on_node.pop(workload, None)
            if not on_node:
                del self._held[node]
        if not any(total.values()):
            del self._held_total[node]

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

    def _holder(self, node: str, resource: str) -> str | None:
        holders = self._held.get(node, {})
        best = max(holders.items(), key=lambda kv: (kv[1].get(resource, 0), kv[0]), default=None)
        return best[0] if best and best[1].get(resource, 0) > 0 else None

    # ----- planning ----------------------------------------------------------------------

    def needs_plan(self, workload: Workload) -> bool:
        return any(self.checked_requests(ps.requests) for ps in workload.pod_sets)

    def plan(
        self, workload: Workload, admission: Admission, keep: Plan | None = None
    ) -> Plan | str:
        """A node for every pod that uses a checked resource, or why there is none.

        With `keep`, the pods of that plan on nodes still usable stay where they are and only
        the rest is placed again (a node of the plan died or was cordoned)."""
        if keep is None and len(workload.pod_sets) == 1:
            quick = self._plan_one_pod_set(workload, admission)
            if quick is not None:
                return quick
        groups = self._groups(workload, admission)
        if not groups:
            return Plan(workload.key, {})
        kept: dict[str, dict[str, int]] = {g.pod_set.name: {} for g in groups}
        if keep is not None:
            for name, ps in keep.pod_sets.items():
                for node_name, count in ps.nodes.items():
                    node = self.nodes.get(node_name)
                    if node is None or not node.ready:
                        continue  # its pods must go elsewhere
                    if node.unschedulable:  # what is already bound there may stay
                        count = min(count, self._bound.get((workload.key, name, node_name), 0))
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
        if topology is None:
            placed = self._place(groups, kept, ignoring, None)
        else:
            placed = self._place_in_domain(groups, kept, ignoring, topology)
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

    def hold_one_pod(self, workload: Workload, admission: Admission) -> Plan | None:
        """Plan and hold, in one step, the commonest workload of all: one pod that needs one
        checked resource of a flavor without topology or tolerations, on an untainted node,
        with nothing held or bound for it yet. None when the general path must answer.

        A cycle admits up to a thousand of these; this path is what keeps placement from
        doubling the cycle (see docs/performance.md)."""
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
        memo, checked = self._checked_memo, self.is_checked
        for r, v in ps.requests.items():
            if v > 0 and (memo[r] if r in memo else checked(r)):
                if resource:
                    return None  # more than one checked resource
                resource, need = r, v
        if not resource:
            return None
        flavors = self.flavors
        flavor_name = psa.flavors.get(resource, "")
        flavor = flavors.get(flavor_name)
        if flavor is None or flavor.topology_key is not None or flavor.tolerations:
            return None
        for other in psa.flavors.values():
            if other != flavor_name and (other not in flavors or flavors[other].node_labels):
                return None
        key = workload.key
        if key in self._assumed or key in self._recorded:
            return None
        entries = self._free.get((flavor_name, resource))
        found = entries.tightest(need) if entries is not None else None
        if found is None:
            return None
        _, name = found
        if self.nodes[name].taints:
            return None
        self._hold(name, key, {resource: need})
        flavors_used = tuple(dict.fromkeys(psa.flavors.values()))
        plan = Plan(key, {ps.name: PlannedPodSet({resource: need}, {name: 1}, flavors_used)})
        self._assumed[key] = plan
        self._reindex(name)
        return plan

    def _plan_one_pod_set(self, workload: Workload, admission: Admission) -> Plan | None:
        """The common case at a fraction of the cost: one podSet, no topology, placed from
        the tightest node that holds one pod. None when the general search must answer
        (a refusal, which it phrases, included)."""
        ps = workload.pod_sets[0]
        requests = self.checked_requests(ps.requests)
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
        flavor = self.flavors.get(flavor_name or "")
        if flavor is None or flavor.topology_key is not None:
            return None
        for other in psa.flavors.values():
            if other != flavor_name and (
                other not in self.flavors or self.flavors[other].node_labels
            ):
                return None
        entries = self._free.get((flavor.name, primary))
        need = requests[primary]
        most = entries.most() if entries is not None else None
        if entries is None or most is None or most < need:
            return None
        remaining = psa.count or ps.count
        constrained = bool(ps.node_selector or ps.required_terms)
        tolerations = ps.tolerations + flavor.tolerations
        indexed, nodes_by_name = self._indexed, self.nodes
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
                flavors = tuple(dict.fromkeys(psa.flavors.values()))
                return Plan(workload.key, {ps.name: PlannedPodSet(requests, placed, flavors)})
        return None

    def flavor_of(self, admission: Admission) -> str:
        """The flavor a refused workload waits on: its first checked resource's."""
        for psa in admission.pod_set_assignments:
            for resource, flavor in psa.flavors.items():
                if self.is_checked(resource):
                    return flavor
        return ""

    def _groups(self, workload: Workload, admission: Admission) -> list[_Group]:
        assignments = {psa.name: psa for psa in admission.pod_set_assignments}
        groups = []
        for ps in workload.pod_sets:
            requests = self.checked_requests(ps.requests)
            psa = assignments.get(ps.name)
            if not requests or psa is None:
                continue
            names = dict.fromkeys(psa.flavors.values())
            flavors = tuple(self.flavors[n] for n in names if n in self.flavors)
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

    def _candidates(self, group: _Group) -> _FreeIndex:
        """The flavor's nodes by free amount of the group's primary resource."""
        return self._free.get((group.flavor, group.primary), _NO_NODES)

    def _place(
        self,
        groups: list[_Group],
        kept: dict[str, dict[str, int]],
        ignoring: str | None,
        domain: tuple[str, str] | None,
    ) -> dict[str, dict[str, int]] | str:
        taken: dict[str, dict[str, int]] = {}  # node -> what this plan takes there

        def take(node: str, group: _Group, pods: int) -> None:
            used = taken.setdefault(node, {})
            for r, v in group.requests.items():
                used[r] = used.get(r, 0) + v * pods

        for name, nodes in kept.items():
            group = next(g for g in groups if g.pod_set.name == name)
            for node_name, pods in nodes.items():
                # Pods bound there already count as used; the others are taken by the plan.
                bound = self._bound.get((ignoring or "", name, node_name), 0)
                take(node_name, group, max(0, pods - bound))
        placed = {name: dict(nodes) for name, nodes in kept.items()}

        indexed = self._indexed

        def room(node: str, group: _Group) -> int:
            """How many more of the group's pods fit on the node."""
            fits = math.inf
            have = indexed.get(node, {})  # free amounts, kept current by _reindex
            mine = taken.get(node)
            for r, v in group.requests.items():
                free = have.get(r, 0) if ignoring is None else self.free(node, r, ignoring=ignoring)
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
                node = self.nodes[node_name]
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
                return self._refusal(group, remaining, ignoring, domain)
        return placed

    def _place_in_domain(
        self,
        groups: list[_Group],
        kept: dict[str, dict[str, int]],
        ignoring: str | None,
        key: str,
    ) -> dict[str, dict[str, int]] | str:
        """All pods in one domain of the topology label: the tightest domain that holds them."""
        kept_domains = {self.nodes[n].labels.get(key) for nodes in kept.values() for n in nodes}
        free_by_domain: dict[str, int] = {}
        group = groups[0]
        for _, name in self._candidates(group).at_least(-(2**62)):
            node = self.nodes[name]
            value = node.labels.get(key)
            if value is not None and self._eligible(group, node):
                free = self.free(name, group.primary, ignoring=ignoring)
                free_by_domain[value] = free_by_domain.get(value, 0) + max(0, free)
        if kept_domains - {None}:
            free_by_domain = {d: f for d, f in free_by_domain.items() if d in kept_domains}
        total = sum(g.requests.get(group.primary, 0) * g.count for g in groups)
        first_refusal = None
        for value, free in sorted(free_by_domain.items(), key=lambda kv: (kv[1], kv[0])):
            if free < total:
                continue
            placed = self._place(groups, kept, ignoring, (key, value))
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
        flavor = self.flavors.get(group.flavor)
        name = group.flavor
        r = group.primary
        # The roomiest eligible nodes, walking the index from its roomy end: a refusal costs
        # what it shows, not the number of nodes (ties are read on a little, to name them in
        # order).
        found: list[tuple[int, str]] = []
        for free, node_name in self._candidates(group).roomiest():
            if len(found) >= _SHOWN_NODES and (free < found[-1][0] or len(found) > 16):
                break
            node = self.nodes[node_name]
            if not self._eligible(group, node):
                continue
            if domain is not None and node.labels.get(domain[0]) != domain[1]:
                continue
            if ignoring is not None:
                free = self.free(node_name, r, ignoring=ignoring)
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

    # ----- the scheduler extender --------------------------------------------------------

    def filter(
        self,
        namespace: str,
        workload: str | None,
        pod_set: str | None,
        requests: Mapping[str, int],
        candidates: Iterable[str],
    ) -> tuple[list[str], dict[str, str]]:
        """The nodes a pod may go to, and why each other one may not."""
        checked = self.checked_requests(requests)
        key = f"{namespace}/{workload}" if workload else None
        plan = self.plan_of(key) if key else None
        planned = plan.pod_sets.get(pod_set or "") if plan else None
        passed: list[str] = []
        failed: dict[str, str] = {}
        for name in candidates:
            if name not in self.nodes:
                passed.append(name)  # not known yet: kube-scheduler's own checks decide
                continue
            if planned is not None and key is not None:
                why = self._off_plan(key, pod_set or "", planned, name, checked)
            else:
                why = self._reserved(name, checked)
            if why is None:
                passed.append(name)
            else:
                failed[name] = why
        return passed, failed

    def _off_plan(
        self, key: str, pod_set: str, planned: PlannedPodSet, node: str, requests: Mapping[str, int]
    ) -> str | None:
        if node not in planned.nodes:
            members = self._flavors_of.get(node, ())
            for flavor in planned.flavors:
                if flavor not in members:
                    return f"not a node of flavor {flavor}"
            return "planned for other pods of this workload"
        if self._bound.get((key, pod_set, node), 0) >= planned.nodes[node]:
            return "planned for other pods of this workload"
        for r, v in sorted(requests.items()):
            # What its own plan holds there is room for this pod.
            free = self.free(node, r, ignoring=key)
            if free < v:
                have, need = format_amount(r, max(0, free)), format_amount(r, v)
                return f"{have} {r} free, the pod needs {need}"
        return None

    def _reserved(self, node: str, requests: Mapping[str, int]) -> str | None:
        """A pod outside any plan may not take what a plan holds."""
        if node not in self._held:
            return None  # no plan holds anything there: the common case, at once
        n = self.nodes[node]
        for r, v in sorted(requests.items()):
            unplanned = n.allocatable.get(r, 0) - self._used.get(node, {}).get(r, 0)
            if v <= unplanned and v > self.free(node, r):
                return f"reserved for workload {self._holder(node, r)}"
        return None

    def prioritize(
        self, namespace: str, workload: str | None, pod_set: str | None, candidates: Iterable[str]
    ) -> list[tuple[str, int]]:
        """Scores 0-10: the nodes of the pod's plan first, then the fullest nodes (packing
        leaves whole nodes free for big jobs)."""
        plan = self.plan_of(f"{namespace}/{workload}") if workload else None
        planned = plan.pod_sets.get(pod_set or "") if plan else None
        score = self._score_of
        if planned is None:
            return [(name, score(name)) for name in candidates]
        mine = planned.nodes
        return [(name, 10 if name in mine else score(name)) for name in candidates]

    # ----- what the controller acts on ---------------------------------------------------

    def take_grown(self) -> set[str]:
        grown, self.grown = self.grown, set()
        return grown

    def take_disturbed(self) -> set[str]:
        disturbed, self.disturbed = self.disturbed, set()
        return disturbed

    def counts(self) -> tuple[int, int, int]:
        """(nodes, pods, plans) held."""
        return len(self.nodes), len(self._pods), len({*self._recorded, *self._assumed})


def _score(node: Node, free: Mapping[str, int]) -> int:
    """The extender's packing score: how full the node's fullest checked resource is, 0-9
    (a plan's own nodes score 10)."""
    fullest = max(
        ((node.allocatable[r] - max(0, f)) / node.allocatable[r] for r, f in free.items()),
        default=0.0,
    )
    return min(9, int(fullest * 9))


def _chain(first: Iterable[str], rest: Iterable[str]) -> Iterator[str]:
    yield from list(first)
    yield from rest


class PlacementCheck:
    """The admission check that needs a plan: plugged into `ClusterState.admission_checks`.

    A workload refused here waits until a node of its flavor gains room; `to_requeue`
    says which ClusterQueues then try their set-aside workloads again."""

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self._waiting: dict[str, tuple[str, str]] = {}  # workload -> (ClusterQueue, flavor)

    def __call__(self, workload: Workload, admission: Admission) -> str | None:
        inventory = self.inventory
        if inventory.hold_one_pod(workload, admission) is not None:
            if self._waiting:
                self._waiting.pop(workload.key, None)
            return None
        plan = inventory.plan(workload, admission)
        if isinstance(plan, str):
            self._waiting[workload.key] = (admission.cluster_queue, inventory.flavor_of(admission))
            return plan
        if plan.pod_sets:  # nothing checked: no plan needed
            self._waiting.pop(workload.key, None)
            inventory.assume(plan)
        return None

    def to_requeue(self, grown: set[str]) -> set[str]:
        """The ClusterQueues whose refused workloads wait on a flavor that gained room."""
        if not grown or not self._waiting:
            return set()
        ready = [k for k, (_, flavor) in self._waiting.items() if flavor in grown]
        return {self._waiting.pop(k)[0] for k in ready}

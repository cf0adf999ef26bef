"""The cluster state the scheduler decides on, and the scheduling cycle in numbered steps.

`ClusterState` is Kueue's cache and queue manager in one: the API objects, the quota tree,
the pending queues and the admitted workloads. `ClusterState.schedule(now)` is one cycle:
it assumes admissions into the state (as Kueue assumes into its cache before writing) and
returns the decisions; the caller writes them and calls `forget` if a write fails, or
`release` once an evicted workload has stopped. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from extender.core.fairsharing import dominant_resource_share
from extender.core.flavors import (
    FIT,
    NO_CANDIDATES,
    NO_FIT,
    PREEMPT,
    PREEMPTING,
    RECLAIM,
    WAITING_FOR_QUOTA,
    Assignment,
    Mode,
    quick_fit,
    search_flavors,
)
from extender.core.models import (
    RECLAIM_ANY,
    RECLAIM_NEVER,
    WITHIN_NEVER,
    Admission,
    ClusterQueue,
    Cohort,
    FlavorResource,
    LocalQueue,
    Namespace,
    QueueingStrategy,
    ResourceFlavor,
    StopPolicy,
    Workload,
)
from extender.core.preemption import (
    IN_CLUSTER_QUEUE,
    IN_COHORT_FAIR_SHARING,
    IN_COHORT_RECLAIM_WHILE_BORROWING,
    IN_COHORT_RECLAMATION,
    AdmittedWorkload,
    Target,
    classical_targets,
    fair_sharing_targets,
    fits,
    may_have_candidates,
)
from extender.core.queues import ClusterQueueQueue
from extender.core.quota import QuotaNode, QuotaTree, add_usage, available, borrowing_level

INADMISSIBLE = "Inadmissible"
# Kueue's reason when the workload's namespace may not use the ClusterQueue.
MISCONFIGURED = "Misconfigured"
PENDING = "Pending"
WAITING_FOR_PREEMPTED = "WaitingForPreemptedWorkloads"
PREEMPTED = "Preempted"
CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
LOCAL_QUEUE_STOPPED = "LocalQueueStopped"

_PREEMPTION_WHY = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    IN_COHORT_FAIR_SHARING: "fair sharing within the cohort",
}

AdmissionCheck = Callable[[Workload, Admission], "str | None"]
"""An extra check after quota fits (e.g. physical fit on nodes): a refusal message, or None."""


@dataclass(frozen=True, slots=True)
class PendingStatus:
    """Why a workload is not admitted: the QuotaReserved=False reason and message."""

    reason: str
    message: str


class Admit(NamedTuple):
    """Decision: write this admission, then start the job."""

    workload: Workload
    admission: Admission


class Evict(NamedTuple):
    """Decision: stop this workload's job and give its quota back."""

    workload: Workload
    reason: str  # Evicted condition reason: Preempted, ClusterQueueStopped, ...
    preemption_reason: str | None  # Preempted condition reason: InClusterQueue, ...
    message: str
    preemptor: str | None = None


@dataclass(frozen=True, slots=True)
class CycleResult:
    """What one scheduling cycle decided."""

    admitted: tuple[Admit, ...] = ()
    evicted: tuple[Evict, ...] = ()
    pending: tuple[tuple[Workload, PendingStatus], ...] = ()
    heads: int = 0
    progressed: bool = False


@dataclass(slots=True)
class _Entry:
    cq: ClusterQueue
    node: QuotaNode
    queue: ClusterQueueQueue
    workload: Workload
    assignment: Assignment
    targets: Sequence[Target] = ()
    status: PendingStatus | None = None


def _nobody_borrows(root: QuotaNode, assignment: Assignment) -> bool:
    """Whether no ClusterQueue in the tree uses more than its own quota of what this needs.

    Then every ClusterQueue's own quota is still there for it: a fit within it holds.
    """
    borrowers = root.borrowers
    return not any(borrowers.get(fr) for fr in assignment.usage)


class _CycleQuota:
    """What step 5 of one cycle took from each quota tree, and what is held there for it.

    Entries were nominated against the tree as it was; this tells an entry that fitted then
    whether it still fits, as cheaply as the case allows. Quota held for this cycle only (a
    preemptor's, a lender's) is added to the tree here and taken back out at the end.
    """

    def __init__(self, classical: bool) -> None:
        self.classical = classical
        # Amounts admitted, reserved or held per tree (all flavor-resources summed: an upper
        # bound on what any one of them lost since nomination).
        self.taken: dict[int, int] = {}
        self.lenders: dict[int, list[_Entry]] = {}  # entries admitted in their own quota
        self.holds: dict[int, dict[QuotaNode, dict[FlavorResource, int]]] = {}
        self.reservations: list[_Entry] = []
        self.held: list[tuple[QuotaNode, dict[FlavorResource, int]]] = []
        # Workloads this cycle preempts: out of the tree until the cycle ends, one by one or
        # netted with their preemptor's usage into one change of its ClusterQueue.
        self.removed: list[AdmittedWorkload] = []
        self.netted: list[tuple[QuotaNode, dict[FlavorResource, int]]] = []

    def refusal(self, entry: _Entry) -> str | None:
        """None if a fit still holds, else why not. A borrower first sees lenders' holds."""
        assignment, node = entry.assignment, entry.node
        root = node.root()
        held: dict[QuotaNode, dict[FlavorResource, int]] = {}
        own = None
        if assignment.borrowing_level and self.classical:
            held = self._holds_in(root)
            own = held.pop(node, None)
            if own is not None:  # its own unused quota is its own to use
                add_usage(node, own, -1)
        spent = self.taken.get(id(root), 0)
        if (
            not spent
            or assignment.slack >= spent
            or (assignment.borrowing_level == 0 and _nobody_borrows(root, assignment))
            or fits(node, assignment.usage, True)
        ):
            return None
        if own is not None:
            add_usage(node, own)
            held[node] = own
        message = "quota was taken by another workload admitted in the same cycle"
        if held:
            keepers = sorted(n.name for n in held)
            more = f" and {len(keepers) - 3} more" if len(keepers) > 3 else ""
            message += (
                f", or kept by ClusterQueue {', '.join(keepers[:3])}{more} for its own "
                "pending workloads (lent now, it would be reclaimed at once)"
            )
        return message

    def preempt(self, entry: _Entry) -> str | None:
        """A preempting entry: if it fits once its victims are gone (with those of earlier
        preemptors of this cycle), its victims' quota is taken out and its own held for the
        rest of the cycle, as Kueue's snapshot sees a cycle's preemptions; None. Otherwise
        nothing changes and the answer is why not. The caller made sure that no victim is
        another preemptor's of this cycle."""
        node, usage = entry.node, entry.assignment.usage
        victims = [target.victim for target in entry.targets]
        net = _net_within_own(node, usage, victims)
        if net is not None:
            # One walk up the tree for the preemptor and all its victims, not one each.
            add_usage(node, net)
            self.netted.append((node, net))
            self._take(node.root(), usage.values())
            return None
        for victim in victims:
            add_usage(victim.node, victim.usage, -1)
        if not fits(node, usage, True):
            for victim in victims:
                add_usage(victim.node, victim.usage)
            return (
                f"{entry.assignment.message}; it no longer fits after the workloads admitted or "
                "preempted for earlier in this cycle"
            )
        self.removed.extend(victims)
        self.reserve(entry)
        return None

    def hold(self, entry: _Entry, amounts: Mapping[FlavorResource, int]) -> None:
        """Keep quota for a pending entry from the entries after it, for this cycle only."""
        amounts = {fr: v for fr, v in amounts.items() if v > 0}
        if not amounts:
            return
        add_usage(entry.node, amounts)
        self.held.append((entry.node, amounts))
        self._take(entry.node.root(), amounts.values())

    def admitted(self, entry: _Entry) -> None:
        """An entry was admitted (its usage is assumed): it may lend what it left unused."""
        self._take(entry.node.root(), entry.assignment.usage.values())
        if not entry.assignment.borrowing_level:
            self.lenders.setdefault(id(entry.node.root()), []).append(entry)

    def reserve(self, entry: _Entry) -> None:
        """A preemptor keeps what it needs for the rest of the cycle, so what its victims free
        (and what is free now) is not taken by an entry ordered after it."""
        add_usage(entry.node, entry.assignment.usage)
        self.reservations.append(entry)
        self._take(entry.node.root(), entry.assignment.usage.values())

    def _take(self, root: QuotaNode, amounts: Iterable[int]) -> None:
        self.taken[id(root)] = self.taken.get(id(root), 0) + sum(amounts)

    def release_holds(self) -> None:
        """Give back what preemptors reserved and lenders kept: held for this cycle only."""
        for entry in self.reservations:
            add_usage(entry.node, entry.assignment.usage, -1)
        self.reservations.clear()
        for held in self.holds.values():
            for node, amounts in held.items():
                add_usage(node, amounts, -1)
        self.holds.clear()
        for node, amounts in self.held:
            add_usage(node, amounts, -1)
        self.held.clear()
        for victim in self.removed:
            add_usage(victim.node, victim.usage)
        self.removed.clear()
        for node, net in self.netted:
            add_usage(node, net, -1)
        self.netted.clear()

    def _holds_in(self, root: QuotaNode) -> dict[QuotaNode, dict[FlavorResource, int]]:
        # Borrowers come after every entry that fits its own quota, so the lenders of a tree
        # are all known when its first borrower is reached.
        held = self.holds.get(id(root))
        if held is None:
            held = self.holds[id(root)] = _lender_holds(self.lenders.get(id(root), ()))
            for amounts in held.values():
                self._take(root, amounts.values())
        return held


def _net_within_own(
    node: QuotaNode, usage: Mapping[FlavorResource, int], victims: Sequence[AdmittedWorkload]
) -> dict[FlavorResource, int] | None:
    """The change to the node's usage of admitting this request in place of these victims,
    if arithmetic alone shows that it fits; else None (then the tree must be asked).

    It fits when every victim is the node's own, the node then stays within its own quota of
    what it requests, and no other ClusterQueue of the tree borrows any of it: every queue is
    then within its own quota, and so is every cohort (a test holds this to taking the
    victims out and asking the tree).
    """
    borrowers = node.root().borrowers
    for victim in victims:
        if victim.node is not node:
            return None
    net = dict(usage)
    for victim in victims:
        for fr, amount in victim.usage.items():
            net[fr] = net.get(fr, 0) - amount
    for fr in usage:
        for borrower in borrowers.get(fr, ()):
            if borrower is not node:
                return None
        if node.usage.get(fr, 0) + net[fr] > node.subtree.get(fr, 0):
            return None
    return net


def _lender_holds(admitted: Iterable[_Entry]) -> dict[QuotaNode, dict[FlavorResource, int]]:
    """Unused quota that ClusterQueues keep from this cycle's borrowers, held in the tree.

    A ClusterQueue that admitted in its own quota this cycle and whose next pending workload
    fits what it leaves unused will admit that workload next cycle. Lent out now, the quota
    would be reclaimed from the borrower at once (reclaimWithinCohort: Any), a preemption
    that costs the borrower its work and the API two writes. Kueue lends it and reclaims it;
    Tower keeps it until the lender's pending work no longer fits (or is parked). Only under
    BestEffortFIFO: a StrictFIFO head that never fits would keep the quota idle.
    """
    held: dict[QuotaNode, dict[FlavorResource, int]] = {}
    for entry in admitted:
        cq, node = entry.cq, entry.node
        if (
            node in held
            or cq.preemption.reclaim_within_cohort is not RECLAIM_ANY
            or entry.queue.strategy is not QueueingStrategy.BEST_EFFORT_FIFO
        ):
            continue
        head = entry.queue.head()
        if head is None:
            continue
        amounts: dict[FlavorResource, int] = {}
        for fr in cq.quotas:
            unused = node.subtree.get(fr, 0) - node.usage.get(fr, 0)
            need = sum(ps.totals.get(fr[1], 0) for ps in head.pod_sets)
            if 0 < need <= unused:
                amounts[fr] = unused
        if amounts:
            add_usage(node, amounts)
            held[node] = amounts
    return held


def _to_reserve(entry: _Entry) -> dict[FlavorResource, int]:
    """What a pending entry without preemption candidates keeps from later entries: its
    request, capped at what its nominal quota (plus borrowingLimit, when it must borrow) still
    leaves (Kueue's resourcesToReserve)."""
    node, assignment = entry.node, entry.assignment
    out: dict[FlavorResource, int] = {}
    for fr, amount in assignment.usage.items():
        used = node.usage.get(fr, 0)
        if assignment.borrowing_level > 0:
            limit = node.borrowing_limit(fr)
            out[fr] = amount if limit is None else min(amount, node.nominal(fr) + limit - used)
        else:
            out[fr] = max(0, min(amount, node.nominal(fr) - used))
    return out


class ClusterState:
    """Kueue's cache and queues: what is configured, pending and admitted."""

    def __init__(
        self, *, fair_sharing: bool = False, admission_checks: Sequence[AdmissionCheck] = ()
    ) -> None:
        self.fair_sharing = fair_sharing
        self.admission_checks = tuple(admission_checks)
        # Told the key of every workload whose quota is freed (a plan held for it goes too).
        self.release_hooks: list[Callable[[str], None]] = []
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.local_queues: dict[str, LocalQueue] = {}
        self.namespaces: dict[str, Namespace] = {}
        self.workloads: dict[str, Workload] = {}
        self.admitted: dict[str, AdmittedWorkload] = {}
        self.tree = QuotaTree.build((), ())
        self._admitted_by_cq: dict[str, dict[str, AdmittedWorkload]] = {}
        # How many admitted workloads of each priority a ClusterQueue holds.
        self._priorities_by_cq: dict[str, dict[int, int]] = {}
        self._queues: dict[str, ClusterQueueQueue] = {}
        self._queue_of: dict[str, str] = {}
        # Per quota tree, the queues holding workloads set aside as inadmissible: quota given
        # back in a tree requeues only these, so a release costs what was set aside, not the
        # number of ClusterQueues in the cohort.
        self._set_aside: dict[QuotaNode, set[ClusterQueueQueue]] = {}
        self._parked: dict[str, PendingStatus] = {}
        self._status: dict[str, PendingStatus] = {}
        self._inactive: dict[str, PendingStatus] = {}
        self._to_drain: set[str] = set()
        # The active ClusterQueues with their quota node and queue, in the order heads are taken.
        self._schedulable: list[tuple[ClusterQueue, QuotaNode, ClusterQueueQueue]] = []
        # Caches of configuration facts, rebuilt whenever the configuration changes.
        self._selected: dict[tuple[str, str], bool] = {}
        self._stopped_local_queues = False

    # ----- configuration ------------------------------------------------------------

    def configure(
        self,
        *,
        flavors: Iterable[ResourceFlavor] = (),
        cluster_queues: Iterable[ClusterQueue] = (),
        cohorts: Iterable[Cohort] = (),
        local_queues: Iterable[LocalQueue] = (),
        namespaces: Iterable[Namespace] = (),
    ) -> None:
        """Apply many objects at once, rebuilding the quota tree a single time."""
        self.flavors.update((f.name, f) for f in flavors)
        self.cohorts.update((c.name, c) for c in cohorts)
        self.local_queues.update((lq.key, lq) for lq in local_queues)
        self.namespaces.update((n.name, n) for n in namespaces)
        for cq in cluster_queues:
            self.cluster_queues[cq.name] = cq
            queue = self._queues.get(cq.name)
            if queue is None or queue.strategy is not cq.queueing_strategy:
                fresh = ClusterQueueQueue(cq.queueing_strategy)
                for workload in queue.workloads() if queue else ():
                    fresh.push(workload)
                self._queues[cq.name] = fresh
        self._config_changed()

    def apply_flavor(self, flavor: ResourceFlavor) -> None:
        """Create or update a ResourceFlavor."""
        self.flavors[flavor.name] = flavor
        self._config_changed()

    def delete_flavor(self, name: str) -> None:
        """Delete a ResourceFlavor (ClusterQueues naming it become inactive)."""
        self.flavors.pop(name, None)
        self._config_changed()

    def apply_cluster_queue(self, cq: ClusterQueue) -> None:
        """Create or update a ClusterQueue."""
        self.configure(cluster_queues=[cq])

    def delete_cluster_queue(self, name: str) -> None:
        """Delete a ClusterQueue: its pending workloads wait for it to come back."""
        self.cluster_queues.pop(name, None)
        queue = self._queues.pop(name, None)
        for workload in queue.workloads() if queue else ():
            self._queue_of.pop(workload.key, None)
        self._config_changed()

    def apply_cohort(self, cohort: Cohort) -> None:
        """Create or update a Cohort."""
        self.cohorts[cohort.name] = cohort
        self._config_changed()

    def delete_cohort(self, name: str) -> None:
        """Delete a Cohort object (the cohort stays implicit while ClusterQueues name it)."""
        self.cohorts.pop(name, None)
        self._config_changed()

    def apply_local_queue(self, lq: LocalQueue) -> None:
        """Create or update a LocalQueue."""
        self.local_queues[lq.key] = lq
        self._config_changed()

    def delete_local_queue(self, key: str) -> None:
        """Delete a LocalQueue: its pending workloads wait for it to come back."""
        self.local_queues.pop(key, None)
        for wkey, cq_name in list(self._queue_of.items()):
            workload = self.workloads[wkey]
            if f"{workload.namespace}/{workload.queue_name}" == key:
                self._queues[cq_name].remove(wkey)
                del self._queue_of[wkey]
        self._config_changed()

    def apply_namespace(self, namespace: Namespace) -> None:
        """Create or update a namespace (its labels feed namespaceSelector)."""
        self.namespaces[namespace.name] = namespace
        self._selected = {k: v for k, v in self._selected.items() if k[1] != namespace.name}
        self._requeue_all()

    def _config_changed(self) -> None:
        self._selected.clear()
        self._stopped_local_queues = any(
            lq.stop_policy is not StopPolicy.NONE for lq in self.local_queues.values()
        )
        self.tree = QuotaTree.build(self.cluster_queues.values(), self.cohorts.values())
        for admitted in self.admitted.values():
            node = self.tree.cluster_queues.get(admitted.admission.cluster_queue)
            if node is None:
                # Its ClusterQueue is gone; the quota is accounted nowhere until it finishes.
                admitted.node = QuotaNode(admitted.admission.cluster_queue, False, {})
            else:
                admitted.node = node
            add_usage(admitted.node, admitted.usage)
        self._inactive = {
            name: status
            for name, cq in self.cluster_queues.items()
            if (status := self._inactive_status(cq)) is not None
        }
        self._schedulable = [
            (self.cluster_queues[name], self.tree.cluster_queues[name], queue)
            for name, queue in self._queues.items()
            if name not in self._inactive
        ]
        self._to_drain = {
            key
            for key, admitted in self.admitted.items()
            if not admitted.evicting and self._drain_reason(admitted) is not None
        }
        for key in list(self._parked):
            self._route(self.workloads[key])
        for workload in self.workloads.values():
            key = workload.key
            if key not in self.admitted and key not in self._parked and key not in self._queue_of:
                self._route(workload)
        self._requeue_all()

    def _inactive_status(self, cq: ClusterQueue) -> PendingStatus | None:
        missing = [f for f in cq.flavor_names() if f not in self.flavors]
        if missing:
            return PendingStatus(
                INADMISSIBLE,
                f"ClusterQueue {cq.name} is inactive (FlavorNotFound): "
                f"ResourceFlavor {', '.join(missing)} does not exist",
            )
        if cq.cohort is not None and cq.cohort in self.tree.cyclic:
            return PendingStatus(
                INADMISSIBLE,
                f"ClusterQueue {cq.name} is inactive: its cohort {cq.cohort} is part of a cycle "
                "of Cohort parents",
            )
        if cq.stop_policy is not StopPolicy.NONE:
            return PendingStatus(
                INADMISSIBLE,
                f"ClusterQueue {cq.name} is stopped (stopPolicy {cq.stop_policy.value})",
            )
        unacted = self._unacted(cq)
        if unacted:
            return PendingStatus(
                INADMISSIBLE,
                f"ClusterQueue {cq.name} is inactive: it uses {'; '.join(unacted)}, which "
                "Tower does not act on (docs/kueue-fields.md)",
            )
        return None

    def _unacted(self, cq: ClusterQueue) -> list[str]:
        """What the ClusterQueue (or a flavor it names) sets that Tower does not act on."""
        out = list(cq.unacted)
        for name in dict.fromkeys(cq.flavor_names()):
            flavor = self.flavors.get(name)
            if flavor is not None and flavor.topology_name and flavor.topology_key is None:
                out.append(f"ResourceFlavor {name}'s spec.topologyName")
        return out

    def cluster_queue_active(self, name: str) -> tuple[bool, str, str]:
        """The Active condition of a ClusterQueue: (status, reason, message)."""
        cq = self.cluster_queues.get(name)
        if cq is None:
            return False, "NotFound", f"ClusterQueue {name} does not exist"
        status = self._inactive.get(name)
        if status is None:
            return True, "Ready", "Can admit new workloads"
        if cq.stop_policy is not StopPolicy.NONE:
            return False, "Stopped", status.message
        if any(f not in self.flavors for f in cq.flavor_names()):
            return False, "FlavorNotFound", status.message
        if any(p in ("spec.admissionChecksStrategy", "spec.admissionChecks") for p in cq.unacted):
            return False, "AdmissionCheckNotFound", status.message  # Kueue's reason
        if self._unacted(cq):
            return False, "UnsupportedField", status.message
        return False, "Unknown", status.message

    # ----- workloads ------------------------------------------------------------------

    def add_workload(self, workload: Workload) -> None:
        """A new pending workload (or an updated one that holds no quota)."""
        if workload.key in self.admitted:
            raise ValueError(f"workload {workload.key} is admitted; release it first")
        self._unqueue(workload.key)
        self.workloads[workload.key] = workload
        self._route(workload)

    def delete_workload(self, key: str) -> None:
        """A workload is gone (its job was deleted): drop it and free what it held."""
        self._unqueue(key)
        self._status.pop(key, None)
        if key in self.admitted:
            self._release_quota(key)
        self.workloads.pop(key, None)

    def finish(self, key: str) -> None:
        """A workload finished: its quota is released at once."""
        self.delete_workload(key)

    def assume(
        self,
        workload: Workload,
        admission: Admission,
        now: float,
        usage: Mapping[FlavorResource, int] | None = None,
    ) -> None:
        """Hold quota for an admission before it is written (Kueue's assumeWorkload)."""
        key = workload.key
        self._unqueue(key)
        self.workloads[key] = workload
        self._status.pop(key, None)
        node = self.tree.cluster_queues[admission.cluster_queue]
        held = admission.usage() if usage is None else usage
        admitted = AdmittedWorkload(workload, admission, held, node, now)
        add_usage(node, held)
        self.admitted[key] = admitted
        cq_name = admission.cluster_queue
        by_cq = self._admitted_by_cq.get(cq_name)
        if by_cq is None:
            by_cq = self._admitted_by_cq[cq_name] = {}
        by_cq[key] = admitted
        priorities = self._priorities_by_cq.get(cq_name)
        if priorities is None:
            priorities = self._priorities_by_cq[cq_name] = {}
        priorities[workload.priority] = priorities.get(workload.priority, 0) + 1

    def still_needed(self, eviction: Evict) -> bool:
        """Whether an eviction a cycle decided still holds now that time has passed: its
        workload still holds quota, and the preemptor it made room for is still pending,
        or the queue it drains is still stopped."""
        holder = self.admitted.get(eviction.workload.key)
        if holder is None:
            return False
        if eviction.preemptor is not None:
            return eviction.preemptor in self.workloads and eviction.preemptor not in self.admitted
        return self._drain_reason(holder) is not None

    def keep(self, key: str) -> None:
        """An eviction a cycle decided is not carried out: the workload keeps its quota, and a
        later cycle may choose it again."""
        holder = self.admitted.get(key)
        if holder is not None:
            holder.evicting = False

    def forget(self, key: str) -> None:
        """Undo an assumed admission whose write failed: the workload is pending again."""
        if key in self.admitted:
            self._release_quota(key)
            self._route(self.workloads[key])

    def release(self, key: str) -> None:
        """An evicted workload has stopped: free its quota and queue it again."""
        self.forget(key)

    def _release_quota(self, key: str) -> None:
        admitted = self.admitted.pop(key)
        for hook in self.release_hooks:
            hook(key)
        self._to_drain.discard(key)
        add_usage(admitted.node, admitted.usage, -1)
        by_cq = self._admitted_by_cq.get(admitted.admission.cluster_queue, {})
        by_cq.pop(key, None)
        priorities = self._priorities_by_cq[admitted.admission.cluster_queue]
        priorities[admitted.workload.priority] -= 1
        if not priorities[admitted.workload.priority]:
            del priorities[admitted.workload.priority]
        self._requeue_cohort(admitted.node)

    def _route(self, workload: Workload) -> None:
        key = workload.key
        self._parked.pop(key, None)
        if workload.unacted:
            self._park(
                key,
                f"{workload.owner_kind or 'the Workload'} sets {', '.join(workload.unacted)}, "
                "which Tower does not act on; it waits while set (docs/kueue-fields.md)",
            )
            return
        lq = self.local_queues.get(f"{workload.namespace}/{workload.queue_name}")
        if lq is None:
            self._park(
                key,
                f"LocalQueue {workload.queue_name} does not exist in namespace "
                f"{workload.namespace}",
            )
            return
        queue = self._queues.get(lq.cluster_queue)
        if queue is None:
            self._park(
                key,
                f"LocalQueue {lq.key} points at ClusterQueue {lq.cluster_queue}, "
                "which does not exist",
            )
            return
        queue.push(workload)
        self._queue_of[key] = lq.cluster_queue

    def _park(self, key: str, message: str) -> None:
        self._parked[key] = PendingStatus(INADMISSIBLE, message)

    def _unqueue(self, key: str) -> None:
        self._parked.pop(key, None)
        cq_name = self._queue_of.pop(key, None)
        if cq_name is not None and cq_name in self._queues:
            self._queues[cq_name].remove(key)

    def _set_aside_in(
        self,
        node: QuotaNode,
        queue: ClusterQueueQueue,
        workload: Workload,
        *,
        even_strict: bool = False,
    ) -> bool:
        """Set a head that cannot fit aside (BestEffortFIFO, or any queue when `even_strict`);
        whether its queue moved."""
        if not queue.mark_inadmissible(workload, even_strict=even_strict):
            return False
        root = node.root()
        aside = self._set_aside.get(root)
        if aside is None:
            aside = self._set_aside[root] = set()
        aside.add(queue)
        return True

    def _requeue_cohort(self, node: QuotaNode) -> None:
        for queue in self._set_aside.pop(node.root(), ()):
            queue.requeue_inadmissible()

    def requeue_inadmissible(self, cq_names: Iterable[str]) -> bool:
        """Something an admission check waits on changed (nodes freed room): the workloads
        these ClusterQueues set aside are tried again. Whether any queue was found."""
        found = False
        for name in cq_names:
            queue = self._queues.get(name)
            if queue is not None:
                queue.requeue_inadmissible()
                found = True
        return found

    def _requeue_all(self) -> None:
        for queue in self._queues.values():
            queue.requeue_inadmissible()
        self._set_aside.clear()

    # ----- queries --------------------------------------------------------------------

    def admitted_in(self, cq_name: str) -> Iterable[AdmittedWorkload]:
        """Admitted workloads of one ClusterQueue."""
        return self._admitted_by_cq.get(cq_name, {}).values()

    def lowest_priority(self, cq_name: str) -> int | None:
        """The lowest priority among a ClusterQueue's admitted workloads."""
        priorities = self._priorities_by_cq.get(cq_name)
        return min(priorities) if priorities else None

    def pending_in(self, cq_name: str) -> tuple[int, int]:
        """(active, inadmissible) pending workloads of one ClusterQueue."""
        queue = self._queues.get(cq_name)
        return queue.counts() if queue else (0, 0)

    def pending_workloads_in(self, cq_name: str) -> Iterator[Workload]:
        """The workloads queued in one ClusterQueue (parked ones are in none)."""
        queue = self._queues.get(cq_name)
        return queue.workloads() if queue else iter(())

    def pending(self) -> Iterator[tuple[Workload, PendingStatus]]:
        """Every pending workload with why it waits."""
        for key, workload in self.workloads.items():
            if key not in self.admitted:
                yield workload, self.pending_status(key)

    def pending_status(self, key: str) -> PendingStatus:
        """Why one pending workload is waiting, in words a person understands."""
        if key in self._parked:
            return self._parked[key]
        cq_name = self._queue_of.get(key)
        if cq_name is not None and cq_name in self._inactive:
            return self._inactive[cq_name]
        status = self._status.get(key)
        if status is not None:
            return status
        return PendingStatus(PENDING, f"waiting in ClusterQueue {cq_name} for its turn")

    def queue_is_inadmissible(self, cq_name: str, key: str) -> bool:
        """Whether a queued workload was set aside until quota is given back."""
        queue = self._queues.get(cq_name)
        return queue is not None and queue.is_inadmissible(key)

    def preemption_targets(
        self,
        workload: Workload,
        cq_name: str,
        flavors: Mapping[str, Mapping[str, str]],
        need: Iterable[FlavorResource] | None = None,
    ) -> list[Target]:
        """Whom preemption would evict for a workload given the flavor of each resource of
        each pod set, and the flavor-resources that need room (default: those that do not
        fit now)."""
        cq, node = self.cluster_queues[cq_name], self.tree.cluster_queues[cq_name]
        request: dict[FlavorResource, int] = {}
        for pod_set in workload.pod_sets:
            chosen = flavors.get(pod_set.name, {})
            for resource, amount in pod_set.totals.items():
                if resource in chosen and amount > 0:
                    fr = (chosen[resource], resource)
                    request[fr] = request.get(fr, 0) + amount
        if need is None:
            wanted = frozenset(fr for fr, amount in request.items() if available(node, fr) < amount)
        else:
            wanted = frozenset(need)
        return self._targets(workload, cq, node, request, wanted) if wanted else []

    def class_head(self, key: str) -> str | None:
        """The workload a cycle tries for this one's whole equivalence class (the same shape,
        priority and namespace): its reason is this one's."""
        cq_name = self._queue_of.get(key)
        queue = self._queues.get(cq_name) if cq_name is not None else None
        return queue.class_head(key) if queue is not None else None

    def local_queue_of(self, workload: Workload) -> LocalQueue | None:
        """The LocalQueue a workload was submitted to, if it exists."""
        return self.local_queues.get(f"{workload.namespace}/{workload.queue_name}")

    # ----- the scheduling cycle -------------------------------------------------------

    def schedule(self, now: float) -> CycleResult:
        """Run one scheduling cycle at time `now` and return its decisions."""
        evicted: list[Evict] = []
        pending: list[tuple[Workload, PendingStatus]] = []
        progressed = False

        # 0. Drain: stopped queues with HoldAndDrain give back what they admitted.
        for key in sorted(self._to_drain):
            holder = self.admitted[key]
            why = self._drain_reason(holder)
            if why is not None and not holder.evicting:
                holder.evicting = True
                evicted.append(Evict(holder.workload, why[0], None, why[1]))
        self._to_drain.clear()

        # 1. Heads: one workload per active ClusterQueue.
        heads = self._heads()

        # 2. Snapshot: the quota tree is the snapshot; admissions are assumed into it as
        #    they happen, so later entries of this cycle see what earlier ones took.

        # 3. Nominate: flavor assignment, and preemption targets where only preemption helps.
        entries = [self._nominate(*head) for head in heads]

        # 4. Order: classical (the least borrowing first, then priority, FIFO) or fair-sharing
        #    tournament.
        ordered = self._fair_order(entries) if self.fair_sharing else iter(self._classical(entries))

        # 5. Admit or preempt, entry by entry. A preempting entry reserves its quota in the
        #    snapshot for the rest of the cycle, so what its victims free (and what is free
        #    now) is not taken by another entry that Kueue ordered after it. Borrowers come
        #    after every entry that fits its own quota; a lender with pending work that fits
        #    its unused quota keeps it from them (_lender_holds).
        admitted: list[Admit] = []
        claimed: set[str] = set()
        quota = _CycleQuota(classical=not self.fair_sharing)
        for entry in ordered:
            workload, assignment = entry.workload, entry.assignment
            if assignment.mode == FIT:
                taken_meanwhile = quota.refusal(entry)
                if taken_meanwhile is not None:
                    entry.status = PendingStatus(WAITING_FOR_QUOTA, taken_meanwhile)
                    progressed = True  # retried at once: not parked as inadmissible
                    continue
                admission = assignment.admission(entry.cq.name, workload)
                refusal = (
                    next(
                        (m for check in self.admission_checks if (m := check(workload, admission))),
                        None,
                    )
                    if self.admission_checks
                    else None
                )
                if refusal is not None:
                    entry.status = PendingStatus(INADMISSIBLE, refusal)
                    # Progress only if the queue moved (under StrictFIFO the head stays).
                    if self._set_aside_in(entry.node, entry.queue, workload):
                        progressed = True
                    continue
                self.assume(workload, admission, now, assignment.usage)
                quota.admitted(entry)
                admitted.append(Admit(workload, admission))
                progressed = True
            elif assignment.mode in PREEMPTING and entry.targets:
                keys = {t.victim.workload.key for t in entry.targets}
                if keys & claimed:
                    entry.status = PendingStatus(
                        WAITING_FOR_QUOTA,
                        f"{assignment.message}; the workloads it would preempt are being "
                        "preempted for another workload",
                    )
                    continue
                no_longer_fits = quota.preempt(entry)
                if no_longer_fits is not None:
                    entry.status = PendingStatus(WAITING_FOR_QUOTA, no_longer_fits)
                    continue
                claimed |= keys
                for target in entry.targets:
                    if target.victim.evicting:
                        continue
                    target.victim.evicting = True
                    progressed = True
                    evicted.append(
                        Evict(
                            target.victim.workload,
                            PREEMPTED,
                            target.reason,
                            f"Preempted to accommodate a workload (UID: {workload.uid}) due to "
                            f"{_PREEMPTION_WHY[target.reason]}",
                            workload.key,
                        )
                    )
                names = ", ".join(sorted(keys))
                entry.status = PendingStatus(
                    WAITING_FOR_PREEMPTED,
                    f"{assignment.message}; waiting for preempted workloads to stop: {names}",
                )
            else:
                entry.status = PendingStatus(assignment.reason, assignment.message)
                if (
                    assignment.mode == NO_CANDIDATES
                    and entry.cq.preemption.reclaim_within_cohort is not RECLAIM_ANY
                ):
                    # It could not take its quota back later: what it needs is kept from
                    # entries after it, as Kueue does.
                    quota.hold(entry, _to_reserve(entry))
                if self._set_aside_in(
                    entry.node,
                    entry.queue,
                    workload,
                    even_strict=assignment.reason == MISCONFIGURED,
                ):
                    progressed = True

        quota.release_holds()

        # 6. Requeue: what was not admitted keeps its place or was parked above; record why.
        for entry in entries:
            if entry.status is not None:
                self._status[entry.workload.key] = entry.status
                pending.append((entry.workload, entry.status))
        return CycleResult(tuple(admitted), tuple(evicted), tuple(pending), len(heads), progressed)

    def _heads(self) -> list[tuple[ClusterQueue, QuotaNode, ClusterQueueQueue, Workload]]:
        heads = []
        for cq, node, queue in self._schedulable:
            workload = queue.head()
            if workload is not None:
                heads.append((cq, node, queue, workload))
        return heads

    def _selects(self, cq: ClusterQueue, namespace: str) -> bool:
        key = (cq.name, namespace)
        selected = self._selected.get(key)
        if selected is None:
            selector = cq.namespace_selector
            selected = selector is not None and selector.matches(self._namespace_labels(namespace))
            self._selected[key] = selected
        return selected

    def _nominate(
        self, cq: ClusterQueue, node: QuotaNode, queue: ClusterQueueQueue, workload: Workload
    ) -> _Entry:
        if not self._selects(cq, workload.namespace):
            hint = (
                " (its namespaceSelector is null, which selects no namespace; {} selects all)"
                if cq.namespace_selector is None
                else ""
            )
            message = (
                f"namespace {workload.namespace} is not selected by ClusterQueue {cq.name}{hint}"
            )
            return _Entry(
                cq,
                node,
                queue,
                workload,
                Assignment(NO_FIT, reason=MISCONFIGURED, message=message),
            )
        lq = self.local_queue_of(workload) if self._stopped_local_queues else None
        if lq is not None and lq.stop_policy is not StopPolicy.NONE:
            message = f"LocalQueue {lq.key} is stopped (stopPolicy {lq.stop_policy.value})"
            return _Entry(
                cq,
                node,
                queue,
                workload,
                Assignment(NO_FIT, reason=INADMISSIBLE, message=message),
            )

        if len(workload.pod_sets) == 1:
            quick = quick_fit(workload.pod_sets[0], cq, self.flavors, node)
            if quick is not None:
                return _Entry(cq, node, queue, workload, quick)

        found: dict[tuple[object, ...], list[Target]] = {}

        def targets(  # memoised: the oracle and the final nomination may ask the same question
            request: Mapping[FlavorResource, int], need: frozenset[FlavorResource]
        ) -> list[Target]:
            key = (tuple(sorted(request.items())), need)
            if key not in found:
                found[key] = self._targets(workload, cq, node, request, need)
            return found[key]

        may_preempt = cq.preemption.within_cluster_queue is not WITHIN_NEVER or (
            node.parent is not None and cq.preemption.reclaim_within_cohort is not RECLAIM_NEVER
        )

        def oracle(fr: FlavorResource, amount: int) -> tuple[Mode, int] | None:
            # Kueue's preemption oracle: the victims for this one flavor-resource, and how
            # high the workload would borrow once they are gone.
            need = frozenset((fr,))
            victims = (
                targets({fr: amount}, need)
                if may_have_candidates(
                    workload, cq, node, need, self.lowest_priority, fair_sharing=self.fair_sharing
                )
                else []
            )
            if not victims:
                return None
            own, freed = False, 0
            for target in victims:
                if target.victim.node is node:
                    own = True
                    freed += target.victim.usage.get(fr, 0)
            if node.usage.get(fr, 0) - freed + amount <= node.subtree.get(fr, 0):
                level = 0  # within its own quota once its own victims are gone
            else:
                for target in victims:
                    add_usage(target.victim.node, target.victim.usage, -1)
                level = borrowing_level(node, fr, amount)
                for target in victims:
                    add_usage(target.victim.node, target.victim.usage)
            return (PREEMPT if own else RECLAIM), level

        assignment = search_flavors(
            workload,
            cq,
            self.flavors,
            node,
            oracle if may_preempt else None,
            fair_sharing=self.fair_sharing,
        )
        entry = _Entry(cq, node, queue, workload, assignment)
        if assignment.mode in PREEMPTING:
            entry.targets = targets(assignment.usage, assignment.needs_preemption)
            if not entry.targets:
                entry.assignment = assignment._replace(mode=NO_CANDIDATES)
        return entry

    def _targets(
        self,
        workload: Workload,
        cq: ClusterQueue,
        node: QuotaNode,
        request: Mapping[FlavorResource, int],
        need: frozenset[FlavorResource],
    ) -> list[Target]:
        find = fair_sharing_targets if self.fair_sharing else classical_targets
        return find(workload, cq, node, request, need, self.admitted_in, self.lowest_priority)

    def _namespace_labels(self, name: str) -> dict[str, str]:
        namespace = self.namespaces.get(name)
        if namespace is None:
            return {"kubernetes.io/metadata.name": name}
        return dict(namespace.labels)

    def _drain_reason(self, admitted: AdmittedWorkload) -> tuple[str, str] | None:
        """Why an admitted workload must give its quota back: (Evicted reason, message)."""
        cq = self.cluster_queues.get(admitted.admission.cluster_queue)
        if cq is not None and cq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            return CLUSTER_QUEUE_STOPPED, f"ClusterQueue {cq.name} is stopped (HoldAndDrain)"
        workload = admitted.workload
        lq = self.local_queue_of(workload)
        if lq is None:
            # A deleted LocalQueue stops its workloads for good: nothing can requeue them.
            return (
                LOCAL_QUEUE_STOPPED,
                f"LocalQueue {workload.queue_name} in namespace {workload.namespace} was deleted",
            )
        if lq.stop_policy is StopPolicy.HOLD_AND_DRAIN:
            return LOCAL_QUEUE_STOPPED, f"LocalQueue {lq.key} is stopped (HoldAndDrain)"
        return None

    @staticmethod
    def _classical(entries: list[_Entry]) -> list[_Entry]:
        # Kueue's order: by how high in the cohort tree each must borrow (0: not at all), then
        # priority, then FIFO.
        return sorted(entries, key=lambda e: (e.assignment.borrowing_level, e.workload.order))

    def _fair_order(self, entries: list[_Entry]) -> Iterator[_Entry]:
        """Kueue's fair-sharing tournament, re-run after every entry (admissions move shares)."""
        remaining = list(entries)
        while remaining:
            best = min(remaining, key=self._fair_key)
            remaining.remove(best)
            yield best

    def _fair_key(self, entry: _Entry) -> tuple[object, ...]:
        # Compare at every level from the root down: first the subtree that would borrow
        # least after admission, then lower share, then priority and FIFO.
        path = [entry.node, *entry.node.ancestors()][::-1]
        shares: list[tuple[bool, float]] = []
        for child in path[1:]:
            share = dominant_resource_share(child, entry.assignment.usage)
            shares.append((share > 0, share))
        return (path[0].name, tuple(shares), entry.workload.order)

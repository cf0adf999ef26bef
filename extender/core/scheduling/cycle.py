"""The state the controller, the CLI and the simulator hold: cache, queues and scheduler.

`ClusterState` keeps the three in step (Kueue's controllers do that between its cache and its
queue manager): a configuration change rebuilds the cache, then routes the pending workloads
again; a release gives quota back in the cache, then requeues what its cohort set aside.
`schedule(now)` is one cycle of the scheduler; it assumes admissions before returning them,
and the caller calls `forget` if a write fails, or `release` once an evicted workload has
stopped. Outside code asks questions (`is_admitted`, `pending_workload`, `local_queue`, ...)
rather than reading the parts. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace

from extender.core.api.models import (
    Admission,
    AdmissionCheck,
    ClusterQueue,
    Cohort,
    FlavorResource,
    LocalQueue,
    Namespace,
    PriorityClass,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
)
from extender.core.api.topology import Topology
from extender.core.scheduling.admission_fair_sharing import AfsConfig, UsageLedger, base_units
from extender.core.scheduling.cache import Cache, Configuration
from extender.core.scheduling.concurrent import VariantRule, acting_on_policy, variant_view
from extender.core.scheduling.options import SchedulingOptions
from extender.core.scheduling.preemption import AdmittedWorkload, Target
from extender.core.scheduling.queue_manager import QueueManager
from extender.core.scheduling.quota import QuotaNode, available
from extender.core.scheduling.reasons import (
    CLUSTER_QUEUE_STOPPED,
    INADMISSIBLE,
    LOCAL_QUEUE_STOPPED,
    MISCONFIGURED,
    PENDING,
    PREEMPTED,
    WAITING_FOR_PREEMPTED,
    PendingStatus,
)
from extender.core.scheduling.scheduler import Admit, CycleResult, Evict, InternalCheck, Scheduler

__all__ = [
    "CLUSTER_QUEUE_STOPPED",
    "INADMISSIBLE",
    "LOCAL_QUEUE_STOPPED",
    "MISCONFIGURED",
    "PENDING",
    "PREEMPTED",
    "WAITING_FOR_PREEMPTED",
    "Admit",
    "ClusterState",
    "Configuration",
    "CycleResult",
    "Evict",
    "InternalCheck",
    "PendingStatus",
]


class ClusterQuestions:
    """What the state answers about workloads, queues and configuration, without changing
    anything (ClusterState holds what changes it)."""

    cache: Cache
    queues: QueueManager

    # ----- questions: workloads ---------------------------------------------------------

    def workload(self, key: str) -> Workload | None:
        """A workload the state knows, pending or admitted."""
        return self.queues.workloads.get(key)

    def workload_count(self) -> int:
        """How many workloads the state knows, pending and admitted."""
        return len(self.queues.workloads)

    def is_admitted(self, key: str) -> bool:
        """Whether a workload holds quota (assumed or written)."""
        return key in self.cache.admitted

    def admitted_workload(self, key: str) -> AdmittedWorkload | None:
        """What an admitted workload holds, where and since when (None: it holds nothing)."""
        return self.cache.admitted.get(key)

    def admitted_workloads(self) -> Iterator[AdmittedWorkload]:
        """Every admitted workload."""
        return iter(self.cache.admitted.values())

    def admitted_count(self) -> int:
        """How many workloads hold quota."""
        return len(self.cache.admitted)

    def admitted_in(self, cq_name: str) -> Iterable[AdmittedWorkload]:
        """Admitted workloads of one ClusterQueue."""
        return self.cache.admitted_in(cq_name)

    def lowest_priority(self, cq_name: str) -> int | None:
        """The lowest priority among a ClusterQueue's admitted workloads."""
        return self.cache.lowest_priority(cq_name)

    def pending_workload(self, key: str) -> Workload | None:
        """A workload that waits (None: admitted, or unknown)."""
        return self.queues.pending_workload(key)

    def pending(self) -> Iterator[tuple[Workload, PendingStatus]]:
        """Every pending workload with why it waits."""
        return self.queues.pending()

    def pending_status(self, key: str) -> PendingStatus:
        """Why one pending workload is waiting, in words a person understands."""
        return self.queues.pending_status(key)

    def pending_in(self, cq_name: str) -> tuple[int, int]:
        """(active, inadmissible) pending workloads of one ClusterQueue."""
        return self.queues.pending_in(cq_name)

    def pending_workloads_in(self, cq_name: str) -> Iterator[Workload]:
        """The workloads queued in one ClusterQueue (parked ones are in none)."""
        return self.queues.pending_workloads_in(cq_name)

    def queued_in(self, key: str) -> str | None:
        """The ClusterQueue whose queue holds a pending workload (None: parked, or none)."""
        return self.queues.queued_in(key)

    def queue_is_inadmissible(self, cq_name: str, key: str) -> bool:
        """Whether a queued workload was set aside until quota is given back."""
        return self.queues.queue_is_inadmissible(cq_name, key)

    def is_backing_off(self, key: str) -> bool:
        """Whether a pending workload waits out a requeue backoff (never a head meanwhile)."""
        return self.queues.is_backing_off(key)

    def class_head(self, key: str) -> str | None:
        """The workload a cycle tries for this one's whole equivalence class (the same shape,
        priority and namespace): its reason is this one's."""
        return self.queues.class_head(key)

    # ----- questions: configuration and quota -------------------------------------------

    def cluster_queue(self, name: str) -> ClusterQueue | None:
        """A ClusterQueue by name."""
        return self.cache.cluster_queues.get(name)

    def cluster_queue_known(self, name: str) -> bool:
        """Whether a ClusterQueue of this name exists (admissions into it can be held)."""
        return name in self.cache.cluster_queues

    def cluster_queue_names(self) -> list[str]:
        """Every ClusterQueue's name, sorted."""
        return sorted(self.cache.cluster_queues)

    def cluster_queue_active(self, name: str) -> tuple[bool, str, str]:
        """The Active condition of a ClusterQueue: (status, reason, message)."""
        return self.cache.cluster_queue_active(name)

    def quota_usage(self, cq_name: str) -> Mapping[FlavorResource, int]:
        """What a ClusterQueue's admitted workloads hold, per flavor and resource."""
        node = self.cache.tree.cluster_queues.get(cq_name)
        return {} if node is None else node.usage

    def available_quota(self, cq_name: str, fr: FlavorResource) -> int:
        """How much of a flavor-resource a workload of the ClusterQueue could use now: its
        own unused quota and what it may borrow (Kueue's `available`)."""
        return available(self.cache.tree.cluster_queues[cq_name], fr)

    def quota_node(self, name: str, *, cohort: bool = False) -> QuotaNode | None:
        """A ClusterQueue's (or a cohort's) node of the quota tree: its quota, what is used
        under it and its place in the tree, to be read, never changed (metrics read it)."""
        tree = self.cache.tree
        return (tree.cohorts if cohort else tree.cluster_queues).get(name)

    def cohort_names(self) -> list[str]:
        """Every cohort of the tree (explicit or only named by ClusterQueues), sorted."""
        return sorted(self.cache.tree.cohorts)

    def cohort_is_explicit(self, name: str) -> bool:
        """Whether a Cohort object of this name exists (not only a name ClusterQueues use)."""
        return name in self.cache.cohorts

    def resource_flavor(self, name: str) -> ResourceFlavor | None:
        """A ResourceFlavor by name."""
        return self.cache.flavors.get(name)

    def resource_flavors(self) -> Mapping[str, ResourceFlavor]:
        """Every ResourceFlavor, by name."""
        return self.cache.flavors

    def local_queue(self, key: str) -> LocalQueue | None:
        """A LocalQueue by namespace/name."""
        return self.cache.local_queues.get(key)

    def local_queue_of(self, workload: Workload) -> LocalQueue | None:
        """The LocalQueue a workload was submitted to, if it exists."""
        return self.cache.local_queue_of(workload)

    def workload_priority_classes(self) -> Mapping[str, WorkloadPriorityClass]:
        """Every WorkloadPriorityClass, by name."""
        return self.cache.workload_priority_classes

    def priority_classes(self) -> Mapping[str, PriorityClass]:
        """Every PriorityClass, by name."""
        return self.cache.priority_classes

    def configuration(self) -> Configuration:
        """The configuration objects, as a new state can be configured from."""
        return self.cache.configuration()


class ClusterState(ClusterQuestions):
    """Kueue's cache, queue manager and scheduler: what is configured, pending and admitted,
    and the cycle that decides on them."""

    def __init__(
        self,
        *,
        fair_sharing: bool = False,
        admission_checks: Iterable[InternalCheck] = (),
        scheduling: SchedulingOptions = SchedulingOptions(),  # noqa: B008 (frozen)
    ) -> None:
        self.scheduling = scheduling
        self.cache = Cache()
        self.queues = QueueManager(self.cache)
        self.fair_usage = FairSharingUsage(self.cache, self.queues)
        self.scheduler = Scheduler(
            self.cache,
            self.queues,
            fair_sharing=fair_sharing,
            admission_checks=(*admission_checks,),
        )
        self.scheduler.fair_preemption = scheduling.fair_preemption
        if scheduling.concurrent_admission or scheduling.orchestrated_preemption:
            rule = VariantRule(self.cache, self.queues.set_aside, Evict)
            self.scheduler.variant_waits = rule.waits

    # ----- the scheduler's settings -----------------------------------------------------

    @property
    def fair_sharing(self) -> bool:
        """Whether the cycle orders and preempts by fair sharing."""
        return self.scheduler.fair_sharing

    @property
    def admission_checks(self) -> tuple[InternalCheck, ...]:
        """The checks asked after quota fits."""
        return self.scheduler.admission_checks

    @admission_checks.setter
    def admission_checks(self, checks: Iterable[InternalCheck]) -> None:
        self.scheduler.admission_checks = tuple(checks)

    def add_admission_check(self, check: InternalCheck) -> None:
        """Ask this too, after quota fits (physical fit on nodes plugs in here)."""
        self.scheduler.admission_checks = (*self.scheduler.admission_checks, check)

    @property
    def block_admission(self) -> bool:
        """WaitForPodsReady's blockAdmission: no admission while one admitted is not ready."""
        return self.scheduler.block_admission

    @block_admission.setter
    def block_admission(self, block: bool) -> None:
        self.scheduler.block_admission = block

    def pods_ready(self, key: str, ready: bool) -> bool:
        """Whether an admitted workload's pods are all ready (its PodsReady condition), for
        blockAdmission; True when that lifted the block (a cycle is due)."""
        not_ready = self.scheduler.not_ready
        if ready or key not in self.cache.admitted or not self.block_admission:
            if key not in not_ready:
                return False
            not_ready.discard(key)
            return not not_ready
        not_ready.add(key)
        return False

    def on_release(self, hook: Callable[[str], None]) -> None:
        """Tell `hook` the key of every workload whose quota is freed."""
        self.cache.release_hooks.append(hook)

    # ----- configuration ----------------------------------------------------------------

    def configure(
        self,
        *,
        flavors: Iterable[ResourceFlavor] = (),
        cluster_queues: Iterable[ClusterQueue] = (),
        cohorts: Iterable[Cohort] = (),
        local_queues: Iterable[LocalQueue] = (),
        namespaces: Iterable[Namespace] = (),
        admission_checks: Iterable[AdmissionCheck] = (),
        topologies: Iterable[Topology] = (),
    ) -> None:
        """Apply many objects at once, rebuilding the quota tree a single time."""
        ignores = self.scheduling.ignore_undeclared_resources
        cluster_queues = [
            cq if cq.ignores_undeclared == ignores else replace(cq, ignores_undeclared=ignores)
            for cq in cluster_queues
        ]
        if self.scheduling.concurrent_admission:  # a concurrentAdmissionPolicy is acted on
            cluster_queues = [acting_on_policy(cq) for cq in cluster_queues]
        self.cache.update(
            flavors=flavors,
            cluster_queues=cluster_queues,
            cohorts=cohorts,
            local_queues=local_queues,
            namespaces=namespaces,
            admission_checks=admission_checks,
            topologies=topologies,
        )
        for cq in cluster_queues:
            self.queues.update_cluster_queue(cq)
        self._config_changed()

    def configure_with(self, config: Configuration) -> None:
        """Apply parsed configuration objects of every kind; the quota tree is rebuilt once,
        and only when something other than priority classes changed."""
        self.cache.set_priority_classes(config)
        if config.changes_queues():
            self.configure(
                flavors=config.flavors,
                cluster_queues=config.cluster_queues,
                cohorts=config.cohorts,
                local_queues=config.local_queues,
                namespaces=config.namespaces,
                admission_checks=config.admission_checks,
                topologies=config.topologies,
            )

    def apply_flavor(self, flavor: ResourceFlavor) -> None:
        """Create or update a ResourceFlavor."""
        self.configure(flavors=[flavor])

    def delete_flavor(self, name: str) -> None:
        """Delete a ResourceFlavor (ClusterQueues naming it become inactive)."""
        self.cache.flavors.pop(name, None)
        self._config_changed()

    def apply_cluster_queue(self, cq: ClusterQueue) -> None:
        """Create or update a ClusterQueue."""
        self.configure(cluster_queues=[cq])

    def delete_cluster_queue(self, name: str) -> None:
        """Delete a ClusterQueue: its pending workloads wait for it to come back."""
        self.cache.cluster_queues.pop(name, None)
        self.queues.delete_cluster_queue(name)
        self._config_changed()

    def apply_cohort(self, cohort: Cohort) -> None:
        """Create or update a Cohort."""
        self.configure(cohorts=[cohort])

    def delete_admission_check(self, name: str) -> None:
        """Delete an AdmissionCheck (ClusterQueues asking for it become inactive)."""
        self.cache.admission_checks.pop(name, None)
        self._config_changed()

    def delete_topology(self, name: str) -> None:
        """Delete a Topology (ClusterQueues with a flavor naming it become inactive)."""
        self.cache.topologies.pop(name, None)
        self._config_changed()

    def delete_cohort(self, name: str) -> None:
        """Delete a Cohort object (the cohort stays implicit while ClusterQueues name it)."""
        self.cache.cohorts.pop(name, None)
        self._config_changed()

    def apply_local_queue(self, lq: LocalQueue) -> None:
        """Create or update a LocalQueue."""
        self.configure(local_queues=[lq])

    def delete_local_queue(self, key: str) -> None:
        """Delete a LocalQueue: its pending workloads wait for it to come back."""
        self.cache.local_queues.pop(key, None)
        self.queues.delete_local_queue(key)
        self._config_changed()

    def namespace_labels(self, name: str) -> dict[str, str]:
        """A namespace's labels, for selectors (an unseen one: its name label only)."""
        return self.cache.namespace_labels(name)

    def apply_namespace(self, namespace: Namespace) -> None:
        """Create or update a namespace (its labels feed namespaceSelector)."""
        self.cache.apply_namespace(namespace)
        self.queues.requeue_all()

    def delete_workload_priority_class(self, name: str) -> None:
        """Delete a WorkloadPriorityClass (workloads keep the priority they were given)."""
        self.cache.workload_priority_classes.pop(name, None)

    def delete_priority_class(self, name: str) -> None:
        """Delete a PriorityClass (workloads keep the priority they were given)."""
        self.cache.priority_classes.pop(name, None)

    def _config_changed(self) -> None:
        self.cache.rebuild()
        self.queues.refresh()

    # ----- workloads --------------------------------------------------------------------

    def add_workload(self, workload: Workload) -> None:
        """A new pending workload (or an updated one that holds no quota)."""
        if workload.key in self.cache.admitted:
            raise ValueError(f"workload {workload.key} is admitted; release it first")
        made = self.queues.add(workload)
        # What reads the ClusterQueue and the workload's shape but not usage is made now,
        # not in a cycle: a new class's flavor plan and admission, topology's counts.
        if made is not None:
            cq = self.cache.cluster_queues.get(made[0])
            if cq is not None:
                if workload.allowed_flavors:  # a concurrent-admission variant
                    cq = variant_view(cq, workload)
                self.scheduler.prepare(cq, made[1], workload)
        topology = self.scheduler.topology
        if topology is not None:
            cq_name = self.queues.queued_in(workload.key)
            cq = self.cache.cluster_queues.get(cq_name) if cq_name is not None else None
            if cq is not None:
                topology.prepare(workload, cq.flavor_names())

    def back_off(self, workload: Workload, message: str) -> None:
        """A workload requeued with a backoff: pending in its ClusterQueue, counted as
        inadmissible (as Kueue counts it), never a head until `add_workload` queues it."""
        if workload.key in self.cache.admitted:
            raise ValueError(f"workload {workload.key} is admitted; release it first")
        self.queues.back_off(workload, message)

    def delete_workload(self, key: str) -> None:
        """A workload is gone (its job was deleted): drop it and free what it held."""
        self.fair_usage.forget(key)
        self.queues.delete(key)
        if key in self.cache.admitted:
            self._release_quota(key)

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
        self.queues.admitted(workload)
        self.cache.assume(workload, admission, now, usage)
        if self.block_admission:  # ready once its PodsReady says so (pods_ready)
            self.scheduler.not_ready.add(workload.key)

    def reclaim(self, key: str, usage: Mapping[FlavorResource, int]) -> bool:
        """An admitted workload now holds only `usage` (Kueue's reclaimable pods): what it
        gave back may admit what its cohort set aside. Whether anything changed."""
        node = self.cache.rehold(key, usage)
        if node is None:
            return False
        self.queues.requeue_cohort(node)
        return True

    def reprioritize(self, key: str, priority: int) -> bool:
        """An admitted workload's priority changed: what its cohort set aside may preempt it
        now (Kueue requeues the inadmissible workloads). Whether anything changed."""
        node = self.cache.reprioritize(key, priority)
        if node is None:
            return False
        self.queues.requeue_cohort(node)
        return True

    def still_needed(self, eviction: Evict) -> bool:
        """Whether an eviction a cycle decided still holds now that time has passed: its
        workload still holds quota, and the preemptor it made room for is still pending,
        or the queue it drains is still stopped."""
        holder = self.cache.admitted.get(eviction.workload.key)
        if holder is None:
            return False
        if eviction.preemptor is not None:
            return self.queues.pending_workload(eviction.preemptor) is not None
        return self.cache.drain_reason(holder) is not None

    def mark_evicting(self, key: str) -> None:
        """An admitted workload is being evicted: a cycle chooses it for nothing else."""
        holder = self.cache.admitted.get(key)
        if holder is not None:
            holder.evicting = True

    def keep(self, key: str) -> None:
        """An eviction a cycle decided is not carried out: the workload keeps its quota, and a
        later cycle may choose it again."""
        holder = self.cache.admitted.get(key)
        if holder is not None:
            holder.evicting = False

    def forget(self, key: str) -> None:
        """Undo an assumed admission whose write failed: the workload is pending again."""
        self.fair_usage.forget(key)
        if key in self.cache.admitted:
            self._release_quota(key)
            self.queues.route(self.queues.workloads[key])

    def release(self, key: str) -> None:
        """An evicted workload has stopped: free its quota and queue it again."""
        self.forget(key)

    def _release_quota(self, key: str) -> None:
        released = self.cache.release(key)
        self.queues.requeue_cohort(released.node)

    def requeue_inadmissible(self, cq_names: Iterable[str]) -> bool:
        """Something an admission check waits on changed (nodes freed room): the workloads
        these ClusterQueues set aside are tried again. Whether any queue was found."""
        return self.queues.requeue_inadmissible(cq_names)

    @property
    def fair_sharing_ledger(self) -> UsageLedger | None:
        return self.queues.ledger

    def configure_fair_sharing(self, config: AfsConfig | None) -> None:
        """Kueue's Configuration.admissionFairSharing (None: off, as without it)."""
        self.fair_usage.configure(config)

    # ----- the scheduling cycle ---------------------------------------------------------

    def schedule(self, now: float) -> CycleResult:
        """Run one scheduling cycle at time `now` and return its decisions."""
        return self.scheduler.schedule(now)

    def preemption_targets(
        self,
        workload: Workload,
        cq_name: str,
        flavors: Mapping[str, Mapping[str, str]],
        need: Iterable[FlavorResource] | None = None,
    ) -> list[Target]:
        """Whom preemption would evict for a workload with these flavors per pod set, to make
        room in `need` (default: the flavor-resources that do not fit now)."""
        request, wanted = _preemption_request(
            workload, flavors, self.cache.tree.cluster_queues[cq_name], need
        )
        return self.scheduler.targets_for(workload, cq_name, request, wanted)


def _preemption_request(
    workload: Workload,
    flavors: Mapping[str, Mapping[str, str]],
    node: QuotaNode,
    need: Iterable[FlavorResource] | None,
) -> tuple[dict[FlavorResource, int], frozenset[FlavorResource]]:
    """What a workload asks of each flavor-resource with these flavors, and what needs room
    (`need`, else what does not fit now)."""
    request: dict[FlavorResource, int] = {}
    for pod_set in workload.pod_sets:
        chosen = flavors.get(pod_set.name, {})
        for resource, amount in pod_set.totals.items():
            if resource in chosen and amount > 0:
                fr = (chosen[resource], resource)
                request[fr] = request.get(fr, 0) + amount
    if need is not None:
        return request, frozenset(need)
    return request, frozenset(fr for fr, amount in request.items() if available(node, fr) < amount)


class FairSharingUsage:
    """Admission fair sharing's bookkeeping over the cache and the queues: each LocalQueue's
    usage sampled, a workload's entry penalty settled or forgotten."""

    def __init__(self, cache: Cache, queues: QueueManager) -> None:
        self.cache = cache
        self.queues = queues

    def configure(self, config: AfsConfig | None) -> None:
        """Each LocalQueue's usage is kept (None: off), and ClusterQueues with admissionScope
        UsageBasedAdmissionFairSharing take their heads by it."""
        self.queues.ledger = UsageLedger(config) if config is not None else None
        self.queues.refresh()

    def _lq_usage_now(self, cq_name: str | None = None) -> dict[str, dict[str, float]]:
        """What each LocalQueue's workloads hold now (of one ClusterQueue, or all), per
        resource, in base units."""
        out: dict[str, dict[str, float]] = {}
        holders = (
            self.cache.admitted.values() if cq_name is None else self.cache.admitted_in(cq_name)
        )
        for holder in holders:
            lq = f"{holder.workload.namespace}/{holder.workload.queue_name}"
            held = out.setdefault(lq, {})
            for (_, resource), amount in holder.usage.items():
                for r, v in base_units({resource: amount}).items():
                    held[r] = held.get(r, 0.0) + v
        return out

    def sample(self, now: float) -> list[str]:
        """One sample of each LocalQueue whose interval passed; the keys sampled."""
        ledger = self.queues.ledger
        if ledger is None:
            return []
        current = self._lq_usage_now()
        return [
            key
            for key in sorted(self.cache.local_queues)
            if ledger.sample(key, current.get(key, {}), now)
        ]

    def due_in(self, now: float) -> float:
        """Seconds until a LocalQueue's next admission fair sharing sample."""
        ledger = self.queues.ledger
        return ledger.due_in(self.cache.local_queues, now) if ledger is not None else math.inf

    def seed(self, lq_key: str, consumed: Mapping[str, float], now: float) -> None:
        """What a LocalQueue's status says it consumed, after a restart."""
        if self.queues.ledger is not None:
            self.queues.ledger.seed(lq_key, consumed, now)

    def settle(self, key: str, now: float) -> None:
        """A workload is Admitted: its entry penalty joins its LocalQueue's history."""
        ledger = self.queues.ledger
        holder = self.cache.admitted.get(key)
        if ledger is None or holder is None:
            return
        lq = f"{holder.workload.namespace}/{holder.workload.queue_name}"
        current = self._lq_usage_now(holder.admission.cluster_queue).get(lq, {})
        ledger.settle(lq, key, current, now)

    def forget(self, key: str) -> None:
        ledger = self.queues.ledger
        workload = self.queues.workloads.get(key)
        if ledger is not None and workload is not None:
            ledger.forget(f"{workload.namespace}/{workload.queue_name}", key)

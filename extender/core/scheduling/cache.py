"""Kueue's cache: what is configured, what is admitted, and the quota tree admissions use.

The configuration (ResourceFlavors, ClusterQueues, Cohorts, LocalQueues, Namespaces, priority
classes) and the admitted workloads live here, as in Kueue's cache package; the pending ones
live in the queue manager. Every configuration change rebuilds the quota tree and puts the
admitted workloads' usage back into it, then says which ClusterQueues are inactive and which
admitted workloads a stopped queue must give back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from extender.core.admission.multikueue import CONTROLLER as MULTIKUEUE_CONTROLLER
from extender.core.admission.provisioning import CONTROLLER as PROVISIONING_CONTROLLER
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
    StopPolicy,
    Workload,
    WorkloadPriorityClass,
)
from extender.core.api.topology import Topology
from extender.core.scheduling.preemption import AdmittedWorkload
from extender.core.scheduling.quota import QuotaNode, QuotaTree, add_usage
from extender.core.scheduling.reasons import (
    CLUSTER_QUEUE_STOPPED,
    INADMISSIBLE,
    LOCAL_QUEUE_STOPPED,
    PendingStatus,
)

ConfigModel = (
    ResourceFlavor
    | ClusterQueue
    | Cohort
    | LocalQueue
    | Namespace
    | WorkloadPriorityClass
    | PriorityClass
    | AdmissionCheck
    | Topology
)


def multikueue_misuse(
    cq: ClusterQueue, checks: Mapping[str, AdmissionCheck]
) -> tuple[str, str] | None:
    """Kueue's rules for MultiKueue checks on a ClusterQueue: one at most, for every flavor,
    and not with a ProvisioningRequest check (the capacity is the workers')."""
    by_controller: dict[str, list[str]] = {}
    for ref in cq.admission_checks:
        found = checks.get(ref.name)
        if found is not None:
            by_controller.setdefault(found.controller_name, []).append(ref.name)
    multikueue = sorted(by_controller.get(MULTIKUEUE_CONTROLLER, ()))
    if len(multikueue) > 1:
        return (
            "MultipleMultiKueueAdmissionChecks",
            "Cannot use multiple MultiKueue AdmissionChecks on the same ClusterQueue, "
            f"found: {','.join(multikueue)}",
        )
    per_flavor = sorted(
        r.name for r in cq.admission_checks if r.name in multikueue and r.on_flavors
    )
    if per_flavor:
        return (
            "MultiKueueAdmissionCheckAppliedPerFlavor",
            f"Cannot specify MultiKueue AdmissionCheck per flavor, found: {','.join(per_flavor)}",
        )
    provisioning = sorted(by_controller.get(PROVISIONING_CONTROLLER, ()))
    if multikueue and provisioning:
        return (
            "MultiKueueWithProvisioningRequest",
            "Cannot use both MultiKueue and ProvisioningRequest AdmissionChecks together, "
            f"found: {','.join(multikueue)}, {','.join(provisioning)}",
        )
    return None


@dataclass(slots=True)
class Configuration:
    """Parsed configuration objects, kind by kind: what a cache is configured with."""

    flavors: list[ResourceFlavor] = field(default_factory=list)
    cluster_queues: list[ClusterQueue] = field(default_factory=list)
    cohorts: list[Cohort] = field(default_factory=list)
    local_queues: list[LocalQueue] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    workload_priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    admission_checks: list[AdmissionCheck] = field(default_factory=list)
    topologies: list[Topology] = field(default_factory=list)

    def add(self, model: ConfigModel) -> None:
        """One more object, in the list of its kind."""
        if isinstance(model, ResourceFlavor):
            self.flavors.append(model)
        elif isinstance(model, ClusterQueue):
            self.cluster_queues.append(model)
        elif isinstance(model, Cohort):
            self.cohorts.append(model)
        elif isinstance(model, LocalQueue):
            self.local_queues.append(model)
        elif isinstance(model, Namespace):
            self.namespaces.append(model)
        elif isinstance(model, WorkloadPriorityClass):
            self.workload_priority_classes[model.name] = model
        elif isinstance(model, AdmissionCheck):
            self.admission_checks.append(model)
        elif isinstance(model, Topology):
            self.topologies.append(model)
        else:
            self.priority_classes[model.name] = model

    def changes_queues(self) -> bool:
        """Whether it holds anything that changes the queues or the quota tree (priority
        classes change neither)."""
        return bool(
            self.flavors
            or self.cluster_queues
            or self.cohorts
            or self.local_queues
            or self.namespaces
            or self.admission_checks
            or self.topologies
        )


class Cache:
    """Kueue's cache: the configuration, the admitted workloads and the quota tree."""

    def __init__(self) -> None:
        self.flavors: dict[str, ResourceFlavor] = {}
        self.cluster_queues: dict[str, ClusterQueue] = {}
        self.cohorts: dict[str, Cohort] = {}
        self.local_queues: dict[str, LocalQueue] = {}
        self.namespaces: dict[str, Namespace] = {}
        self.workload_priority_classes: dict[str, WorkloadPriorityClass] = {}
        self.priority_classes: dict[str, PriorityClass] = {}
        self.admission_checks: dict[str, AdmissionCheck] = {}
        self.topologies: dict[str, Topology] = {}
        self.admitted: dict[str, AdmittedWorkload] = {}
        self.tree = QuotaTree.build((), ())
        # Told the key of every workload whose quota is freed (a plan held for it goes too).
        self.release_hooks: list[Callable[[str], None]] = []
        self._admitted_by_cq: dict[str, dict[str, AdmittedWorkload]] = {}
        # How many admitted workloads of each priority a ClusterQueue holds.
        self._priorities_by_cq: dict[str, dict[int, int]] = {}
        # Facts derived from the configuration, rebuilt whenever it changes: the inactive
        # ClusterQueues with why, the admitted workloads a stopped queue must give back
        # (the next cycle evicts them), namespaceSelector answers, and whether any LocalQueue
        # is stopped (so a cycle looks up a head's LocalQueue only then).
        self.inactive: dict[str, PendingStatus] = {}
        self.to_drain: set[str] = set()
        self._selected: dict[tuple[str, str], bool] = {}
        # Counts the times those answers were forgotten: one found in an earlier epoch may
        # be stale (a class's memo keeps the epoch its namespace was found selected in).
        self.selection_epoch = 0
        self.stopped_local_queues = False
        # Counts rebuilds: a verdict found under one configuration is not reused under another.
        self.generation = 0

    # ----- configuration ------------------------------------------------------------

    def update(
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
        """Create or update objects; `rebuild` makes the change count."""
        self.topologies.update((t.name, t) for t in topologies)
        self.admission_checks.update((c.name, c) for c in admission_checks)
        self.flavors.update((f.name, f) for f in flavors)
        self.cohorts.update((c.name, c) for c in cohorts)
        self.local_queues.update((lq.key, lq) for lq in local_queues)
        self.namespaces.update((n.name, n) for n in namespaces)
        self.cluster_queues.update((cq.name, cq) for cq in cluster_queues)

    def set_priority_classes(self, config: Configuration) -> None:
        """Create or update WorkloadPriorityClasses and PriorityClasses (read when a job's
        Workload is made; they change no queue)."""
        self.workload_priority_classes.update(config.workload_priority_classes)
        self.priority_classes.update(config.priority_classes)

    def apply_namespace(self, namespace: Namespace) -> None:
        """Create or update a namespace: only its own namespaceSelector answers change."""
        self.namespaces[namespace.name] = namespace
        self._selected = {k: v for k, v in self._selected.items() if k[1] != namespace.name}
        self.selection_epoch += 1

    def rebuild(self) -> None:
        """The configuration changed: a new quota tree holding what is admitted, and the
        facts derived from the configuration."""
        self.generation += 1
        self._selected.clear()
        self.selection_epoch += 1
        self.stopped_local_queues = any(
            lq.stop_policy is not StopPolicy.NONE for lq in self.local_queues.values()
        )
        self.tree = QuotaTree.build(self.cluster_queues.values(), self.cohorts.values())
        for name, flavor in self.flavors.items():
            if flavor.topology_name is not None:
                topology = self.topologies.get(flavor.topology_name)
                levels = topology.levels if topology is not None else ()
                if levels != flavor.topology_levels:
                    self.flavors[name] = replace(flavor, topology_levels=levels)
        for admitted in self.admitted.values():
            node = self.tree.cluster_queues.get(admitted.admission.cluster_queue)
            if node is None:
                # Its ClusterQueue is gone; the quota is accounted nowhere until it finishes.
                admitted.node = QuotaNode(admitted.admission.cluster_queue, False, {})
            else:
                admitted.node = node
            add_usage(admitted.node, admitted.usage)
        self.inactive = {
            name: status
            for name, cq in self.cluster_queues.items()
            if (status := self._inactive_status(cq)) is not None
        }
        self.to_drain = {
            key
            for key, admitted in self.admitted.items()
            if not admitted.evicting and self.drain_reason(admitted) is not None
        }

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
        checks = self._checks_not_ready(cq)
        if checks is not None:
            return PendingStatus(
                INADMISSIBLE, f"ClusterQueue {cq.name} is inactive ({checks[0]}): {checks[1]}"
            )
        no_topology = self._missing_topologies(cq)
        if no_topology:
            return PendingStatus(
                INADMISSIBLE,
                f"ClusterQueue {cq.name} is inactive (TopologyNotFound): {', '.join(no_topology)}",
            )
        unacted = self._unacted(cq)
        if unacted:
            return PendingStatus(
                INADMISSIBLE,
                f"ClusterQueue {cq.name} is inactive: it uses {'; '.join(unacted)}, which "
                "Tower does not act on (docs/kueue-fields.md)",
            )
        return None

    def _checks_not_ready(self, cq: ClusterQueue) -> tuple[str, str] | None:
        """(Kueue's reason, message) when an AdmissionCheck the ClusterQueue asks for does
        not exist or is not Active; None when all are ready to be asked."""
        checks = self.admission_checks
        missing = sorted(r.name for r in cq.admission_checks if r.name not in checks)
        if missing:
            return (
                "AdmissionCheckNotFound",
                f"references missing AdmissionCheck(s): {','.join(missing)}",
            )
        inactive = sorted(r.name for r in cq.admission_checks if not checks[r.name].active)
        if inactive:
            return (
                "AdmissionCheckInactive",
                f"references inactive AdmissionCheck(s): {','.join(inactive)}",
            )
        return multikueue_misuse(cq, checks)

    def _missing_topologies(self, cq: ClusterQueue) -> list[str]:
        """Kueue's TopologyNotFound: a topology flavor whose Topology does not exist."""
        out = []
        for name in dict.fromkeys(cq.flavor_names()):
            flavor = self.flavors.get(name)
            if flavor is not None and flavor.topology_name not in (None, *self.topologies):
                out.append(f'there is no Topology "{flavor.topology_name}" for TAS flavor "{name}"')
        return out

    def _unacted(self, cq: ClusterQueue) -> list[str]:
        """What the ClusterQueue sets that Tower does not act on."""
        return list(cq.unacted)

    def cluster_queue_active(self, name: str) -> tuple[bool, str, str]:
        """The Active condition of a ClusterQueue: (status, reason, message)."""
        cq = self.cluster_queues.get(name)
        if cq is None:
            return False, "NotFound", f"ClusterQueue {name} does not exist"
        status = self.inactive.get(name)
        if status is None:
            return True, "Ready", "Can admit new workloads"
        if cq.stop_policy is not StopPolicy.NONE:
            return False, "Stopped", status.message
        if any(f not in self.flavors for f in cq.flavor_names()):
            return False, "FlavorNotFound", status.message
        checks = self._checks_not_ready(cq)
        if checks is not None:
            return False, checks[0], f"Can't admit new workloads: {checks[1]}."  # Kueue's
        no_topology = self._missing_topologies(cq)
        if no_topology:
            return (
                False,
                "TopologyNotFound",
                f"Can't admit new workloads: {', '.join(no_topology)}.",
            )
        if self._unacted(cq):
            return False, "UnsupportedField", status.message
        return False, "Unknown", status.message

    def configuration(self) -> Configuration:
        """What the cache is configured with, as lists a new cache can be configured from."""
        return Configuration(
            list(self.flavors.values()),
            list(self.cluster_queues.values()),
            list(self.cohorts.values()),
            list(self.local_queues.values()),
            list(self.namespaces.values()),
            dict(self.workload_priority_classes),
            dict(self.priority_classes),
            list(self.admission_checks.values()),
            list(self.topologies.values()),
        )

    # ----- admitted workloads ---------------------------------------------------------

    def assume(
        self,
        workload: Workload,
        admission: Admission,
        now: float,
        usage: Mapping[FlavorResource, int] | None = None,
        node: QuotaNode | None = None,
    ) -> None:
        """Hold quota for an admission (Kueue's assumeWorkload); `node` is its ClusterQueue's
        in the tree, if the caller has it at hand."""
        key = workload.key
        cq_name = admission.cluster_queue
        if node is None:
            node = self.tree.cluster_queues[cq_name]
        held = admission.usage() if usage is None else usage
        admitted = AdmittedWorkload(workload, admission, held, node, now)
        add_usage(node, held)
        self.admitted[key] = admitted
        by_cq = self._admitted_by_cq.get(cq_name)
        if by_cq is None:
            by_cq = self._admitted_by_cq[cq_name] = {}
        by_cq[key] = admitted
        priorities = self._priorities_by_cq.get(cq_name)
        if priorities is None:
            priorities = self._priorities_by_cq[cq_name] = {}
        priorities[workload.priority] = priorities.get(workload.priority, 0) + 1

    def release(self, key: str) -> AdmittedWorkload:
        """Free the quota an admitted workload holds; returns what it held."""
        admitted = self.admitted.pop(key)
        for hook in self.release_hooks:
            hook(key)
        self.to_drain.discard(key)
        add_usage(admitted.node, admitted.usage, -1)
        cq_name = admitted.admission.cluster_queue
        self._admitted_by_cq.get(cq_name, {}).pop(key, None)
        priorities = self._priorities_by_cq[cq_name]
        priorities[admitted.workload.priority] -= 1
        if not priorities[admitted.workload.priority]:
            del priorities[admitted.workload.priority]
        return admitted

    def reprioritize(self, key: str, priority: int) -> QuotaNode | None:
        """An admitted workload's priority changed (its job's priority-class label); its
        ClusterQueue's node if it did, else None."""
        admitted = self.admitted.get(key)
        if admitted is None or admitted.workload.priority == priority:
            return None
        priorities = self._priorities_by_cq[admitted.admission.cluster_queue]
        old = admitted.workload.priority
        priorities[old] -= 1
        if not priorities[old]:
            del priorities[old]
        priorities[priority] = priorities.get(priority, 0) + 1
        admitted.workload = replace(admitted.workload, priority=priority)
        return admitted.node

    def rehold(self, key: str, usage: Mapping[FlavorResource, int]) -> QuotaNode | None:
        """An admitted workload holds `usage` from now on (its reclaimable pods gave some
        back); its ClusterQueue's node if that changed anything, else None."""
        admitted = self.admitted.get(key)
        if admitted is None or dict(admitted.usage) == dict(usage):
            return None
        add_usage(admitted.node, admitted.usage, -1)
        add_usage(admitted.node, usage)
        admitted.usage = usage
        return admitted.node

    def admitted_in(self, cq_name: str) -> Iterable[AdmittedWorkload]:
        """Admitted workloads of one ClusterQueue."""
        return self._admitted_by_cq.get(cq_name, {}).values()

    def lowest_priority(self, cq_name: str) -> int | None:
        """The lowest priority among a ClusterQueue's admitted workloads."""
        priorities = self._priorities_by_cq.get(cq_name)
        return min(priorities) if priorities else None

    def drain_reason(self, admitted: AdmittedWorkload) -> tuple[str, str] | None:
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

    # ----- what the configuration says ------------------------------------------------

    def selects(self, cq: ClusterQueue, namespace: str) -> bool:
        """Whether the ClusterQueue's namespaceSelector admits workloads of the namespace."""
        key = (cq.name, namespace)
        selected = self._selected.get(key)
        if selected is None:
            selector = cq.namespace_selector
            selected = selector is not None and selector.matches(self.namespace_labels(namespace))
            self._selected[key] = selected
        return selected

    def namespace_labels(self, name: str) -> dict[str, str]:
        """A namespace's labels; one not seen yet has the label the API server sets on all."""
        namespace = self.namespaces.get(name)
        labels = {} if namespace is None else dict(namespace.labels)
        # kube-apiserver sets it on every namespace (since v1.21), and it cannot be changed.
        labels.setdefault("kubernetes.io/metadata.name", name)
        return labels

    def local_queue_of(self, workload: Workload) -> LocalQueue | None:
        """The LocalQueue a workload was submitted to, if it exists."""
        return self.local_queues.get(f"{workload.namespace}/{workload.queue_name}")

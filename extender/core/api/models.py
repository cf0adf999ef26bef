"""Typed, frozen models of Kueue's objects as the admission core sees them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from extender.core.api.labels import LabelSelector, NodeSelectorTerm, Taint, Toleration
from extender.core.api.topology import TopologyAssignment, TopologyRequest

GROUP = "kueue.x-k8s.io"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PREBUILT_WORKLOAD_LABEL = "kueue.x-k8s.io/prebuilt-workload-name"  # label or annotation
# MultiKueue's marks on what it makes on a worker: where it came from, and (on an object
# whose group Workloads are named by its uid, a StatefulSet) the manager's object's uid.
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
MULTIKUEUE_ORIGIN_UID = "kueue.x-k8s.io/multikueue-origin-uid"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
# Where Tower records the `suspend` a Job had before the webhook suspended it.
ORIGINAL_SUSPEND_ANNOTATION = "tower.dev/original-suspend"
# Set by the controller on a queued Job or JobSet: the ClusterQueue its workload waits in,
# so that the stateless webhook can name it in warnings.
CLUSTER_QUEUE_ANNOTATION = "tower.dev/cluster-queue"
TOPOLOGY_KEY_ANNOTATION = "tower.dev/topology-key"
PLACEMENT_ANNOTATION = "tower.dev/placement"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"

FlavorResource = tuple[str, str]
"""A (flavor, resource) pair: the unit of quota."""

# Builds a NamedTuple from one tuple of all its fields, in order, without the Python-level
# `__new__` that calling the class runs: twice as fast, for the records a cycle builds per
# head (verdicts, assignments, statuses). Defaults are not filled in.
new_tuple = tuple.__new__


class QueueingStrategy(StrEnum):
    """How a ClusterQueue treats a head that cannot be admitted."""

    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class StopPolicy(StrEnum):
    """spec.stopPolicy of a ClusterQueue or LocalQueue."""

    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class WithinClusterQueue(StrEnum):
    """preemption.withinClusterQueue."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohort(StrEnum):
    """preemption.reclaimWithinCohort."""

    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class FungibilityPolicy(StrEnum):
    """flavorFungibility.whenCanBorrow / whenCanPreempt."""

    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


# The policies' members as plain names, for the scheduling cycle's hot paths: Python 3.11
# looks `WithinClusterQueue.NEVER` up through EnumType.__getattr__, about 100 ns a time (3.12
# no longer does), and a cycle asks such questions dozens of times per head.
WITHIN_NEVER = WithinClusterQueue.NEVER
WITHIN_LOWER_PRIORITY = WithinClusterQueue.LOWER_PRIORITY
WITHIN_LOWER_OR_NEWER_EQUAL = WithinClusterQueue.LOWER_OR_NEWER_EQUAL_PRIORITY
RECLAIM_NEVER = ReclaimWithinCohort.NEVER
RECLAIM_LOWER_PRIORITY = ReclaimWithinCohort.LOWER_PRIORITY
RECLAIM_ANY = ReclaimWithinCohort.ANY
MAY_STOP_SEARCH = FungibilityPolicy.MAY_STOP_SEARCH
TRY_NEXT_FLAVOR = FungibilityPolicy.TRY_NEXT_FLAVOR


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    """A kind of node, with the labels and taints that tell its nodes apart."""

    name: str
    node_labels: Mapping[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    topology_name: str | None = None
    topology_key: str | None = None  # tower.dev/topology-key: all pods of a workload in one domain
    # Its Topology's levels, widest first, once known (the cache fills them in).
    topology_levels: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """Quota of one resource in one flavor: nominal, and how much may be borrowed or lent."""

    name: str
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    """One flavor's quotas within a resource group, in coveredResources order."""

    name: str
    resources: tuple[ResourceQuota, ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    """Resources that must all come from the same flavor, and the flavors in preference order."""

    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True, slots=True)
class Preemption:
    """spec.preemption of a ClusterQueue."""

    within_cluster_queue: WithinClusterQueue = WithinClusterQueue.NEVER
    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.NEVER
    borrow_within_cohort: str = "Never"  # Never | LowerPriority
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    """spec.flavorFungibility of a ClusterQueue."""

    when_can_borrow: FungibilityPolicy = FungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FungibilityPolicy = FungibilityPolicy.TRY_NEXT_FLAVOR
    preference: str | None = None  # BorrowingOverPreemption | PreemptionOverBorrowing


def _quota_index(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, ResourceQuota]:
    return {
        (flavor.name, quota.name): quota
        for group in groups
        for flavor in group.flavors
        for quota in flavor.resources
    }


@dataclass(frozen=True, slots=True)
class CheckRule:
    """One AdmissionCheck a ClusterQueue asks for (spec.admissionChecksStrategy): for every
    admission, or only for those given one of `on_flavors`."""

    name: str
    on_flavors: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class AdmissionCheck:
    """An AdmissionCheck: a condition some controller must confirm, after quota is reserved,
    before a workload is admitted. `active` is its status' Active condition, which that
    controller keeps."""

    name: str
    controller_name: str
    parameters: tuple[str, str, str] | None = None  # (apiGroup, kind, name)
    active: bool = False
    message: str = ""  # the Active condition's message


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    """A pool of quota that admits the workloads of its LocalQueues."""

    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: str | None = None
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    # None is Kueue's "nothing" selector: no namespace may use this ClusterQueue.
    namespace_selector: LabelSelector | None = None
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    preemption: Preemption = field(default_factory=Preemption)
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_weight: Fraction = Fraction(1)
    admission_checks: tuple[CheckRule, ...] = ()
    # admissionScope.admissionMode UsageBasedAdmissionFairSharing: its heads are taken by
    # LocalQueue usage first (scheduling/admission_fair_sharing.py), with Kueue's Configuration's
    # admissionFairSharing.
    admission_fair_sharing: bool = False
    # Fields it sets that Tower does not act on and that would change who is admitted
    # (extender/core/api/unacted.py): while any is set, the ClusterQueue admits nothing.
    unacted: tuple[str, ...] = ()
    # Not of the object: Kueue's Configuration resources.quotaCheckStrategy IgnoreUndeclared,
    # set on every ClusterQueue by the state (scheduling/cycle.py) so the flavor search leaves
    # a request for a resource without quota here out, instead of refusing the workload.
    ignores_undeclared: bool = field(default=False, compare=False)
    quotas: Mapping[FlavorResource, ResourceQuota] = field(init=False, repr=False, compare=False)
    group_of: Mapping[str, int] = field(init=False, repr=False, compare=False)
    # Every (flavor, resource) a flavor search may look at: each flavor of each group with
    # each of the group's covered resources.
    flavor_resources: tuple[FlavorResource, ...] = field(init=False, repr=False, compare=False)
    names_of_flavors: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "names_of_flavors", tuple(f.name for g in self.resource_groups for f in g.flavors)
        )
        object.__setattr__(self, "quotas", _quota_index(self.resource_groups))
        object.__setattr__(
            self,
            "group_of",
            {r: i for i, g in enumerate(self.resource_groups) for r in g.covered_resources},
        )
        object.__setattr__(
            self,
            "flavor_resources",
            tuple(
                (f.name, r)
                for g in self.resource_groups
                for f in g.flavors
                for r in g.covered_resources
            ),
        )

    def flavor_names(self) -> tuple[str, ...]:
        """Every flavor this ClusterQueue names, in order."""
        return self.names_of_flavors


@dataclass(frozen=True, slots=True)
class Cohort:
    """A node of the cohort tree: a shared pool above its ClusterQueues and child cohorts."""

    name: str
    parent: str | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: Fraction = Fraction(1)
    quotas: Mapping[FlavorResource, ResourceQuota] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "quotas", _quota_index(self.resource_groups))


@dataclass(frozen=True, slots=True)
class LocalQueue:
    """A namespace's door into a ClusterQueue."""

    namespace: str
    name: str
    cluster_queue: str
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_weight: float = 1.0  # spec.fairSharing.weight, for admission fair sharing

    @property
    def key(self) -> str:
        """namespace/name."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    """A priority for workloads only (label kueue.x-k8s.io/priority-class)."""

    name: str
    value: int


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """A scheduling.k8s.io PriorityClass, as far as workload priority needs it."""

    name: str
    value: int
    global_default: bool = False


@dataclass(frozen=True, slots=True)
class Namespace:
    """A namespace and its labels (for namespaceSelector)."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodSet:
    """A group of identical pods of a workload: count pods, each requesting `requests`."""

    name: str
    count: int
    requests: Mapping[str, int]  # per pod, in accounted units (milli-cpu, bytes, ...)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    min_count: int | None = None
    topology: TopologyRequest | None = None  # spec.podSets[].topologyRequest
    # What the pod itself asks of a node, where the quota counts otherwise (Kueue's
    # resources.transformations and excludeResourcePrefixes); None: the same as `requests`.
    own_requests: Mapping[str, int] | None = None
    totals: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "totals", {r: v * self.count for r, v in self.requests.items()})

    @property
    def pod_requests(self) -> Mapping[str, int]:
        """One pod's requests as a node sees them (placement), before the quota's policy."""
        return self.requests if self.own_requests is None else self.own_requests

    def total(self, count: int | None = None) -> Mapping[str, int]:
        """What the whole pod set requests, for `count` pods (default: all of them)."""
        if count is None:
            return self.totals
        return {r: v * count for r, v in self.requests.items()}


@dataclass(frozen=True, slots=True)
class Workload:
    """The unit of admission: a Job's or JobSet's pods, with its queue and priority."""

    namespace: str
    name: str
    uid: str
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    priority_class_name: str | None = None
    priority_class_source: str = ""  # kueue.x-k8s.io/workloadpriorityclass | scheduling...
    creation_time: float = 0.0
    owner_kind: str = ""
    owner_name: str = ""
    # spec.maximumExecutionTimeSeconds: admitted this long in all, it is deactivated.
    max_execution_seconds: int | None = None
    # Fields it sets that Tower does not act on (extender/core/api/unacted.py): it waits.
    unacted: tuple[str, ...] = ()
    # Kueue's admission-gated-by annotation as written: while not empty, it waits
    # (extender/core/api/admission_gates.py).
    admission_gated_by: str = ""
    # An elastic job's scale-up slice: the key of the admitted slice it replaces (Kueue's
    # workload-slice-replacement-for), whose quota it counts as its own.
    replacement_for: str = ""
    # Why Kueue would not queue it at all, in Kueue's words (a DRA claim it cannot count,
    # extender/core/jobframework/dra.py): it waits, inadmissible, while this holds.
    inadmissible: str = ""
    # Kueue's workload-allowed-resource-flavors on a concurrent-admission variant: the only
    # flavors its search looks at (extender/core/scheduling/concurrent.py).
    allowed_flavors: tuple[str, ...] = ()
    # A variant whose concurrent-admission preemption gate is not open: it may not preempt.
    preemption_gated: bool = False
    key: str = field(init=False, repr=False, compare=False)
    """namespace/name (computed once: it is looked up on every queue operation)."""
    order: tuple[int, float, str] = field(init=False, repr=False, compare=False)
    """Kueue's queue order: higher priority first, then earlier creation, then uid."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "order", (-self.priority, self.creation_time, self.uid))


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    """Where one pod set was admitted: a flavor per resource, and the quota it holds."""

    name: str
    flavors: Mapping[str, str]
    resource_usage: Mapping[str, int]
    count: int
    topology: TopologyAssignment | None = None  # where its pods go, in a topology flavor
    # Kueue's delayedTopologyRequest: "Pending" until a ProvisioningRequest check is Ready
    # and the pods are placed ("Ready"); None when placement is not delayed.
    delayed_topology: str | None = None


@dataclass(frozen=True, slots=True)
class Admission:
    """Workload.status.admission: the ClusterQueue and the pod set assignments."""

    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignment, ...]

    def usage(self) -> dict[FlavorResource, int]:
        """The quota this admission holds, per (flavor, resource)."""
        out: dict[FlavorResource, int] = {}
        for psa in self.pod_set_assignments:
            for resource, amount in psa.resource_usage.items():
                key = (psa.flavors[resource], resource)
                out[key] = out.get(key, 0) + amount
        return out

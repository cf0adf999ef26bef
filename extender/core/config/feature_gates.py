"""A table: every feature gate of Kueue v0.19.2 (pkg/features/kube_features.go), and Tower's stand.

Each row is the gate as Kueue's feature gate takes it at v0.19.2 (the last of its versioned
specs: default, pre-release stage, locked to its default) and what Tower does about it:

- `implemented`: Tower's behaviour follows the gate, on or off;
- `always`: Tower behaves as the gate's default and cannot do otherwise;
- `absent`: Tower has no such behaviour, as if the gate were off;
- `internal`: a choice inside Kueue's implementation (a cache, a patch type) that changes
  nothing a user sees; either value is accepted and Tower does its own.

tests/unit/core/config/test_feature_gates.py holds the names, defaults and stages against
Kueue's source (tests/data/kueue-features/), and docs/kueue.md lists the table.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Stage(enum.StrEnum):
    ALPHA = "Alpha"
    BETA = "Beta"
    GA = "GA"
    DEPRECATED = "Deprecated"


class Stand(enum.StrEnum):
    IMPLEMENTED = "implemented"
    ALWAYS = "always"
    ABSENT = "absent"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class FeatureGate:
    name: str
    default: bool
    stage: Stage
    stand: Stand
    tower: str  # what Tower does, in a few words
    locked: bool = False  # Kueue refuses any value but the default

    @property
    def tower_value(self) -> bool | None:
        """The only value Tower can honour, or None when it takes either."""
        if self.stand is Stand.ALWAYS:
            return self.default
        if self.stand is Stand.ABSENT:
            return False
        return None


A, B, GA, DEP = Stage.ALPHA, Stage.BETA, Stage.GA, Stage.DEPRECATED
IMPL, ALWAYS, ABSENT, INTERNAL = Stand.IMPLEMENTED, Stand.ALWAYS, Stand.ABSENT, Stand.INTERNAL
_ = FeatureGate

# In the order of Kueue's const block.
GATES: tuple[FeatureGate, ...] = (
    _("PartialAdmission", True, B, ALWAYS, "admits down to a podSet's minCount"),
    _("FlavorFungibility", True, B, ALWAYS, "follows a ClusterQueue's flavorFungibility"),
    _("VisibilityOnDemand", True, B, ALWAYS, "serves the visibility API where configured"),
    _(
        "DisableWaitForPodsReady",
        False,
        A,
        IMPL,
        "turns waitForPodsReady off when on, whatever the file says",
    ),
    _("PrioritySortingWithinCohort", True, B, ALWAYS, "orders a cohort's workloads by priority"),
    _(
        "FairSharingPreemptWithinNominal",
        True,
        B,
        IMPL,
        "a fair-sharing preemptor within nominal quota reclaims whatever the shares, on or off",
    ),
    _(
        "FairSharingPrioritizeNonBorrowing",
        True,
        B,
        ABSENT,
        "fair-sharing order does not prefer non-borrowing subtrees",
    ),
    _("MultiKueue", True, B, ALWAYS, "runs MultiKueue admission checks"),
    _("TopologyAwareScheduling", True, B, ALWAYS, "places workloads on topology domains"),
    _("LocalQueueMetrics", True, B, IMPL, "kueue_local_queue_* metrics, on or off"),
    _(
        "TASProfileMixed",
        True,
        B,
        ALWAYS,
        "uses BestFit, and LeastFreeCapacity where unconstrained",
    ),
    _("HierarchicalCohorts", True, GA, ALWAYS, "builds cohort trees", locked=True),
    _("AdmissionFairSharing", True, B, ALWAYS, "acts on admissionFairSharing when configured"),
    _(
        "ObjectRetentionPolicies",
        True,
        GA,
        ALWAYS,
        "deletes finished and deactivated Workloads by objectRetentionPolicies",
        locked=True,
    ),
    _("TASFailedNodeReplacement", True, B, ALWAYS, "replaces a failed node of a TAS workload"),
    _(
        "ElasticJobsViaWorkloadSlices",
        True,
        B,
        IMPL,
        "scales an elastic Job, RayJob or RayCluster through Workload slices; off, the "
        "elastic-job annotation is ignored",
    ),
    _(
        "ElasticJobsViaWorkloadSlicesWithTAS",
        False,
        A,
        ABSENT,
        "places a scale-up slice's pods on topology domains afresh (the old slice's kept)",
    ),
    _(
        "TASFailedNodeReplacementFailFast",
        True,
        B,
        ALWAYS,
        "evicts a TAS workload whose failed node has no replacement",
    ),
    _(
        "TASReplaceNodeOnPodTermination",
        True,
        B,
        IMPL,
        "a NotReady node fails once its pods stop, on or off",
    ),
    _(
        "SkipReassignmentForPodOwnedWorkloads",
        True,
        B,
        IMPL,
        "a single pod's Workload keeps its node, on or off",
    ),
    _(
        "TASReplaceNodeDueToNotReadyOverFixedTime",
        False,
        DEP,
        IMPL,
        "a node NotReady for 30 s fails, on or off",
    ),
    _(
        "ManagedJobsNamespaceSelectorAlwaysRespected",
        True,
        GA,
        ALWAYS,
        "manages jobs only in the selected namespaces",
        locked=True,
    ),
    _("TASBalancedPlacement", False, A, ABSENT, "has no balanced TAS placement"),
    _(
        "TASAssignmentsEncodingByHostnamePrefix",
        True,
        B,
        ABSENT,
        "writes topology assignments without hostname prefixes (reads both)",
    ),
    _(
        "KueueDRAIntegration",
        True,
        B,
        IMPL,
        "counts devices claimed through ResourceClaimTemplates by deviceClassMappings",
    ),
    _(
        "KueueDRAIntegrationExtendedResource",
        True,
        B,
        ABSENT,
        "counts a DRA-backed extended resource as any other request (reads no DeviceClass)",
    ),
    _(
        "KueueDRARejectWorkloadsWhenDRADisabled",
        True,
        B,
        IMPL,
        "with KueueDRAIntegration off, a Workload with claims is inadmissible (else admitted)",
    ),
    _(
        "KueueDRAIntegrationPartitionableDevices",
        True,
        B,
        ABSENT,
        "has no DRA partitionable devices",
    ),
    _("KueueDRAIntegrationConsumableCapacity", False, A, ABSENT, "has no DRA consumable capacity"),
    _(
        "QuotaCheckStrategy",
        True,
        B,
        IMPL,
        "acts on resources.quotaCheckStrategy; off, undeclared resources block",
    ),
    _(
        "MultiKueueAdaptersForCustomJobs",
        True,
        B,
        ABSENT,
        "has no MultiKueue for external frameworks (warned)",
    ),
    _("WorkloadRequestUseMergePatch", False, A, INTERNAL, "writes Workloads its own way"),
    _(
        "MultiKueueAllowInsecureKubeconfigs",
        False,
        DEP,
        ALWAYS,
        "refuses insecure worker kubeconfigs",
        locked=True,
    ),
    _(
        "MultiKueueKubeConfigPathValidation",
        False,
        A,
        ALWAYS,
        "reads a Path kubeconfig wherever it is",
    ),
    _(
        "ReclaimablePods",
        True,
        B,
        IMPL,
        "gives back finished pods' quota (Job, JobSet, pod group), on or off",
    ),
    _(
        "PropagateBatchJobLabelsToWorkload",
        True,
        GA,
        ALWAYS,
        "keeps a Job's labels in its Workload's pod template",
        locked=True,
    ),
    _(
        "MultiKueueClusterProfile",
        False,
        A,
        IMPL,
        "reaches a MultiKueueCluster's worker through its ClusterProfile and an exec plugin",
    ),
    _(
        "FailureRecoveryPolicy",
        False,
        A,
        IMPL,
        "deletes opted-in pods stuck terminating on an unreachable node a minute on",
    ),
    _(
        "SkipFinalizersForPodsSuspendedByParent",
        True,
        GA,
        ALWAYS,
        "puts no finalizer on pods a parent suspends",
        locked=True,
    ),
    _(
        "MultiKueueWaitForWorkloadAdmitted",
        True,
        GA,
        ALWAYS,
        "cleans up other workers once one admits",
        locked=True,
    ),
    _(
        "MultiKueueRedoAdmissionOnEvictionInWorker",
        True,
        GA,
        ALWAYS,
        "dispatches again when a worker evicts",
        locked=True,
    ),
    _("TLSOptions", True, B, ABSENT, "ignores the Configuration's tls (warned)"),
    _("RemoveFinalizersWithStrictPatch", True, B, INTERNAL, "removes finalizers its own way"),
    _(
        "TASReplaceNodeOnNodeTaints",
        True,
        B,
        IMPL,
        "a node tainted against the pods fails, on or off",
    ),
    _("AssignQueueLabelsForPods", True, B, ALWAYS, "labels pods with their queues' names"),
    _("TASMultiLayerTopology", True, B, ABSENT, "has no multi-layer slice constraints"),
    _(
        "SchedulingEquivalenceHashing",
        True,
        B,
        ALWAYS,
        "skips workloads equivalent to an inadmissible one",
    ),
    _("SchedulerLongRequeueInterval", False, A, ALWAYS, "requeues on its own short interval"),
    _("SchedulerTimestampPreemptionBuffer", False, A, ALWAYS, "uses no timestamp buffer"),
    _(
        "CustomMetricLabels",
        False,
        A,
        IMPL,
        "metrics.customLabels: custom_<name> labels on the queue metrics, Workload keys copied",
    ),
    _(
        "SparkApplicationIntegration",
        False,
        A,
        IMPL,
        "manages SparkApplications only with it on",
    ),
    _(
        "MultiKueueOrchestratedPreemption",
        False,
        A,
        IMPL,
        "gates a MultiKueue copy's preemption: one worker at a time may preempt for it",
    ),
    _("PriorityBoost", False, A, ABSENT, "does not read kueue.x-k8s.io/priority-boost"),
    _(
        "AdmissionGatedBy",
        True,
        B,
        ALWAYS,
        "holds a job while kueue.x-k8s.io/admission-gated-by names a gate",
    ),
    _("ShortWorkloadNames", False, A, ALWAYS, "names Workloads as Kueue does by default"),
    _(
        "FastQuotaReleaseInPodIntegration",
        False,
        A,
        ALWAYS,
        "counts a terminating pod until it is gone",
    ),
    _(
        "RejectUpdatesToCQWithInvalidOnFlavors",
        False,
        A,
        ALWAYS,
        "accepts a ClusterQueue whose onFlavors name no flavor of it",
    ),
    _("FinishOrphanedWorkloads", True, B, ALWAYS, "finishes a Workload whose job is gone"),
    _(
        "MultiKueueIncrementalDispatcherConfig",
        True,
        B,
        ALWAYS,
        "acts on incrementalDispatcherConfig.stepSize",
    ),
    _(
        "MultiKueueIncrementalDispatcherRespectConfigOrder",
        True,
        B,
        ALWAYS,
        "nominates workers in the MultiKueueConfig's order",
    ),
    _(
        "ConcurrentAdmission",
        False,
        A,
        IMPL,
        "a parent Workload, one variant per flavor, migration to a preferred flavor",
    ),
    _(
        "MetricForWorkloadCreationLatency",
        True,
        B,
        IMPL,
        "kueue_workload_creation_latency_seconds, on or off",
    ),
    _(
        "TASRespectNodeAffinityPreferred",
        False,
        A,
        ABSENT,
        "ignores preferred node affinity in TAS",
    ),
    _(
        "MultiKueueManagerQuotaAutomation",
        False,
        A,
        IMPL,
        "sums the workers' quotas on a manager ClusterQueue when its config asks",
    ),
    _(
        "WorkloadIdentifierAnnotations",
        True,
        B,
        IMPL,
        "tells a StatefulSet's or LeaderWorkerSet's pods their group by annotation, or label",
    ),
    _(
        "WorkloadPriorityClassDefaulting",
        False,
        A,
        IMPL,
        "gives a queued job without a class the WorkloadPriorityClass default, on or off",
    ),
    _("MetricsForCohorts", True, B, IMPL, "kueue_cohort_* and *_info metrics, on or off"),
    _(
        "CleanupProvisioningRequestsOnEviction",
        True,
        B,
        ALWAYS,
        "deletes an evicted Workload's ProvisioningRequests",
    ),
    _(
        "TASHandleOverlappingFlavors",
        True,
        B,
        ALWAYS,
        "counts usage of topology flavors sharing nodes",
    ),
    _(
        "UnadmittedWorkloadsObservability",
        False,
        B,
        ABSENT,
        "has no tiered reasons for unadmitted workloads",
    ),
    _(
        "TASRecomputeAssignmentWithinSchedulingCycle",
        True,
        B,
        ALWAYS,
        "places a TAS workload again in the cycle when it does not fit",
    ),
    _(
        "UnadmittedWorkloadsExplicitStatus",
        False,
        B,
        ABSENT,
        "writes QuotaReserved=False with the first reason",
    ),
    _(
        "DeferRayServiceFinalizationForRedisCleanup",
        True,
        B,
        ABSENT,
        "does not wait for KubeRay's Redis cleanup",
    ),
    _("TASCacheNodeMatchResults", True, B, INTERNAL, "caches its own way"),
    _("TASCachingRemainingResources", True, B, INTERNAL, "caches its own way"),
    _("TASCacheTopologyTree", False, A, INTERNAL, "caches its own way"),
    _("SchedulerLibraryIntegration", False, A, ABSENT, "does not use scheduler-library"),
    _("VectorizedResourceRequests", True, B, INTERNAL, "stores requests its own way"),
    _(
        "WorkloadValidateResourcesAreNonNegative",
        True,
        B,
        ABSENT,
        "leaves negative requests to kube-apiserver's own checks of pods",
    ),
    _("TASValidateWorkloadSliceSize", True, B, ABSENT, "does not refuse a slice size below 1"),
    _(
        "WorkloadValidationForPodSetMetadata",
        True,
        B,
        ABSENT,
        "does not validate podSet template labels and annotations itself",
    ),
    _("PrioritizePreemptorWorkloads", False, A, ALWAYS, "does not favour waiting preemptors"),
    _("LWSImmutableGroupSize", True, B, ALWAYS, "refuses a managed LeaderWorkerSet's new size"),
    _(
        "FlavorFungibilityPreserveScanProgress",
        True,
        B,
        IMPL,
        "a pending workload's flavor search resumes after the flavor it stopped at in the "
        "cycle before; off, that progress is forgotten on any update, skip or quota change",
    ),
    _(
        "SkipAncestorCheckForDeletedWorkloads",
        True,
        B,
        ALWAYS,
        "does not block a deleting object on a missing owner",
    ),
    _(
        "MultiKueueRemoteSpecSync",
        True,
        B,
        ABSENT,
        "does not forward spec changes to the worker",
    ),
    _(
        "RecomputeAssignmentUponPreemptionTargetsOverlap",
        False,
        A,
        ALWAYS,
        "does not recompute on overlapping preemption targets",
    ),
    _(
        "PodIntegrationValidateGroupOwner",
        True,
        B,
        ALWAYS,
        "adopts only group Workloads for a pod group",
    ),
    _(
        "ValidateRayAndSparkJobUpdates",
        True,
        B,
        ABSENT,
        "does not check a Ray job's update that drops its queue-name label",
    ),
)

BY_NAME: dict[str, FeatureGate] = {g.name: g for g in GATES}

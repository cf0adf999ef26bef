"""What each field of Kueue's Configuration becomes in Tower: the flag it sets, or a warning.

A file written for Kueue applies unchanged; a field Tower does not act on is named, one
line each, when it is set (and the docs list both tables, extender/kube/generators).
"""

from __future__ import annotations

from typing import Any

from extender.core.api.unacted import Effect, Unacted
from extender.core.config.schema import KIND

# What the file's fields become, for the docs and for the warnings.
ACTED: dict[str, str] = {
    "clientConnection.qps": "--kube-api-qps",
    "clientConnection.burst": "--kube-api-burst",
    "leaderElection.leaderElect": "--leader-elect",
    "leaderElection.leaseDuration": "--lease-duration",
    "leaderElection.renewDeadline": "--renew-deadline",
    "leaderElection.retryPeriod": "--retry-period",
    "leaderElection.resourceName": "--leader-election-id",
    "leaderElection.resourceNamespace": "--leader-election-namespace",
    "leaderElection.resourceLock": "`leases` only, the lock Tower uses",
    "integrations.frameworks": "--integrations",
    "multiKueue.clusterProfile": (
        "with feature gate MultiKueueClusterProfile, a MultiKueueCluster naming a "
        "ClusterProfile is reached through the exec plugin of the first accessProviders entry "
        "the profile offers, as in Kueue"
    ),
    "integrations.labelKeysToCopy": (
        "a job's labels with these keys are copied to the Workload made for it, once (a pod "
        "group's members must agree; a StatefulSet's Workload gets none), as in Kueue"
    ),
    "fairSharing": "--fair-sharing (v1beta1: fairSharing.enable)",
    "fairSharing.preemptionStrategies": (
        "fair-sharing preemption follows them: Kueue's default, LessThanOrEqualToFinalShare "
        "then LessThanInitialShare, or either alone; a ClusterQueue within its nominal quota "
        "reclaims whatever the shares (feature gate FairSharingPreemptWithinNominal)"
    ),
    "resources.quotaCheckStrategy": (
        "BlockUndeclared (the default): a request for a resource the ClusterQueue has no quota "
        "for keeps the workload out; IgnoreUndeclared: that request is left out of flavor "
        "assignment and usage, as in Kueue (feature gate QuotaCheckStrategy)"
    ),
    "waitForPodsReady": (
        "all-or-nothing admission with ready pods: timeout, recoveryTimeout, blockAdmission "
        "and requeuingStrategy as Kueue acts on them; on by v1beta2's default when unset "
        "(v1beta1: waitForPodsReady.enable), off without --config"
    ),
    "admissionFairSharing": (
        "usage-based admission fair sharing for ClusterQueues whose admissionScope asks for "
        "it: usageHalfLifeTime, usageSamplingInterval and resourceWeights as Kueue acts on them"
    ),
    "manageJobsWithoutQueueName": (
        "python -m webhook --config: a job without a queue-name label in a namespace the "
        "selector below selects goes to its namespace's LocalQueue `default`; "
        "python -m certs bootstrap --config points the webhooks at those namespaces"
    ),
    "managedJobsNamespaceSelector": (
        "the namespaces whose jobs are managed at all, labelled or not (Kueue's "
        "ManagedJobsNamespaceSelectorAlwaysRespected): the webhooks' namespaceSelector, and "
        "the controller leaves a job elsewhere alone; default: not kube-system, not Tower's own"
    ),
    "resources.excludeResourcePrefixes": (
        "requests of resources with these prefixes are not counted against quota"
    ),
    "resources.transformations": (
        "each pod's requests are transformed (Retain or Replace, multiplyBy, outputs) before "
        "quota counts them, as in Kueue"
    ),
    "resources.deviceClassMappings": (
        "devices a pod claims through a ResourceClaimTemplate count against quota under the "
        "mapped name, as in Kueue (device count; counter and capacity sources are refused)"
    ),
    "metrics.bindAddress": (
        "--metrics-address: /metrics over HTTPS, to a caller kube-apiserver authenticates "
        "(TokenReview, the front proxy's or a client certificate) and allows `get` on /metrics "
        "(SubjectAccessReview), as Kueue serves it; Kueue's default :8443, 0 turns it off"
    ),
    "visibilityServer.bindAddress": (
        "Kueue's visibility API (visibility.kueue.x-k8s.io) listens there, behind the same "
        "authentication as /metrics (--visibility-address wins over it)"
    ),
    "visibilityServer.bindPort": (
        "the visibility API's port, Kueue's default 8082 where the section is there; without "
        "the section Tower serves it only where --visibility-address says (the manifests: 8083)"
    ),
    "metrics.enableClusterQueueResources": (
        "the ClusterQueues' resource gauges (kueue_cluster_queue_resource_reservation, "
        "_resource_usage, _resource_pending, _nominal_quota, _borrowing_limit, _lending_limit, "
        "_weighted_share), off by default as in Kueue"
    ),
    "metrics.customLabels": (
        "checked as Kueue checks them; with feature gate CustomMetricLabels, Kueue's "
        "ClusterQueue, LocalQueue and Cohort families carry a custom_<name> label read from "
        "the queue's label or annotation (kueue_admitted_active_workloads also the Workload's), "
        "and the label or annotation of each sourceKind Workload entry is copied from a job to "
        "its Workload (a pod group's members must agree, else it gets none), as in Kueue"
    ),
    "metrics.localQueueMetrics": (
        "which LocalQueues have kueue_local_queue_* series: `enable` (on when the section is "
        "absent, off when it is there without it, as in Kueue) and `localQueueSelector`"
    ),
    "objectRetentionPolicies": (
        "workloads.afterFinished: a finished Workload is deleted that long after it finished; "
        "workloads.afterDeactivatedByKueue: the job of a Workload Tower deactivated (requeuing "
        "limit, maximum execution time, a rejected check) is deleted that long after, its "
        "Workload with it; one deactivated by hand is kept; as in Kueue"
    ),
    "featureGates": (
        "--feature-gates (the flag wins gate by gate): Kueue's gates by Kueue's names and "
        "defaults, refused with Kueue's error when unknown or locked, and refused in one line "
        "when Tower cannot do what is asked (docs/kueue.md, Feature gates)"
    ),
}


def _cfg(path: str, feature: str, advice: str = "", **kw: Any) -> Unacted:
    return Unacted(KIND, path, Effect.HINT, feature, advice, **kw)


# Every other field of the file, one line each when it is set.
UNACTED: tuple[Unacted, ...] = (
    _cfg("namespace", "the namespace of Kueue's webhook Service"),
    _cfg(
        "metadata",
        "not a field of Kueue's Configuration, though its docs' example has one",
        "ignored; Kueue's strict decoding refuses the file",
    ),
    _cfg(
        "internalCertManagement",
        "Kueue's own webhook certificates",
        "Tower's are python -m certs bootstrap, or cert-manager",
    ),
    _cfg("integrations.externalFrameworks", "jobs managed by external controllers"),
    _cfg("integrations.podOptions", "pod integration options, dropped in v1beta2"),
    _cfg("multiKueue.externalFrameworks", "MultiKueue for jobs of external frameworks"),
    _cfg("queueVisibility", "queue visibility in ClusterQueue status, dropped in v1beta2"),
    _cfg("webhook", "Kueue's webhook server", "Tower's webhook is python -m webhook"),
    _cfg("health", "Kueue's health probe server", "Tower's is --health-address"),
    _cfg("pprofBindAddress", "pprof"),
    _cfg("controller", "controller concurrency and cache sync timeout"),
    _cfg("tls", "TLS options of Kueue's servers"),
)

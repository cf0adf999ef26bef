"""The API resources the controller reads and writes, and the URL paths that address them."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from extender.core.jobframework.adapter import JobAdapter, Reference
from extender.core.jobframework.parent import TemplateParent

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"


@dataclass(frozen=True, slots=True)
class Resource:
    """One API resource: where it lives and what its objects are called."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool
    # A second view of the same API resource, kept apart in the cache: the pods queued as
    # jobs ("queued") beside every pod the placement inventory counts.
    view: str = ""

    @property
    def key(self) -> str:
        """The name the cache keeps its objects under (a view apart from the plain one)."""
        return f"{self.plural}/{self.view}" if self.view else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """`jobs.batch`, as kube-apiserver names a resource in its messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        """The URL path of the collection, or of one object (and its subresource)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


JOBS = Resource("batch", "v1", "jobs", "Job", True)
JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet", True)


def resource_of(adapter: JobAdapter) -> Resource:
    """The API resource of a kind of job (every managed kind is namespaced); one object per
    resource, so it compares by identity as the constants above do."""
    known = _BY_ADAPTER.get(adapter)
    if known is None:
        resource = Resource(
            adapter.group, adapter.version, adapter.plural, adapter.kind, True, adapter.cache_view
        )
        known = _BY_ADAPTER[adapter] = _JOB_RESOURCES.setdefault(resource, resource)
    return known


def resource_of_parent(parent: TemplateParent) -> Resource:
    """The API resource of a kind whose pods Tower queues (a StatefulSet)."""
    return Resource(parent.group, parent.version, parent.plural, parent.kind, True)


def resource_of_reference(ref: Reference) -> Resource:
    """The API resource of an object a job refers to (a TrainJob's runtime)."""
    return Resource(ref.group, ref.version, ref.plural, ref.kind, ref.namespace is not None)


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
NODES = Resource("", "v1", "nodes", "Node", False)
PODS = Resource("", "v1", "pods", "Pod", True)
_JOB_RESOURCES: dict[Resource, Resource] = {JOBS: JOBS, JOBSETS: JOBSETS}
_BY_ADAPTER: dict[JobAdapter, Resource] = {}

EVENTS = Resource("", "v1", "events", "Event", True)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)

RESOURCE_FLAVORS = Resource(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", "ResourceFlavor", False)
CLUSTER_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", "ClusterQueue", False)
COHORTS = Resource(KUEUE_GROUP, KUEUE_VERSION, "cohorts", "Cohort", False)
LOCAL_QUEUES = Resource(KUEUE_GROUP, KUEUE_VERSION, "localqueues", "LocalQueue", True)
WORKLOADS = Resource(KUEUE_GROUP, KUEUE_VERSION, "workloads", "Workload", True)
WORKLOAD_PRIORITY_CLASSES = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", "WorkloadPriorityClass", False
)
ADMISSION_CHECKS = Resource(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", "AdmissionCheck", False)
PROVISIONING_REQUEST_CONFIGS = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "provisioningrequestconfigs", "ProvisioningRequestConfig", False
)
TOPOLOGIES = Resource(KUEUE_GROUP, KUEUE_VERSION, "topologies", "Topology", False)
MULTIKUEUE_CONFIGS = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "multikueueconfigs", "MultiKueueConfig", False
)
MULTIKUEUE_CLUSTERS = Resource(
    KUEUE_GROUP, KUEUE_VERSION, "multikueueclusters", "MultiKueueCluster", False
)
PROVISIONING_REQUESTS = Resource(
    "autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest", True
)
POD_TEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)  # read one by one, never watched
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)
# Watched once the API server serves them (a CRD installed later is taken up): what Tower's
# ProvisioningRequest admission check controller reads.
OPTIONAL: tuple[Resource, ...] = (
    PROVISIONING_REQUEST_CONFIGS,
    PROVISIONING_REQUESTS,
    MULTIKUEUE_CONFIGS,  # and what Tower's MultiKueue check controller reads
    MULTIKUEUE_CLUSTERS,
    RESOURCE_CLAIM_TEMPLATES,  # and the devices pods claim (DRA), where resource.k8s.io/v1 is
)


# The queues' configuration: every kind the core's state is configured from.
CONFIG: tuple[Resource, ...] = (
    RESOURCE_FLAVORS,
    CLUSTER_QUEUES,
    COHORTS,
    LOCAL_QUEUES,
    WORKLOAD_PRIORITY_CLASSES,
    PRIORITY_CLASSES,
    NAMESPACES,
    ADMISSION_CHECKS,
    TOPOLOGIES,
)


def object_key(obj: dict[str, object]) -> str:
    """`namespace/name` for a namespaced object, `name` for a cluster-scoped one."""
    meta = obj.get("metadata") or {}
    assert isinstance(meta, dict)
    namespace = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name

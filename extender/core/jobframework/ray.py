"""KubeRay's RayJob, RayCluster and RayService as Kueue v0.19.2 reads them.

The head, then one podSet per worker group, then (a RayJob in K8sJobMode) its submitter. The
head's podSet also counts what KubeRay adds to the head pod at run time (the autoscaler
sidecar, a SidecarMode submitter) and the Redis cleanup Job of a GCS fault-tolerant cluster.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from extender.core.api.parse import ManifestError, as_list, as_map
from extender.core.api.quantity import parse_quantity
from extender.core.jobframework.adapter import (
    JobAdapter,
    Obj,
    PodSetTemplate,
    as_count,
    as_mapping,
    as_sequence,
    condition_true,
    replace_maps,
)
from extender.core.jobframework.slices import ELASTIC_JOB, FRAMEWORKS, annotated

RAY = "ray.io"
MAX_POD_SETS = 18  # a Workload's podSets: Kueue's limit, so at most 17 worker groups
SUBMITTER = "submitter"
K8S_JOB_MODE, SIDECAR_MODE = "K8sJobMode", "SidecarMode"
# KubeRay's default submitter container (Kueue counts it as KubeRay runs it).
SUBMITTER_CONTAINER = "ray-job-submitter"
SUBMITTER_RESOURCES = {
    "limits": {"cpu": "1", "memory": "1Gi"},
    "requests": {"cpu": "500m", "memory": "200Mi"},
}
RAY_CLUSTER = (RAY, "RayCluster")
# KubeRay's autoscaler sidecar in the head pod of an in-tree autoscaling cluster, with the
# resources KubeRay gives it unless autoscalerOptions.resources says otherwise.
AUTOSCALER_CONTAINER = "autoscaler"
AUTOSCALER_RESOURCES = {
    "requests": {"cpu": "500m", "memory": "512Mi"},
    "limits": {"cpu": "500m", "memory": "512Mi"},
}
# KubeRay's Redis cleanup Job of a GCS fault-tolerant cluster runs with these requests, in
# the head's quota (Kueue takes the larger of them and the head's Ray container's).
REDIS_CLEANUP_REQUESTS = {"cpu": "200m", "memory": "256Mi"}
FT_ENABLED = "ray.io/ft-enabled"  # KubeRay's older switch for GCS fault tolerance
# Containers Kueue counts in the head's podSet that the job's own template does not hold.
ADDED_CONTAINERS = (AUTOSCALER_CONTAINER, SUBMITTER_CONTAINER)


def _worker_count(group: Mapping[str, Any], path: str) -> int:
    """replicas (1 when unset) × numOfHosts: minReplicas and maxReplicas do not count."""
    replicas = group.get("replicas")
    hosts = group.get("numOfHosts")
    for key, value in (("replicas", replicas), ("numOfHosts", hosts)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 0
        ):
            raise ManifestError(f"{path}.{key}", f"must be a non-negative integer, got {value!r}")
    count = 1 if replicas is None else replicas
    return count * hosts if isinstance(hosts, int) and hosts > 1 else count


# Kueue's refusals of an autoscaling cluster that is not an elastic job (its Ray webhooks).
AUTOSCALING_REFUSALS = {
    "ray.io/raycluster": (
        "a kueue-managed RayCluster can use autoscaling only as an elastic job: enable the "
        f'ElasticJobsViaWorkloadSlices feature gate and set the "{ELASTIC_JOB}": "true" '
        "annotation"
    ),
    "ray.io/rayjob": (
        "a kueue managed job should only use autoscaling when workload slicing is enabled"
    ),
    "ray.io/rayservice": (
        "a kueue managed job should only use autoscaling when workload slicing is enabled"
    ),
}


def _gcs_fault_tolerant(spec: Mapping[str, Any], annotations: Mapping[str, Any]) -> bool:
    """KubeRay's IsGCSFaultToleranceEnabled: gcsFaultToleranceOptions, or the old annotation."""
    flag = annotations.get(FT_ENABLED)
    return spec.get("gcsFaultToleranceOptions") is not None or (
        isinstance(flag, str) and flag.lower() == "true"
    )


def _autoscaler(spec: Mapping[str, Any]) -> Obj:
    """The autoscaler sidecar as KubeRay adds it: its own resources, or KubeRay's."""
    options = as_mapping(spec.get("autoscalerOptions"))
    resources = options.get("resources")
    chosen = resources if isinstance(resources, Mapping) else AUTOSCALER_RESOURCES
    return {"name": AUTOSCALER_CONTAINER, "resources": copy.deepcopy(dict(chosen))}


def _with_cleanup_requests(template: Mapping[str, Any]) -> Obj:
    """The head's Ray container (its first) asking at least what the Redis cleanup Job asks."""
    out = copy.deepcopy(dict(template))
    containers = as_mapping(out.get("spec")).get("containers")
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
        return out
    resources = containers[0].setdefault("resources", {})
    requests = resources.get("requests")
    requests = dict(requests) if isinstance(requests, Mapping) else {}
    for name, value in REDIS_CLEANUP_REQUESTS.items():
        own = requests.get(name)
        try:
            larger = own is not None and parse_quantity(own) >= parse_quantity(value)
        except (TypeError, ValueError):
            larger = True  # an unreadable quantity is the podSet parser's to name
        if not larger:
            requests[name] = value
    resources["requests"] = requests
    return out


def head_template(
    spec: Mapping[str, Any], annotations: Mapping[str, Any], sidecar: Obj | None = None
) -> Obj:
    """The head's pod template as Kueue counts it (BuildPodSets): the Redis cleanup Job's
    requests in a GCS fault-tolerant cluster, then the autoscaler sidecar of an in-tree
    autoscaling one, then a RayJob's SidecarMode submitter (`sidecar`)."""
    template: Obj = dict(as_mapping(as_mapping(spec.get("headGroupSpec")).get("template")))
    if _gcs_fault_tolerant(spec, annotations):
        template = _with_cleanup_requests(template)
    if spec.get("enableInTreeAutoscaling") is True:
        template = _with_container(template, _autoscaler(spec))
    if sidecar is not None:
        template = _with_container(template, sidecar)
    return template


def cluster_pod_sets(
    cluster: Any,
    path: str,
    extra: int = 0,
    head_extra: Obj | None = None,
    autoscaling_refusal: str | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> list[PodSetTemplate]:
    """A RayClusterSpec's podSets: `head`, then each worker group by its lowercased name.
    `extra` podSets come after (a RayJob's submitter), within Kueue's limit of 18. An
    autoscaling cluster is refused with `autoscaling_refusal` (None: it may autoscale, as an
    elastic job's cluster may). The head counts what KubeRay adds to it (`head_template`)."""
    spec = as_map(cluster, path)
    if spec.get("enableInTreeAutoscaling") is True and autoscaling_refusal is not None:
        raise ManifestError(f"{path}.enableInTreeAutoscaling", autoscaling_refusal)
    head = as_map(spec.get("headGroupSpec"), f"{path}.headGroupSpec")
    as_map(head.get("template"), f"{path}.headGroupSpec.template")
    template = head_template(spec, annotations or {}, head_extra)
    out = [PodSetTemplate("head", 1, template, f"{path}.headGroupSpec.template")]
    groups = as_list(spec.get("workerGroupSpecs") or [], f"{path}.workerGroupSpecs")
    if len(groups) + 1 + extra > MAX_POD_SETS:
        raise ManifestError(
            f"{path}.workerGroupSpecs",
            f"Too many: {len(groups)} worker groups: a queued Ray job has at most "
            f"{MAX_POD_SETS - 1 - extra} (Kueue's limit of {MAX_POD_SETS} podSets"
            + (", one of them its submitter)" if extra else ")"),
        )
    for i, group in enumerate(groups):
        here = f"{path}.workerGroupSpecs[{i}]"
        group = as_map(group, here)
        name = group.get("groupName")
        if not isinstance(name, str) or not name:
            raise ManifestError(f"{here}.groupName", "is required")
        if name.lower() in ("head", SUBMITTER):
            raise ManifestError(f"{here}.groupName", f'"{name}" is reserved for the {name.lower()}')
        worker = as_map(group.get("template"), f"{here}.template")
        out.append(
            PodSetTemplate(name.lower(), _worker_count(group, here), worker, f"{here}.template")
        )
    return out


def _with_container(template: Mapping[str, Any], container: Obj) -> Obj:
    out = copy.deepcopy(dict(template))
    pod = out.setdefault("spec", {})
    pod["containers"] = [*(pod.get("containers") or []), container]
    return out


def _cluster_templates(
    cluster: Any, annotations: Mapping[str, Any], sidecar: Obj | None = None
) -> dict[str, Mapping[str, Any]]:
    """The podSets' templates as the Workload records them (the head's as Kueue counts it)."""
    spec = as_mapping(cluster)
    out: dict[str, Mapping[str, Any]] = {"head": head_template(spec, annotations, sidecar)}
    for group in as_sequence(spec.get("workerGroupSpecs")):
        group = as_mapping(group)
        name = group.get("groupName")
        if isinstance(name, str) and name:
            out[name.lower()] = as_mapping(group.get("template"))
    return out


def _cluster_patch(cluster: Any, wanted: Mapping[str, Obj]) -> Obj:
    """The merge patch of a RayClusterSpec's templates: the head's in place, the worker
    groups' list whole (a merge patch replaces a list)."""
    spec = as_mapping(cluster)
    patch: Obj = {}
    head = as_mapping(as_mapping(spec.get("headGroupSpec")).get("template"))
    if "head" in wanted:
        change = replace_maps(head, _own_head(head, wanted["head"]))
        if change:
            patch["headGroupSpec"] = {"template": change}
    groups = copy.deepcopy(list(as_sequence(spec.get("workerGroupSpecs"))))
    changed = False
    for group in groups:
        name = str(as_mapping(group).get("groupName", "")).lower()
        if name in wanted and isinstance(group, dict) and group.get("template") != wanted[name]:
            group["template"] = copy.deepcopy(wanted[name])
            changed = True
    if changed:
        patch["workerGroupSpecs"] = groups
    return patch


def _own_head(own: Mapping[str, Any], wanted: Obj) -> Obj:
    """The head's template to write: what Kueue counts beside it (the autoscaler, a sidecar
    submitter, the cleanup Job's requests) is KubeRay's to add, never written into it."""
    out = copy.deepcopy(wanted)
    pod = out.get("spec")
    own_pod = as_mapping(own.get("spec"))
    if isinstance(pod, dict) and "containers" in own_pod:
        pod["containers"] = copy.deepcopy(own_pod["containers"])
    return out


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_mapping(as_mapping(obj.get("metadata")).get("annotations"))


class RayClusterSpecJob(JobAdapter):
    """A kind that carries a RayClusterSpec at `cluster_path`."""

    group, version = RAY, "v1"
    cluster_path: ClassVar[tuple[str, ...]]
    own_controller = "ray.io/kuberay-operator"

    def _cluster(self, obj: Mapping[str, Any]) -> Any:
        value: Any = obj
        for part in self.cluster_path:
            value = as_mapping(value).get(part)
        return value

    def _nest(self, patch: Obj) -> Obj:
        if not patch:
            return {}
        for part in reversed(self.cluster_path):
            patch = {part: patch}
        return patch

    # An elastic job's worker counts follow its slices: Kueue's elastic-job annotation kept.
    kept_annotations: ClassVar[tuple[str, ...]] = (ELASTIC_JOB,)

    def autoscaling_refusal(self, obj: Mapping[str, Any]) -> str | None:
        """Why its cluster may not autoscale; None for an elastic job's (the webhook refuses
        one whose gate is off, with the same words)."""
        if self.framework in FRAMEWORKS and annotated(obj):
            return None
        return AUTOSCALING_REFUSALS[self.framework]

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        path = ".".join(self.cluster_path)
        refusal = self.autoscaling_refusal(obj)
        return cluster_pod_sets(
            self._cluster(obj), path, autoscaling_refusal=refusal, annotations=_annotations(obj)
        )

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return _cluster_templates(self._cluster(obj), _annotations(obj))

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        return self._nest(_cluster_patch(self._cluster(obj), wanted))

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        # The worker groups go out whole in a patch, so the cache keeps the cluster's spec.
        spec = as_mapping(obj.get("spec"))
        return {k: copy.deepcopy(spec[k]) for k in (self.cluster_path[1],) if k in spec}


class RayCluster(RayClusterSpecJob):
    """Holds its quota while it exists: it never finishes on its own."""

    framework = "ray.io/raycluster"
    kind, plural = "RayCluster", "rayclusters"
    cluster_path = ("spec",)

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        spec = as_mapping(obj.get("spec"))
        keys = ("headGroupSpec", "workerGroupSpecs")
        return {k: copy.deepcopy(spec[k]) for k in keys if k in spec}

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        return as_mapping(obj.get("status")).get("state") == "ready"

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        return None

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        return self.is_active(obj)

    def remote_spec_patch(self, local: Mapping[str, Any], remote: Mapping[str, Any]) -> Obj | None:
        """An elastic cluster scaled down here is scaled down on the worker, in place (Kueue's
        elastic replica sync: each worker group's replicas and numOfHosts). A scale-up waits:
        it needs its new slice admitted first (Kueue skips such a stale sync)."""
        if not annotated(local):
            return None
        mine = {
            as_mapping(g).get("groupName"): as_mapping(g)
            for g in as_sequence(as_mapping(local.get("spec")).get("workerGroupSpecs"))
        }
        theirs = [
            as_mapping(g)
            for g in as_sequence(as_mapping(remote.get("spec")).get("workerGroupSpecs"))
        ]
        if _workers(mine.values()) > _workers(theirs):
            return None
        groups, changed = [], False
        for group in theirs:
            want = mine.get(group.get("groupName"))
            synced = dict(group)
            if want is not None:
                for field in ("replicas", "numOfHosts"):
                    if want.get(field) != group.get(field):
                        synced[field] = want.get(field)
                        changed = True
            groups.append(synced)
        return {"spec": {"workerGroupSpecs": groups}} if changed else None


def _workers(groups: Any) -> int:
    """The Ray worker pods of these worker groups (replicas times hosts)."""
    return sum(
        as_count(g.get("replicas"), 1) * max(as_count(g.get("numOfHosts"), 1), 1) for g in groups
    )


class RayService(RayClusterSpecJob):
    """Suspended through its cluster's config; serves until deleted (never finishes)."""

    framework = "ray.io/rayservice"
    kind, plural = "RayService", "rayservices"
    cluster_path = ("spec", "rayClusterConfig")
    suspend_path = ("spec", "rayClusterConfig", "suspend")
    children = (RAY_CLUSTER,)
    # An in-place Serve update on the manager reaches the worker's RayService.
    worker_synced_fields = ("serveConfigV2",)

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        out = super().kept(obj)
        spec = as_mapping(obj.get("spec"))
        out.update({f: spec[f] for f in self.worker_synced_fields if f in spec})
        return out

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        return condition_true(obj, "Ready") is not None

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        return None

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        return self.is_active(obj)


class RayJob(RayClusterSpecJob):
    """Its cluster's podSets, then (K8sJobMode, KubeRay's default) its submitter."""

    framework = "ray.io/rayjob"
    kind, plural = "RayJob", "rayjobs"
    cluster_path = ("spec", "rayClusterSpec")
    children = (RAY_CLUSTER,)

    @staticmethod
    def _mode(obj: Mapping[str, Any]) -> str:
        return str(as_mapping(obj.get("spec")).get("submissionMode") or K8S_JOB_MODE)

    @staticmethod
    def _default_submitter(obj: Mapping[str, Any], cluster: Any) -> Obj:
        """KubeRay's submitter container: the head's image, its default resources."""
        head = as_mapping(as_mapping(as_mapping(cluster).get("headGroupSpec")).get("template"))
        containers = as_sequence(as_mapping(head.get("spec")).get("containers"))
        image = as_mapping(containers[0]).get("image") if containers else None
        container: Obj = {
            "name": SUBMITTER_CONTAINER,
            "resources": copy.deepcopy(SUBMITTER_RESOURCES),
        }
        if image:
            container["image"] = image
        return container

    def _submitter_template(self, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        spec = as_mapping(obj.get("spec"))
        own = spec.get("submitterPodTemplate")
        if isinstance(own, Mapping):
            return own
        container = self._default_submitter(obj, self._cluster(obj))
        return {"spec": {"restartPolicy": "Never", "containers": [container]}}

    def is_child(self, obj: Mapping[str, Any]) -> bool:
        """A RayJob that runs on an existing cluster (clusterSelector, no rayClusterSpec) is
        not queued itself: the cluster is. Kueue skips it too (and would still suspend it,
        which KubeRay refuses for this mode); Tower leaves it as it is."""
        spec = as_mapping(obj.get("spec"))
        if spec.get("clusterSelector") and spec.get("rayClusterSpec") is None:
            return True
        return super().is_child(obj)

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        spec = as_map(obj.get("spec"), "spec")
        if spec.get("clusterSelector"):
            raise ManifestError(
                "spec.clusterSelector", "a queued RayJob must not use an existing cluster"
            )
        if spec.get("rayClusterSpec") is None:
            raise ManifestError(
                "spec.rayClusterSpec", "is required for a queued RayJob without clusterSelector"
            )
        if spec.get("shutdownAfterJobFinishes") is not True:
            raise ManifestError(
                "spec.shutdownAfterJobFinishes",
                "must be true: a queued RayJob deletes its cluster when it finishes",
            )
        mode = self._mode(obj)
        cluster = spec["rayClusterSpec"]
        path, refusal = "spec.rayClusterSpec", self.autoscaling_refusal(obj)
        notes = _annotations(obj)
        if mode == K8S_JOB_MODE:
            pod_sets = cluster_pod_sets(
                cluster, path, extra=1, autoscaling_refusal=refusal, annotations=notes
            )
            template = self._submitter_template(obj)
            pod_sets.append(PodSetTemplate(SUBMITTER, 1, template, "spec.submitterPodTemplate"))
            return pod_sets
        return cluster_pod_sets(
            cluster, path, head_extra=self._sidecar(obj), autoscaling_refusal=refusal,
            annotations=notes,
        )  # fmt: skip

    def _sidecar(self, obj: Mapping[str, Any]) -> Obj | None:
        """SidecarMode's submitter, in the head pod: KubeRay's default container (it ignores
        submitterPodTemplate in that mode), so its requests count in the head's podSet."""
        if self._mode(obj) != SIDECAR_MODE:
            return None
        return {"name": SUBMITTER_CONTAINER, "resources": copy.deepcopy(SUBMITTER_RESOURCES)}

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        out = _cluster_templates(self._cluster(obj), _annotations(obj), self._sidecar(obj))
        if self._mode(obj) == K8S_JOB_MODE:
            out[SUBMITTER] = self._submitter_template(obj)
        return out

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        patch = self._nest(_cluster_patch(self._cluster(obj), wanted))
        if SUBMITTER in wanted and self._mode(obj) == K8S_JOB_MODE:
            # Without a template of its own, the default one is written (as Kueue does).
            own = as_mapping(as_mapping(obj.get("spec")).get("submitterPodTemplate"))
            change = replace_maps(own, wanted[SUBMITTER])
            if change:
                patch.setdefault("spec", {})["submitterPodTemplate"] = change
        return patch

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        spec = as_mapping(obj.get("spec"))
        keys = ("rayClusterSpec", "submitterPodTemplate", "submissionMode")
        return {k: copy.deepcopy(spec[k]) for k in keys if k in spec}

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        status = as_mapping(obj.get("status")).get("jobDeploymentStatus")
        return status not in (None, "", "Suspended", "New")

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        status = as_mapping(obj.get("status"))
        if status.get("jobDeploymentStatus") not in ("Complete", "Failed"):
            return None
        message = str(status.get("message") or "")
        if status.get("jobStatus") == "SUCCEEDED":
            return "Succeeded", message or "RayJob succeeded"
        return "Failed", message or f"RayJob {str(status.get('jobStatus') or 'failed').lower()}"

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        cluster = as_mapping(as_mapping(obj.get("status")).get("rayClusterStatus"))
        return cluster.get("state") == "ready"


ADAPTERS: tuple[JobAdapter, ...] = (RayJob(), RayCluster(), RayService())

# ----- an elastic RayJob or RayService follows its autoscaled cluster --------------------

# Kueue's annotations on such a job: its podSets' counts as its cluster runs them, and the
# cluster's generation (which names each slice, the job's own generation being unchanged).
REPLICA_SIZES = "kueue.x-k8s.io/raycluster-podset-replica-sizes"
CLUSTER_GENERATION = "kueue.x-k8s.io/raycluster-generation"
CLUSTER_FOLLOWERS = ("ray.io/rayjob", "ray.io/rayservice")


def follows_its_cluster(framework: str, obj: Mapping[str, Any]) -> bool:
    """An elastic RayJob or RayService with in-tree autoscaling: KubeRay's autoscaler scales
    the RayCluster it made, and its Workload slices follow that cluster's worker counts."""
    if framework not in CLUSTER_FOLLOWERS or not annotated(obj):
        return False
    spec = as_mapping(obj.get("spec"))
    cluster = spec.get("rayClusterSpec" if framework == "ray.io/rayjob" else "rayClusterConfig")
    return as_mapping(cluster).get("enableInTreeAutoscaling") is True


def its_cluster(framework: str, obj: Mapping[str, Any]) -> str:
    """The name of the RayCluster KubeRay made for a RayJob or a RayService ("" for none yet)."""
    status = as_mapping(obj.get("status"))
    if framework == "ray.io/rayservice":
        status = as_mapping(status.get("activeServiceStatus"))
    name = status.get("rayClusterName")
    return name if isinstance(name, str) else ""


def cluster_counts(
    counts: Sequence[tuple[str, int]], cluster: Mapping[str, Any], job_name: str
) -> list[tuple[str, int]]:
    """The job's podSet counts with each worker group's as its live cluster has it (Kueue's
    UpdatePodSets: a group without replicas keeps the job's count). A group the job does not
    declare is a ManifestError naming it."""
    out = dict(counts)
    spec = as_mapping(cluster.get("spec"))
    cluster_name = as_mapping(cluster.get("metadata")).get("name")
    for i, group in enumerate(as_sequence(spec.get("workerGroupSpecs"))):
        group = as_mapping(group)
        name = str(group.get("groupName") or "").lower()
        if name not in out:
            raise ManifestError(
                f"workerGroupSpecs[{i}].groupName",
                f"RayCluster {cluster_name} has worker group {group.get('groupName')!r}, which "
                f"{job_name} does not declare",
            )
        if group.get("replicas") is None:
            continue
        out[name] = _worker_count(group, f"workerGroupSpecs[{i}]")
    return [(name, out[name]) for name, _ in counts]


def replica_sizes(counts: Sequence[tuple[str, int]]) -> str:
    """Kueue's raycluster-podset-replica-sizes value: every podSet's name and count, as Go's
    encoding/json writes them."""
    return json.dumps([{"name": n, "count": c} for n, c in counts], separators=(",", ":"))


def name_extra(obj: Mapping[str, Any]) -> str:
    """What names an elastic Ray job's slice beside its own: its generation, then its
    cluster's (Kueue's GetWorkloadNameExtraPart)."""
    generation = as_mapping(obj.get("metadata")).get("generation")
    extra = str(generation if isinstance(generation, int) else 0)
    cluster = _annotations(obj).get(CLUSTER_GENERATION)
    return f"{extra}_{cluster}" if isinstance(cluster, str) and cluster else extra

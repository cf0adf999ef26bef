"""KubeRay's RayJob, RayCluster and RayService as Kueue v0.19.2 reads them.

The head, then one podSet per worker group, then (a RayJob in K8sJobMode) its submitter.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar

from extender.core.api.parse import ManifestError, as_list, as_map
from extender.core.jobframework.adapter import (
    JobAdapter,
    Obj,
    PodSetTemplate,
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
        "a queued RayService cannot autoscale: Kueue scales only a RayJob or a RayCluster, "
        "as an elastic job; set it false"
    ),
}


def cluster_pod_sets(
    cluster: Any,
    path: str,
    extra: int = 0,
    head_extra: Obj | None = None,
    autoscaling_refusal: str | None = None,
) -> list[PodSetTemplate]:
    """A RayClusterSpec's podSets: `head`, then each worker group by its lowercased name.
    `extra` podSets come after (a RayJob's submitter), within Kueue's limit of 18. An
    autoscaling cluster is refused with `autoscaling_refusal` (None: it may autoscale, as an
    elastic job's cluster may)."""
    spec = as_map(cluster, path)
    if spec.get("enableInTreeAutoscaling") is True and autoscaling_refusal is not None:
        raise ManifestError(f"{path}.enableInTreeAutoscaling", autoscaling_refusal)
    head = as_map(spec.get("headGroupSpec"), f"{path}.headGroupSpec")
    head_template = as_map(head.get("template"), f"{path}.headGroupSpec.template")
    if head_extra is not None:
        head_template = _with_container(head_template, head_extra)
    out = [PodSetTemplate("head", 1, head_template, f"{path}.headGroupSpec.template")]
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
        template = as_map(group.get("template"), f"{here}.template")
        out.append(
            PodSetTemplate(name.lower(), _worker_count(group, here), template, f"{here}.template")
        )
    return out


def _with_container(template: Mapping[str, Any], container: Obj) -> Obj:
    out = copy.deepcopy(dict(template))
    pod = out.setdefault("spec", {})
    pod["containers"] = [*(pod.get("containers") or []), container]
    return out


def _cluster_templates(cluster: Any) -> dict[str, Mapping[str, Any]]:
    spec = as_mapping(cluster)
    out = {"head": as_mapping(as_mapping(spec.get("headGroupSpec")).get("template"))}
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
        change = replace_maps(head, wanted["head"])
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
        return cluster_pod_sets(self._cluster(obj), path, autoscaling_refusal=refusal)

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return _cluster_templates(self._cluster(obj))

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
        if mode == K8S_JOB_MODE:
            pod_sets = cluster_pod_sets(cluster, path, extra=1, autoscaling_refusal=refusal)
            template = self._submitter_template(obj)
            pod_sets.append(PodSetTemplate(SUBMITTER, 1, template, "spec.submitterPodTemplate"))
            return pod_sets
        if mode == SIDECAR_MODE:  # the submitter runs in the head pod: its requests count there
            sidecar = self._default_submitter(obj, cluster)
            return cluster_pod_sets(cluster, path, head_extra=sidecar, autoscaling_refusal=refusal)
        return cluster_pod_sets(cluster, path, autoscaling_refusal=refusal)

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        out = _cluster_templates(self._cluster(obj))
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
        return status not in (None, "", "Suspended")

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

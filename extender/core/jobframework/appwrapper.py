"""CodeFlare's AppWrapper (workload.codeflare.dev/v1beta2) as Kueue v0.19.2 reads it.

Its podSets are its components' pod templates, flattened in order and named
`<appwrapper>-<i>`; each component declares them (`podSets[].path`) or, for the kinds the
appwrapper library knows, they are inferred from the wrapped object. Admission is written
into `spec.components[].podSetInfos`, which the AppWrapper's controller applies to the
wrapped objects' pods when it creates them; a stop clears them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from extender.core.api.parse import ManifestError, as_list, as_map, is_dns1123_label
from extender.core.jobframework.adapter import (
    JobAdapter,
    Obj,
    PodSetInfo,
    PodSetTemplate,
    as_mapping,
    as_sequence,
    condition_true,
    info_fields,
    merge,
)

MAX_POD_SETS = 18  # a Workload's podSets (the appwrapper's own webhook allows 8)
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")

# The appwrapper library's podSet annotations that name the labels numbering its pods, which
# Kueue's adapter turns into the podSet's ranks for topology-aware placement.
TAS_POD_INDEX_LABEL = "workload.codeflare.dev.appwrapper/tas-pod-index-label"
TAS_SUB_GROUP_INDEX_LABEL = "workload.codeflare.dev.appwrapper/tas-sub-group-index-label"
TAS_SUB_GROUP_COUNT = "workload.codeflare.dev.appwrapper/tas-sub-group-count"
_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
_JOBSET_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
_REPLICA_INDEX = "training.kubeflow.org/replica-index"


@dataclass(frozen=True, slots=True)
class DeclaredPodSet:
    """One podSet of a component: where its pod template is in the wrapped object, and how
    many pods (the appwrapper library's PodSet)."""

    path: str
    replicas: int
    annotations: Mapping[str, str] = field(default_factory=dict)

    def ranks(self) -> tuple[str | None, str | None, int | None]:
        """(pod index label, sub-group index label, sub-group count) its annotations name;
        a count that is not a number is left out, as Kueue's adapter ignores it."""
        count = self.annotations.get(TAS_SUB_GROUP_COUNT)
        return (
            self.annotations.get(TAS_POD_INDEX_LABEL),
            self.annotations.get(TAS_SUB_GROUP_INDEX_LABEL),
            int(count) if count is not None and re.fullmatch(r"[+-]?\d+", count) else None,
        )


def value_at(template: Any, path: str) -> Any:
    """The value a podSet path names: `template` is the wrapped object, then `.key` and
    `[n]` steps, as the appwrapper library walks them. ValueError says where it stops."""
    if not path.startswith("template"):
        raise ValueError("must start with 'template' (the wrapped object)")
    value, done, rest = template, "template", path[len("template") :]
    while rest:
        step = _STEP.match(rest)
        if step is None:
            raise ValueError(f"cannot read {rest!r} after {done!r}: steps are .key or [n]")
        key, index = step.group(1), step.group(2)
        if key is not None:
            if not isinstance(value, Mapping):
                raise ValueError(f"{done!r} is not an object")
            if key not in value:
                raise ValueError(f"{done!r} has no field {key!r}")
            value = value[key]
        else:
            if not isinstance(value, list):
                raise ValueError(f"{done!r} is not a list")
            if int(index) >= len(value):
                raise ValueError(f"{done!r} has no item [{index}]")
            value = value[int(index)]
        done, rest = done + step.group(0), rest[step.end() :]
    return value


def _replicas(value: Any, default: int = 1) -> int:
    whole = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if whole else default


def _job_pods(spec: Mapping[str, Any]) -> int:
    """A Job's pods as the library counts them: parallelism (1), capped by completions."""
    pods = _replicas(spec.get("parallelism"))
    completions = spec.get("completions")
    return min(pods, completions) if isinstance(completions, int) else pods


def inferred(wrapped: Mapping[str, Any]) -> list[DeclaredPodSet]:
    """The podSets the appwrapper library infers for a kind it knows ([] for another kind:
    that component must declare its podSets, or has no pods)."""
    kind = (str(wrapped.get("apiVersion") or ""), str(wrapped.get("kind") or ""))
    spec = as_mapping(wrapped.get("spec"))
    if kind == ("v1", "Pod"):
        return [DeclaredPodSet("template", 1)]
    if kind in (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")):
        return [DeclaredPodSet("template.spec.template", _replicas(spec.get("replicas")))]
    if kind == ("batch/v1", "Job"):
        ranks = {TAS_POD_INDEX_LABEL: _COMPLETION_INDEX}
        return [DeclaredPodSet("template.spec.template", _job_pods(spec), ranks)]
    if kind == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        out = []
        for i, rjob in enumerate(as_sequence(spec.get("replicatedJobs"))):
            rjob = as_mapping(rjob)
            if "template" not in rjob:
                continue
            job_spec = as_mapping(as_mapping(rjob.get("template")).get("spec"))
            jobs = _replicas(rjob.get("replicas"))
            ranks = {
                TAS_POD_INDEX_LABEL: _COMPLETION_INDEX,
                TAS_SUB_GROUP_INDEX_LABEL: _JOBSET_JOB_INDEX,
                TAS_SUB_GROUP_COUNT: str(jobs),
            }
            path = f"template.spec.replicatedJobs[{i}].template.spec.template"
            out.append(DeclaredPodSet(path, jobs * _job_pods(job_spec), ranks))
        return out
    if kind == ("kubeflow.org/v1", "PyTorchJob"):
        replicas = as_mapping(spec.get("pytorchReplicaSpecs"))
        return [
            DeclaredPodSet(
                f"template.spec.pytorchReplicaSpecs.{role}.template",
                _replicas(as_mapping(replicas[role]).get("replicas")),
                {TAS_POD_INDEX_LABEL: _REPLICA_INDEX},
            )
            for role in ("Master", "Worker")
            if role in replicas and "template" in as_mapping(replicas[role])
        ]
    if kind in (("ray.io/v1", "RayCluster"), ("ray.io/v1", "RayJob")):
        prefix = "template.spec" if kind[1] == "RayCluster" else "template.spec.rayClusterSpec"
        cluster = spec if kind[1] == "RayCluster" else as_mapping(spec.get("rayClusterSpec"))
        out = [DeclaredPodSet(f"{prefix}.headGroupSpec.template", 1)]
        for i, group in enumerate(as_sequence(cluster.get("workerGroupSpecs"))):
            group = as_mapping(group)
            if "template" in group:
                path = f"{prefix}.workerGroupSpecs[{i}].template"
                out.append(DeclaredPodSet(path, _replicas(group.get("replicas"))))
        return out
    return []


class AppWrapper(JobAdapter):
    framework = "workload.codeflare.dev/appwrapper"
    group, version, kind, plural = "workload.codeflare.dev", "v1beta2", "AppWrapper", "appwrappers"
    own_controller = "workload.codeflare.dev/appwrapper-controller"
    # What an AppWrapper's controller creates from its components, each queued by the
    # AppWrapper that holds their quota (Kueue: a job whose ancestor it manages).
    children = (
        ("batch", "Job"),
        ("jobset.x-k8s.io", "JobSet"),
        ("kubeflow.org", "PyTorchJob"),
        ("kubeflow.org", "TFJob"),
        ("kubeflow.org", "MPIJob"),
        ("ray.io", "RayCluster"),
        ("ray.io", "RayJob"),
    )

    def _declared(
        self, obj: Mapping[str, Any]
    ) -> list[tuple[str, Mapping[str, Any], list[DeclaredPodSet]]]:
        """(the component's field path, its wrapped object, its podSets) for each component;
        the cached status.componentStatus wins when it covers every component, as in Kueue."""
        spec = as_mapping(obj.get("spec"))
        components = as_sequence(spec.get("components"))
        cached = as_sequence(as_mapping(obj.get("status")).get("componentStatus"))
        out = []
        for i, component in enumerate(components):
            component = as_mapping(component)
            wrapped = as_mapping(component.get("template"))
            source = component.get("podSets")
            if len(cached) == len(components):
                source = as_mapping(cached[i]).get("podSets")
            declared = [
                DeclaredPodSet(
                    str(as_mapping(p).get("path") or ""),
                    _replicas(as_mapping(p).get("replicas")),
                    {
                        str(k): str(v)
                        for k, v in as_mapping(as_mapping(p).get("annotations")).items()
                    },
                )
                for p in as_sequence(source)
            ]
            out.append((f"spec.components[{i}]", wrapped, declared or inferred(wrapped)))
        return out

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        spec = as_map(obj.get("spec"), "spec")
        components = as_list(spec.get("components"), "spec.components")
        for i, component in enumerate(components):
            component = as_map(component, f"spec.components[{i}]")
            as_map(component.get("template"), f"spec.components[{i}].template", required=True)
        name = str(as_mapping(obj.get("metadata")).get("name") or "")
        out: list[PodSetTemplate] = []
        for path, wrapped, declared in self._declared(obj):
            for j, pod_set in enumerate(declared):
                field = f"{path}.podSets[{j}].path"
                try:
                    template = value_at(wrapped, pod_set.path)
                except ValueError as err:
                    raise ManifestError(field, f"{pod_set.path!r} {err}") from None
                if not isinstance(template, Mapping) or not isinstance(
                    template.get("spec"), Mapping
                ):
                    raise ManifestError(field, f"{pod_set.path!r} is not a pod template (no spec)")
                pod_set_name = f"{name}-{len(out)}".lower()
                where = f"{path}.template{pod_set.path[len('template') :]}"
                index, sub_group, sub_groups = pod_set.ranks()
                out.append(
                    PodSetTemplate(
                        pod_set_name,
                        pod_set.replicas,
                        template,
                        where,
                        pod_index_label=index,
                        sub_group_index_label=sub_group,
                        sub_group_count=sub_groups,
                    )
                )
        if not out:
            raise ManifestError(
                "spec.components",
                "has no pod templates: declare podSets (path, replicas) for a kind whose pods "
                "the appwrapper library does not infer",
            )
        if len(out) > MAX_POD_SETS:
            raise ManifestError(
                "spec.components",
                f"has {len(out)} podSets; a Workload holds at most {MAX_POD_SETS}",
            )
        if not is_dns1123_label(out[-1].name):
            raise ManifestError(
                "metadata.name",
                f"names its podSets {out[0].name}…{out[-1].name}, which must be DNS labels: "
                "no '.', and at most 60 characters",
            )
        return out

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        name = str(as_mapping(obj.get("metadata")).get("name") or "")
        out: dict[str, Mapping[str, Any]] = {}
        for _, wrapped, declared in self._declared(obj):
            for pod_set in declared:
                try:
                    template = value_at(wrapped, pod_set.path)
                except ValueError:
                    template = {}
                out[f"{name}-{len(out)}".lower()] = as_mapping(template)
        return out

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        """Its controller holds resources while QuotaReserved is True (Kueue reads only that)."""
        return condition_true(obj, "QuotaReserved") is not None

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        phase = as_mapping(obj.get("status")).get("phase")
        if phase == "Succeeded":
            return "Succeeded", "AppWrapper finished successfully"
        if phase == "Failed" and condition_true(obj, "ResourcesDeployed") is None:
            # A failed AppWrapper counts as finished once its resources are deleted.
            return "Failed", "AppWrapper failed"
        return None

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        return condition_true(obj, "PodsReady") is not None

    def start_patch(self, obj: Mapping[str, Any], infos: Mapping[str, PodSetInfo]) -> Obj:
        """Unsuspended, with one podSetInfo per podSet in each component (the AppWrapper's
        controller puts them on the pods); the list of components is written whole."""
        components = copy.deepcopy(list(as_sequence(as_mapping(obj.get("spec")).get("components"))))
        ordered = iter(infos.get(name) for name in self.templates(obj))
        for component, (_, _, declared) in zip(components, self._declared(obj), strict=False):
            entries = []
            for _ in declared:
                info = next(ordered, None)
                entries.append(info_fields(info) if info is not None else {})
            component["podSetInfos"] = entries
        return merge(self.suspend_patch(False), {"spec": {"components": components}})

    def restore_patch(
        self,
        obj: Mapping[str, Any],
        originals: Mapping[str, Mapping[str, Any]],
        counts: Mapping[str, int],
    ) -> Obj:
        """Every component's podSetInfos cleared (the pod templates were never changed)."""
        components = copy.deepcopy(list(as_sequence(as_mapping(obj.get("spec")).get("components"))))
        for component in components:
            if isinstance(component, dict):
                component.pop("podSetInfos", None)
        return {"spec": {"components": components}}

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        return {}  # the wrapped templates are the AppWrapper controller's to change

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        return {"components": as_mapping(obj.get("spec")).get("components") or []}


ADAPTERS: tuple[JobAdapter, ...] = (AppWrapper(),)

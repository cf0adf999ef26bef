"""Spark operator's SparkApplication (sparkoperator.k8s.io/v1beta2) as Kueue v0.19.2 reads it.

Two podSets, `driver` (1) and `executor` (`spec.executor.instances`, else 0). A
SparkApplication holds no pod templates: its pods are described by the resource fields of
`spec.driver` and `spec.executor` (coreRequest, memory in Java's units, gpu, sidecars,
volumes, ...), which the Spark operator turns into pods. Kueue builds each podSet's template
from those fields as the operator's pod defaulter would (only what counts for quota and
placement), and an admission is written where the operator reads it: each role's labels,
annotations, nodeSelector, tolerations and `template.spec.schedulingGates`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from extender.core.api.models import QUEUE_NAME_LABEL
from extender.core.api.parse import ManifestError, as_map
from extender.core.api.quantity import QuantityError, parse_quantity
from extender.core.jobframework.adapter import (
    JobAdapter,
    Obj,
    PodSetInfo,
    PodSetTemplate,
    as_mapping,
    as_sequence,
    merge,
    replace_maps,
)

DRIVER, EXECUTOR = "driver", "executor"
# The container each role's resources go on (the operator's names), when the role names none.
DRIVER_CONTAINER = "spark-kubernetes-driver"
EXECUTOR_CONTAINER = "executor"
DEFAULT_EXECUTOR_CONTAINER = "spark-kubernetes-executor"
LOCAL_DIR_PREFIX = "spark-local-dir-"  # scratch volumes the operator adds itself

# status.applicationState.state values the adapter reads.
RUNNING, COMPLETED = "RUNNING", "COMPLETED"
ENDED = {"COMPLETED", "FAILED", "SUBMISSION_FAILED"}
READY_EXECUTOR = {"RUNNING", "COMPLETED"}

# Java's memory units, as the Spark operator converts them (its unitMap).
_JAVA_UNITS = {
    "k": "Ki",
    "kb": "Ki",
    "m": "Mi",
    "mb": "Mi",
    "g": "Gi",
    "gb": "Gi",
    "t": "Ti",
    "tb": "Ti",
    "p": "Pi",
    "pb": "Pi",
}
# The role fields a start sets and a stop puts back.
_MAP_FIELDS = ("annotations", "labels", "nodeSelector")


def java_memory(value: str) -> str:
    """A Java memory string ("512m", "2g") as a Kubernetes quantity ("512Mi", "2Gi")."""
    lowered = value.lower()
    # Longest unit first: "512mb" is megabytes, not "512m" + "b".
    for unit in sorted(_JAVA_UNITS, key=len, reverse=True):
        if lowered.endswith(unit):
            return value[: -len(unit)] + _JAVA_UNITS[unit]
    return value


def _quantity(value: Any, path: str, memory: bool = False) -> str:
    """A role's resource field checked as a quantity (memory in Java's units)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ManifestError(path, f"must be a quantity string, got {value!r}")
    text = java_memory(str(value)) if memory else str(value)
    try:
        parse_quantity(text)
    except QuantityError:
        raise ManifestError(path, f"{value!r} is not a quantity") from None
    return text


def _container_index(containers: Sequence[Mapping[str, Any]], name: str) -> int:
    """The role's own container: the one with the operator's name, else the first."""
    return next((i for i, c in enumerate(containers) if c.get("name") == name), 0)


def role_template(app: Mapping[str, Any], role: str) -> Obj:
    """A role's pod template as Kueue builds it from the SparkApplication (the resource
    fields the operator's pod defaulter sets; the role's `template` lends only its
    metadata); ManifestError names a field that is wrong."""
    spec = as_map(app.get("spec"), "spec")
    path = f"spec.{role}"
    fields = as_map(spec.get(role), path)
    main = DRIVER_CONTAINER if role == DRIVER else DEFAULT_EXECUTOR_CONTAINER
    containers: list[Obj] = [{"name": main}]
    pod: Obj = {"containers": containers}
    own = _container_index(containers, DRIVER_CONTAINER if role == DRIVER else EXECUTOR_CONTAINER)

    volumes = {v.get("name"): v for v in as_sequence(spec.get("volumes")) if isinstance(v, Mapping)}
    added: list[Obj] = []
    for mount in as_sequence(fields.get("volumeMounts")):
        name = as_mapping(mount).get("name")
        if not isinstance(name, str) or name.startswith(LOCAL_DIR_PREFIX) or name not in volumes:
            continue
        if all(v.get("name") != name for v in added):
            added.append(copy.deepcopy(dict(volumes[name])))
        containers[own].setdefault("volumeMounts", []).append(copy.deepcopy(dict(mount)))
    if added:
        pod["volumes"] = added
    inits = [copy.deepcopy(dict(c)) for c in as_sequence(fields.get("initContainers"))]
    if inits:
        pod["initContainers"] = inits
    for sidecar in as_sequence(fields.get("sidecars")):
        sidecar = as_mapping(sidecar)
        same = (sidecar.get("name"), sidecar.get("image"))
        if all((c.get("name"), c.get("image")) != same for c in containers):
            containers.append(copy.deepcopy(dict(sidecar)))
    if fields.get("priorityClassName"):
        pod["priorityClassName"] = fields["priorityClassName"]
    if as_mapping(fields.get("nodeSelector")):
        pod["nodeSelector"] = dict(fields["nodeSelector"])
    if fields.get("affinity") is not None:
        pod["affinity"] = copy.deepcopy(fields["affinity"])
    if as_sequence(fields.get("tolerations")):
        pod["tolerations"] = [copy.deepcopy(t) for t in fields["tolerations"]]

    requests: Obj = {}
    limits: Obj = {}
    if fields.get("coreRequest") is not None:
        requests["cpu"] = _quantity(fields["coreRequest"], f"{path}.coreRequest")
    if fields.get("coreLimit") is not None:
        limits["cpu"] = _quantity(fields["coreLimit"], f"{path}.coreLimit")
    if fields.get("memory") is not None:
        requests["memory"] = _quantity(fields["memory"], f"{path}.memory", memory=True)
    if fields.get("memoryLimit") is not None:
        limits["memory"] = _quantity(fields["memoryLimit"], f"{path}.memoryLimit", memory=True)
    gpu = as_mapping(fields.get("gpu"))
    quantity = gpu.get("quantity")
    if gpu.get("name") and _count(quantity) > 0:
        limits[str(gpu["name"])] = str(quantity)
    resources = {k: v for k, v in (("requests", requests), ("limits", limits)) if v}
    if resources:
        containers[own]["resources"] = resources

    # The role's labels and annotations over its template's metadata (the operator's
    # addObjectMeta): the operator's own role labels are not part of the podSet.
    labels = {k: str(v) for k, v in as_mapping(fields.get("labels")).items()}
    annotations = {k: str(v) for k, v in as_mapping(fields.get("annotations")).items()}
    template = fields.get("template")
    if isinstance(template, Mapping):
        meta = copy.deepcopy(dict(as_mapping(template.get("metadata"))))
        meta["labels"] = {**as_mapping(meta.get("labels")), **labels}
        meta["annotations"] = {**as_mapping(meta.get("annotations")), **annotations}
        meta = {k: v for k, v in meta.items() if v not in ({}, None)}
    else:
        meta = {k: v for k, v in (("labels", labels), ("annotations", annotations)) if v}
    return {"metadata": meta, "spec": pod} if meta else {"spec": pod}


def check_queued(app: Mapping[str, Any]) -> None:
    """Kueue's refusals of a queued SparkApplication: only cluster mode, and no dynamic
    allocation (it is for elastic jobs, which Tower does not run as Spark)."""
    spec = as_mapping(app.get("spec"))
    mode = spec.get("mode")
    if mode != "cluster":
        raise ManifestError(
            "spec.mode", f"{mode!r}: only Cluster mode is supported for a kueue managed job"
        )
    if as_mapping(spec.get("dynamicAllocation")).get("enabled") is True:
        raise ManifestError(
            "spec.dynamicAllocation.enabled",
            "a kueue managed job can use dynamicAllocation only when the "
            "ElasticJobsViaWorkloadSlices feature gate is on and the job is an elastic job",
        )


def _role_patch(role: str, current: Mapping[str, Any], wanted: Mapping[str, Any]) -> Obj:
    """The merge patch that gives one role these labels, annotations, nodeSelector,
    tolerations and scheduling gates (None: none)."""
    out: Obj = {}
    for name in _MAP_FIELDS:
        have, want = as_mapping(current.get(name)), wanted.get(name) or {}
        if want and have:
            change = replace_maps(have, want)
            if change:
                out[name] = change
        elif want:
            out[name] = dict(want)
        elif current.get(name) is not None:
            out[name] = None
    want_tolerations = list(wanted.get("tolerations") or [])
    if want_tolerations != list(as_sequence(current.get("tolerations"))):
        out["tolerations"] = want_tolerations or None
    if "schedulerName" in wanted and wanted["schedulerName"] != current.get("schedulerName"):
        out["schedulerName"] = wanted["schedulerName"]
    template = current.get("template")
    gates = list(wanted.get("schedulingGates") or [])
    have_gates = list(
        as_sequence(as_mapping(as_mapping(template).get("spec")).get("schedulingGates"))
    )
    if gates != have_gates:
        if isinstance(template, Mapping):
            out["template"] = {"spec": {"schedulingGates": gates or None}}
        else:
            # No template yet: Kueue starts from an empty one with the role's container.
            main = DRIVER_CONTAINER if role == DRIVER else DEFAULT_EXECUTOR_CONTAINER
            out["template"] = {"spec": {"containers": [{"name": main}], "schedulingGates": gates}}
    return out


def _merged(base: Sequence[Any], extra: Sequence[Any]) -> list[Any]:
    out = [copy.deepcopy(x) for x in base]
    out.extend(copy.deepcopy(dict(x)) for x in extra if x not in out)
    return out


class SparkApplicationAdapter(JobAdapter):
    framework = "sparkoperator.k8s.io/sparkapplication"
    group, version, kind = "sparkoperator.k8s.io", "v1beta2", "SparkApplication"
    plural = "sparkapplications"

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        check_queued(obj)
        spec = as_map(obj.get("spec"), "spec")
        executor = as_map(spec.get(EXECUTOR), "spec.executor")
        instances = executor.get("instances", 0)
        if isinstance(instances, bool) or not isinstance(instances, int) or instances < 0:
            raise ManifestError(
                "spec.executor.instances", f"must be a non-negative integer, got {instances!r}"
            )
        return [
            PodSetTemplate(DRIVER, 1, role_template(obj, DRIVER), "spec.driver"),
            PodSetTemplate(EXECUTOR, instances, role_template(obj, EXECUTOR), "spec.executor"),
        ]

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        out: dict[str, Mapping[str, Any]] = {}
        for role in (DRIVER, EXECUTOR):
            try:
                out[role] = role_template(obj, role)
            except ManifestError:
                out[role] = {}
        return out

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        return _state(obj) == RUNNING

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        """COMPLETED succeeded; FAILED and SUBMISSION_FAILED failed; the operator's
        errorMessage is the Workload's."""
        state = _state(obj)
        if state not in ENDED:
            return None
        app_state = as_mapping(as_mapping(obj.get("status")).get("applicationState"))
        message = str(app_state.get("errorMessage") or "")
        if state == COMPLETED:
            return "Succeeded", message or "SparkApplication finished successfully"
        return "Failed", message or f"SparkApplication {state}"

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        """The driver running and every executor asked for running or completed (the
        application is RUNNING as soon as its driver is)."""
        if _state(obj) != RUNNING:
            return False
        wanted = as_mapping(as_mapping(obj.get("spec")).get(EXECUTOR)).get("instances")
        if not isinstance(wanted, int) or wanted <= 0:
            return True
        executors = as_mapping(as_mapping(obj.get("status")).get("executorState"))
        return sum(1 for s in executors.values() if s in READY_EXECUTOR) >= wanted

    def check_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        labels = as_mapping(as_mapping(new.get("metadata")).get("labels"))
        if labels.get(QUEUE_NAME_LABEL):
            check_queued(new)

    def start_patch(self, obj: Mapping[str, Any], infos: Mapping[str, PodSetInfo]) -> Obj:
        """Unsuspended, each role given its podSet's placement. A global spec.nodeSelector
        is moved onto both roles (the operator refuses it beside a role's own)."""
        spec = as_mapping(obj.get("spec"))
        global_selector = spec.get("nodeSelector")
        roles: Obj = {}
        for role in (DRIVER, EXECUTOR):
            info = infos.get(role)
            if info is None:
                continue
            current = as_mapping(spec.get(role))
            selector = (
                global_selector if global_selector is not None else current.get("nodeSelector")
            )
            gates = as_mapping(as_mapping(current.get("template")).get("spec")).get(
                "schedulingGates"
            )
            wanted: Obj = {
                "annotations": {**as_mapping(current.get("annotations")), **info.annotations},
                "labels": {**as_mapping(current.get("labels")), **info.labels},
                "nodeSelector": {**as_mapping(selector), **info.node_selector},
                "tolerations": _merged(as_sequence(current.get("tolerations")), info.tolerations),
                "schedulingGates": _merged(as_sequence(gates), info.scheduling_gates),
            }
            if info.scheduler_name is not None:
                wanted["schedulerName"] = info.scheduler_name
            change = _role_patch(role, current, wanted)
            if change:
                roles[role] = change
        if global_selector is not None:
            roles["nodeSelector"] = None
        return merge(self.suspend_patch(False), {"spec": roles} if roles else {})

    def restore_patch(
        self,
        obj: Mapping[str, Any],
        originals: Mapping[str, Mapping[str, Any]],
        counts: Mapping[str, int],
    ) -> Obj:
        """Each role's placement put back from the podSet the Workload recorded, and the
        executors' count; a global nodeSelector left by someone is dropped."""
        if set(originals) != {DRIVER, EXECUTOR}:
            return {}
        spec = as_mapping(obj.get("spec"))
        roles: Obj = {}
        for role in (DRIVER, EXECUTOR):
            original = as_mapping(originals[role])
            meta, pod = as_mapping(original.get("metadata")), as_mapping(original.get("spec"))
            wanted: Obj = {
                "annotations": dict(as_mapping(meta.get("annotations"))),
                "labels": dict(as_mapping(meta.get("labels"))),
                "nodeSelector": dict(as_mapping(pod.get("nodeSelector"))),
                "tolerations": list(as_sequence(pod.get("tolerations"))),
                "schedulingGates": list(as_sequence(pod.get("schedulingGates"))),
            }
            current = as_mapping(spec.get(role))
            if current.get("schedulerName") is not None or pod.get("schedulerName"):
                wanted["schedulerName"] = pod.get("schedulerName")
            change = _role_patch(role, current, wanted)
            count = counts.get(role) if role == EXECUTOR else None
            if count is not None and current.get("instances") != count:
                change["instances"] = count
            if change:
                roles[role] = change
        if spec.get("nodeSelector") is not None:
            roles["nodeSelector"] = None
        return {"spec": roles} if roles else {}

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        spec = as_mapping(obj.get("spec"))
        out: Obj = {}
        if spec.get("nodeSelector") is not None:
            out["nodeSelector"] = spec["nodeSelector"]
        for role in (DRIVER, EXECUTOR):
            fields = as_mapping(spec.get(role))
            keep = ("annotations", "labels", "nodeSelector", "tolerations", "schedulerName")
            role_kept: Obj = {k: fields[k] for k in keep if fields.get(k) is not None}
            if role == EXECUTOR and "instances" in fields:
                role_kept["instances"] = fields["instances"]
            template = fields.get("template")
            if isinstance(template, Mapping):
                gates = as_mapping(template.get("spec")).get("schedulingGates")
                kept_template: Obj = {}
                if template.get("metadata"):
                    kept_template["metadata"] = template["metadata"]
                kept_template["spec"] = {"schedulingGates": gates} if gates else {}
                role_kept["template"] = kept_template
            out[role] = role_kept
        return out


def _count(value: Any) -> int:
    """A whole number field, or 0 for anything else (a GPU's quantity)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _state(obj: Mapping[str, Any]) -> str:
    status = as_mapping(obj.get("status"))
    return str(as_mapping(status.get("applicationState")).get("state") or "")


ADAPTERS: tuple[JobAdapter, ...] = (SparkApplicationAdapter(),)

"""Jobs and JobSets as Kueue sees them: their Workload, its name, and the queueing mutation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from extender.core.api.models import (
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    PodSet,
    PriorityClass,
    Workload,
    WorkloadPriorityClass,
)
from extender.core.api.parse import ManifestError, as_list, as_map, node_selector_terms, tolerations
from extender.core.api.quantity import QuantityError, to_amount
from extender.core.api.topology import TopologyRequest
from extender.core.api.unacted import blocking
from extender.core.jobframework import exec_limit, registry
from extender.core.jobframework.adapter import JobAdapter, PodSetTemplate, workload_name
from extender.core.jobframework.topology import template_topology
from extender.core.jobframework.webhooks import queue_patch

JOB_GROUP, JOB_KIND = "batch", "Job"
JOBSET_GROUP, JOBSET_KIND = "jobset.x-k8s.io", "JobSet"
WORKLOAD_PRIORITY_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_SOURCE = "scheduling.k8s.io/priorityclass"

Obj = Mapping[str, Any]


def _container_requests(container: Any, path: str) -> dict[str, int]:
    container = as_map(container, path)
    resources = as_map(container.get("resources"), f"{path}.resources")
    limits = as_map(resources.get("limits"), f"{path}.resources.limits")
    requests = as_map(resources.get("requests"), f"{path}.resources.requests")
    out: dict[str, int] = {}
    # A request left out defaults to its limit, as the API server defaults a pod.
    for field_name, values in (("limits", limits), ("requests", requests)):
        for resource, value in values.items():
            out[str(resource)] = _amount(resource, value, f"{path}.resources.{field_name}")
    return out


def _amount(resource: object, value: Any, path: str) -> int:
    """A resource quantity of a pod: exact, and never below 0."""
    try:
        amount = to_amount(str(resource), value)
    except QuantityError:
        raise ManifestError(
            f"{path}.{resource}", f"{value!r} is not a Kubernetes quantity"
        ) from None
    if amount < 0:
        # The API server refuses these in a Pod; counted, they would hand out quota.
        raise ManifestError(
            f"{path}.{resource}", f"must be greater than or equal to 0, got {value!r}"
        )
    return amount


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for resource, amount in more.items():
        into[resource] = into.get(resource, 0) + amount


def pod_requests(pod_spec: Obj, path: str = "spec.template.spec") -> dict[str, int]:
    """Requests of one pod as the scheduler counts them.

    Containers add up; sidecars (init containers with restartPolicy Always) run beside
    them; each regular init container runs alone next to the sidecars started before it.
    The pod needs the larger of the two, plus its overhead.
    """
    total: dict[str, int] = {}
    for i, container in enumerate(as_list(pod_spec.get("containers"), f"{path}.containers")):
        _add(total, _container_requests(container, f"{path}.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    inits = as_list(pod_spec.get("initContainers"), f"{path}.initContainers")
    for i, container in enumerate(inits):
        own = _container_requests(container, f"{path}.initContainers[{i}]")
        if as_map(container, f"{path}.initContainers[{i}]").get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            _add(running, sidecars)
        for resource, amount in running.items():
            init_peak[resource] = max(init_peak.get(resource, 0), amount)
    for resource, amount in init_peak.items():
        total[resource] = max(total.get(resource, 0), amount)
    for resource, value in as_map(pod_spec.get("overhead"), f"{path}.overhead").items():
        _add(total, {str(resource): _amount(resource, value, f"{path}.overhead")})
    return total


def pod_set(
    name: str,
    template: Obj,
    count: int,
    path: str,
    min_count: int | None = None,
    topology: TopologyRequest | None = None,
) -> PodSet:
    """A PodSet from a pod template (at `path` in its job; "" for a pod itself)."""
    at = f"{path}.spec" if path else "spec"
    spec = as_map(as_map(template, path or "pod").get("spec"), at)
    affinity_path = f"{at}.affinity"
    affinity = as_map(spec.get("affinity"), affinity_path)
    node_affinity = as_map(affinity.get("nodeAffinity"), f"{affinity_path}.nodeAffinity")
    required = as_map(
        node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"),
        f"{affinity_path}.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    )
    selector = as_map(spec.get("nodeSelector"), f"{at}.nodeSelector")
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{path}", f"pod set name must be a non-empty string, got {name!r}")
    return PodSet(
        name=name,
        count=count,
        requests=pod_requests(spec, at),
        node_selector={str(k): str(v) for k, v in selector.items()},
        required_terms=node_selector_terms(
            required.get("nodeSelectorTerms"),
            f"{at}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ".nodeSelectorTerms",
        ),
        tolerations=tolerations(spec.get("tolerations"), f"{at}.tolerations"),
        min_count=min_count,
        topology=topology,
    )


def resolve_priority(
    labels: Mapping[str, str],
    pod_priority_class: str | None,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass],
    priority_classes: Mapping[str, PriorityClass],
) -> tuple[int, str | None, str]:
    """(priority, class name, source) in Kueue's order of precedence."""
    wpc_name = labels.get(PRIORITY_CLASS_LABEL)
    if wpc_name:
        wpc = workload_priority_classes.get(wpc_name)
        if wpc is None:
            raise ManifestError(
                f'metadata.labels["{PRIORITY_CLASS_LABEL}"]',
                f"WorkloadPriorityClass {wpc_name!r} does not exist",
            )
        return wpc.value, wpc.name, WORKLOAD_PRIORITY_SOURCE
    if pod_priority_class:
        pc = priority_classes.get(pod_priority_class)
        if pc is None:
            raise ManifestError(
                "spec.template.spec.priorityClassName",
                f"PriorityClass {pod_priority_class!r} does not exist",
            )
        return pc.value, pc.name, POD_PRIORITY_SOURCE
    defaults = [pc for pc in priority_classes.values() if pc.global_default]
    if defaults:
        lowest = min(defaults, key=lambda pc: pc.value)
        return lowest.value, lowest.name, POD_PRIORITY_SOURCE
    return 0, None, ""


def queue_name_of(obj: Obj) -> str | None:
    """The LocalQueue a Job or JobSet asks for (its queue-name label)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    value = labels.get(QUEUE_NAME_LABEL)
    return str(value) if value else None


def workload_for(
    obj: Obj,
    *,
    uid: str,
    creation_time: float,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass] | None = None,
    priority_classes: Mapping[str, PriorityClass] | None = None,
    adapter: JobAdapter | None = None,
) -> Workload:
    """The Workload Kueue would create for a job of a managed kind (its adapter reads the
    podSets; by default the adapter of the object's apiVersion and kind)."""
    kind = obj.get("kind")
    adapter = adapter or registry.for_object(obj)
    if adapter is None:
        kinds = ", ".join(sorted(a.kind for a in registry.ADAPTERS.values()))
        raise ManifestError("kind", f"must be a kind Tower manages ({kinds}), got {kind!r}")
    meta = as_map(obj.get("metadata"), "metadata")
    name = meta.get("name")
    if not name or not isinstance(name, str):
        raise ManifestError("metadata.name", "is required (or metadata.generateName)")
    namespace = meta.get("namespace") or "default"
    labels = as_map(meta.get("labels"), "metadata.labels")
    queue = queue_name_of(obj)
    if queue is None:
        raise ManifestError(f'metadata.labels["{QUEUE_NAME_LABEL}"]', "is required")
    as_map(obj.get("spec"), "spec")
    pod_priority = adapter.pod_priority_class(obj)
    if pod_priority is not None and not isinstance(pod_priority, str):
        raise ManifestError("spec.template.spec.priorityClassName", "must be a string")
    workload = group_workload(
        namespace=str(namespace),
        name=workload_name(str(kind), adapter.group, name, uid),
        uid=uid,
        queue=queue,
        labels=labels,
        templates=adapter.pod_sets(obj),
        creation_time=creation_time,
        owner_kind=str(kind),
        owner_name=name,
        workload_priority_classes=workload_priority_classes,
        priority_classes=priority_classes,
        pod_priority=pod_priority,
    )
    return replace(workload, unacted=blocking(str(kind), obj))


def group_workload(
    *,
    namespace: str,
    name: str,
    uid: str,
    queue: str,
    labels: Mapping[str, Any],
    templates: list[PodSetTemplate],
    creation_time: float,
    owner_kind: str,
    owner_name: str,
    workload_priority_classes: Mapping[str, WorkloadPriorityClass] | None = None,
    priority_classes: Mapping[str, PriorityClass] | None = None,
    pod_priority: str | None = None,
) -> Workload:
    """A Workload of these podSets (a job's, or a group of pods': a pod group, a
    StatefulSet), its priority from the `kueue.x-k8s.io/priority-class` label, else
    `pod_priority`, else the podSets' first priorityClassName."""
    pod_sets = tuple(
        pod_set(t.name, t.template, t.count, t.path, t.min_count, template_topology(t))
        for t in templates
    )
    if pod_priority is None:
        pod_priority = next(
            (
                value
                for t in templates
                if isinstance(
                    value := as_map(t.template.get("spec"), "spec").get("priorityClassName"), str
                )
            ),
            None,
        )
    priority, class_name, source = resolve_priority(
        labels, pod_priority, workload_priority_classes or {}, priority_classes or {}
    )
    return Workload(
        namespace=namespace,
        name=name,
        uid=uid,
        queue_name=queue,
        pod_sets=pod_sets,
        priority=priority,
        priority_class_name=class_name,
        priority_class_source=source,
        creation_time=creation_time,
        owner_kind=owner_kind,
        owner_name=owner_name,
        max_execution_seconds=exec_limit.limit_of(labels),
    )


def queue_mutation(
    obj: Obj, default_queue: str | None = None, adapter: JobAdapter | None = None
) -> list[dict[str, Any]]:
    """The JSON patch that queues a job: suspend it and record queue metadata, at its kind's
    suspend field (a bare manifest reads as a batch/v1 Job). [] for an object not queued."""
    adapter = adapter or registry.for_object(obj) or registry.ADAPTERS["batch/job"]
    return queue_patch(obj, adapter, default_queue)

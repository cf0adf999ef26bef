"""Kubernetes objects ⇄ the core's models: Workloads from Jobs, admission and eviction writes.

Pure functions over dicts (no I/O): what to write is decided here, when to write it is the
controller's business.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from extender.core.admission import exec_time
from extender.core.admission.checks import CheckState, with_updates
from extender.core.api.admission_gates import ADMISSION_GATED_BY, gated_by
from extender.core.api.labels import Toleration
from extender.core.api.models import (
    PRIORITY_CLASS_LABEL,
    QUEUE_NAME_LABEL,
    WORKLOAD_ANNOTATION,
    Admission,
    ResourceFlavor,
    Workload,
)
from extender.core.api.parse import ManifestError
from extender.core.api.quantity import format_amount
from extender.core.api.topology import encode as encode_assignment
from extender.core.jobframework import registry
from extender.core.jobframework.adapter import JobAdapter, PodSetInfo, merge
from extender.core.jobframework.copied_labels import copied
from extender.core.jobframework.groups import IS_GROUP_WORKLOAD, OWNER_GVK
from extender.core.jobframework.topology import (
    TOPOLOGY_ANNOTATIONS,
    TOPOLOGY_GATE,
    UNCONSTRAINED_ANNOTATION,
    request_json,
)

# The core reads a Workload's status the same way: one reading, re-exported for the controller.
from extender.core.jobframework.workloads import admission_of as admission_of
from extender.core.jobframework.workloads import creation_seconds
from extender.core.jobframework.workloads import is_true as is_true
from extender.kube.api.resources import KUEUE_GROUP, WORKLOADS

Obj = dict[str, Any]

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PODSET_LABEL = "kueue.x-k8s.io/podset"
LOCAL_QUEUE_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_LABEL = "kueue.x-k8s.io/cluster-queue-name"
CLUSTER_QUEUE_ANNOTATION = "tower.dev/cluster-queue"

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EXECUTED = "accumulatedPastExecutionTimeSeconds"  # a Workload's status: seconds admitted before
EVICTED = "Evicted"
PREEMPTED = "Preempted"
FINISHED = "Finished"
REQUEUED = "Requeued"
PODS_READY = "PodsReady"
KUEUE_FINALIZER = "kueue.x-k8s.io/resource-in-use"


def _m(value: Any) -> Mapping[str, Any]:
    """A field that should be an object, or an empty one (watched objects are not trusted)."""
    return value if isinstance(value, Mapping) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def conditional(patch: Mapping[str, Any], obj: Mapping[str, Any]) -> Obj:
    """A merge patch that applies only to the version it was computed from (409 otherwise):
    a merge patch replaces whole lists, so a blind write could drop another's change, and a
    late one could undo a newer one. (An object without a resourceVersion gets a blind one.)"""
    version = _m(obj.get("metadata")).get("resourceVersion")
    out = dict(patch)
    if version:
        out["metadata"] = {**_m(patch.get("metadata")), "resourceVersion": version}
    return out


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def seconds_at(value: Any) -> float:
    """An RFC 3339 time (a condition's lastTransitionTime) in seconds; 0 when absent or not
    a time (the API validates these: a bad one counts as long ago, never as an error)."""
    try:
        return creation_seconds(value, "time")
    except ManifestError:
        return 0.0


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """One status condition of an object, by type."""
    for entry in _l(_m(obj.get("status")).get("conditions")):
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            return entry
    return None


def with_conditions(
    obj: Mapping[str, Any], now: float, *changes: tuple[str, str, str, str]
) -> list[Obj]:
    """The object's conditions with (type, status, reason, message) set, as Kueue sets them.

    lastTransitionTime moves only when the status changes; a merge patch replaces the whole
    list, so the untouched conditions are carried over.
    """
    out = [dict(c) for c in _l(_m(obj.get("status")).get("conditions")) if isinstance(c, Mapping)]
    stamp = rfc3339(now)
    for kind, status, reason, message in changes:
        message = message[:32768]
        for entry in out:
            if entry.get("type") == kind:
                if entry.get("status") != status:
                    entry["lastTransitionTime"] = stamp
                entry.update(status=status, reason=reason, message=message)
                break
        else:
            out.append(
                {
                    "type": kind,
                    "status": status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": stamp,
                }
            )
    return out


# ----- jobs of every managed kind (each read and written by its adapter) -------------------


def adapter_of(job: Mapping[str, Any]) -> JobAdapter:
    """The adapter of a job object (by apiVersion and kind; a bare kind is looked up too)."""
    adapter = registry.for_object(job)
    if adapter is None:
        kind = job.get("kind") or "Job"  # a bare manifest reads as a batch/v1 Job
        adapter = next((a for a in registry.ADAPTERS.values() if a.kind == kind), None)
    if adapter is None:
        raise ManifestError("kind", f"{job.get('kind')!r} is no kind Tower manages")
    return adapter


def pod_templates(job: Mapping[str, Any]) -> list[tuple[str, Obj]]:
    """(podSet name, pod template) of a job, as its adapter reads them."""
    return [(name, dict(t)) for name, t in adapter_of(job).templates(job).items()]


PROVREQ_ANNOTATION_PREFIX = "provreq.kueue.x-k8s.io/"


def workload_manifest(
    job: Mapping[str, Any],
    workload: Workload,
    label_keys: Collection[str] = (),
    annotation_keys: Collection[str] = (),
) -> Obj:
    """The Workload object Kueue creates for a job: owned by it, holding its pod templates,
    with the job's labels of `label_keys` (integrations.labelKeysToCopy) and annotations of
    `annotation_keys` (metrics.customLabels of kind Workload)."""
    meta = job["metadata"]
    adapter = adapter_of(job)
    job_labels = meta.get("labels") or {}
    labels = {**copied(job_labels, label_keys), JOB_UID_LABEL: str(meta.get("uid", ""))}
    if PRIORITY_CLASS_LABEL in job_labels:
        labels[PRIORITY_CLASS_LABEL] = job_labels[PRIORITY_CLASS_LABEL]
    # The job's ProvisioningRequest parameters go with its Workload, as Kueue copies them.
    annotations = {
        k: v
        for k, v in _m(meta.get("annotations")).items()
        if isinstance(k, str) and k.startswith(PROVREQ_ANNOTATION_PREFIX)
    }
    annotations.update(copied(meta.get("annotations"), annotation_keys))
    gates = gated_by(meta.get("annotations"))
    if gates:  # its admission waits for these controllers, as Kueue propagates them
        annotations[ADMISSION_GATED_BY] = gates
    owner = {
        "apiVersion": adapter.api_version,
        "kind": adapter.kind,
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return _manifest(workload, adapter.templates(job), labels, annotations, [owner])


def is_group_workload(workload: Any) -> bool:
    """A group's Workload (a pod group's, a StatefulSet's): its pods follow it, not one job."""
    annotations = _m(_m(workload).get("metadata")).get("annotations")
    return _m(annotations).get(IS_GROUP_WORKLOAD) == "true"


def group_owner_kind(workload: Any) -> str | None:
    """The kind that declares a group's Workload (a StatefulSet; None for a plain pod group)."""
    annotations = _m(_m(_m(workload).get("metadata")).get("annotations"))
    gvk = annotations.get(OWNER_GVK)
    return (str(gvk).rpartition("Kind=")[2] or None) if gvk else None


def group_workload_manifest(
    workload: Workload,
    templates: Mapping[str, Mapping[str, Any]],
    *,
    owners: Sequence[Mapping[str, Any]],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> Obj:
    """The Workload Kueue makes for a group of pods: owned (not controlled) by its members or
    by the object that declared it, marked a group's."""
    return _manifest(workload, templates, labels, annotations, owners)


def _manifest(
    workload: Workload,
    templates: Mapping[str, Mapping[str, Any]],
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    owners: Sequence[Mapping[str, Any]],
) -> Obj:
    pod_sets = []
    for pod_set in workload.pod_sets:
        entry: Obj = {
            "name": pod_set.name,
            "count": pod_set.count,
            "template": _clean_template(templates.get(pod_set.name) or {}),
        }
        if pod_set.min_count is not None:
            entry["minCount"] = pod_set.min_count
        if pod_set.topology is not None:
            entry["topologyRequest"] = request_json(pod_set.topology)
        pod_sets.append(entry)
    spec: Obj = {
        "queueName": workload.queue_name,
        "priority": workload.priority,
        "podSets": pod_sets,
        "active": True,
    }
    ref = priority_class_ref(workload.priority_class_name, workload.priority_class_source)
    if ref is not None:
        spec["priorityClassRef"] = ref
    if workload.max_execution_seconds is not None:
        spec["maximumExecutionTimeSeconds"] = workload.max_execution_seconds
    extra: Obj = {"annotations": dict(annotations)} if annotations else {}
    return {
        "apiVersion": WORKLOADS.api_version,
        "kind": WORKLOADS.kind,
        "metadata": {
            "name": workload.name,
            "namespace": workload.namespace,
            "labels": dict(labels),
            **extra,
            "ownerReferences": [dict(o) for o in owners],
        },
        "spec": spec,
    }


def priority_class_ref(name: str | None, source: str) -> Obj | None:
    """A Workload's spec.priorityClassRef for the class its priority came from."""
    if not name:
        return None
    if source == "kueue.x-k8s.io/workloadpriorityclass":
        return {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": name}
    return {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": name}


def _clean_template(template: Mapping[str, Any]) -> Obj:
    """Only labels and annotations may be in a Workload pod template's metadata."""
    out = copy.deepcopy(dict(template))
    meta = out.get("metadata") or {}
    out["metadata"] = {k: v for k, v in meta.items() if k in ("labels", "annotations") and v}
    spec = out.get("spec")
    if isinstance(spec, dict):
        for key in ("containers", "initContainers"):
            for container in spec.get(key) or []:
                if isinstance(container, dict) and isinstance(container.get("env"), list):
                    container["env"] = deduplicated_env(container["env"])
    return out


def deduplicated_env(env: list[Any]) -> list[Any]:
    """A container's env with one entry per name, the last one given, where the name first
    appeared: what the kubelet would set, and what Kueue's SanitizePodSet writes into a
    Workload (the API server accepts duplicates in a Job, and a Workload made from them would
    be rewritten on every reconcile)."""
    last: dict[Any, Any] = {}
    for var in env:
        name = var.get("name") if isinstance(var, dict) else id(var)
        last[name] = var  # a dict keeps the first insertion's place; the value is the last
    return list(last.values())


def toleration_dict(toleration: Toleration) -> Obj:
    """A core/v1 Toleration as the API writes it (empty fields left out)."""
    out: Obj = {}
    if toleration.key:
        out["key"] = toleration.key
    out["operator"] = toleration.operator
    if toleration.value:
        out["value"] = toleration.value
    if toleration.effect:
        out["effect"] = toleration.effect
    if toleration.toleration_seconds is not None:
        out["tolerationSeconds"] = toleration.toleration_seconds
    return out


def is_finished(job: Mapping[str, Any]) -> tuple[bool, str, str]:
    """(finished, Succeeded|Failed, message), as the job's adapter reads it."""
    finished = adapter_of(job).finished(job)
    return (False, "", "") if finished is None else (True, *finished)


def is_suspended(job: Mapping[str, Any]) -> bool:
    return adapter_of(job).is_suspended(job)


def is_active(job: Mapping[str, Any]) -> bool:
    """Whether pods may still run: Kueue waits for this before it releases evicted quota."""
    return adapter_of(job).is_active(job)


def pod_set_infos(
    pod_set_names: Iterable[str],
    admission: Admission,
    flavors: Mapping[str, ResourceFlavor],
    local_queue: str,
    *,
    workload: str | None = None,
    scheduler_name: str | None = None,
    templates: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, PodSetInfo]:
    """What an admission sets on each podSet's pods (Kueue's PodSetInfo).

    nodeSelector gains the union of the assigned flavors' nodeLabels, tolerations the
    flavors' tolerations; pod labels name the podSet and the queues (Kueue's
    AssignQueueLabelsForPods). A workload with a placement plan names itself on its pods
    (annotation kueue.x-k8s.io/workload), so the scheduler extender finds their plan, and
    goes to the scheduler that calls the extender when one is named. A podSet placed on
    topology domains starts gated (kueue.x-k8s.io/topology) until the ungater gives each pod
    its domain; one placed without asking (implicitly) is marked a topology-aware pod, as
    Kueue marks it, so its room is not counted twice.
    """
    by_pod_set = {psa.name: psa for psa in admission.pod_set_assignments}
    infos = {}
    for name in pod_set_names:
        psa = by_pod_set.get(name)
        selector: dict[str, str] = {}
        tolerations: list[Obj] = []
        for flavor_name in dict.fromkeys(psa.flavors.values()) if psa is not None else ():
            flavor = flavors.get(flavor_name)
            if flavor is None:
                continue
            selector.update(flavor.node_labels)
            for toleration in map(toleration_dict, flavor.tolerations):
                if toleration not in tolerations:
                    tolerations.append(toleration)
        annotations = {WORKLOAD_ANNOTATION: workload} if workload is not None else {}
        gates: list[Obj] = []
        if psa is not None and psa.topology is not None:
            gates.append({"name": TOPOLOGY_GATE})
            meta = _m(_m((templates or {}).get(name)).get("metadata"))
            if not any(a in _m(meta.get("annotations")) for a in TOPOLOGY_ANNOTATIONS):
                annotations[UNCONSTRAINED_ANNOTATION] = "true"
        infos[name] = PodSetInfo(
            count=psa.count if psa is not None else 0,
            node_selector=selector,
            tolerations=tolerations,
            labels={
                PODSET_LABEL: name,
                LOCAL_QUEUE_LABEL: local_queue,
                CLUSTER_QUEUE_LABEL: admission.cluster_queue,
            },
            annotations=annotations,
            scheduling_gates=gates,
            scheduler_name=scheduler_name,
        )
    return infos


def topology_placed(admission: Admission) -> bool:
    """Its pods are placed on topology domains: they name their Workload for the ungater."""
    return any(psa.topology is not None for psa in admission.pod_set_assignments)


def start_patch(
    job: Mapping[str, Any],
    admission: Admission,
    flavors: Mapping[str, ResourceFlavor],
    local_queue: str,
    *,
    workload: str | None = None,
    scheduler_name: str | None = None,
    checks: Sequence[CheckState] = (),
) -> Obj:
    """The one merge patch that starts an admitted job: unsuspended, its pods placed (with
    its AdmissionChecks' podSetUpdates: UpdateConflictError when two disagree), and the
    ClusterQueue that admitted it noted (so a stop knows to restore)."""
    adapter = adapter_of(job)
    infos = pod_set_infos(
        # Every podSet of the admission (a TrainJob's templates are its runtime's, unread here).
        [psa.name for psa in admission.pod_set_assignments],
        admission,
        flavors,
        local_queue,
        workload=workload,
        scheduler_name=scheduler_name,
        templates=adapter.templates(job),
    )
    if checks:
        infos = with_updates(infos, checks)
    annotations = {CLUSTER_QUEUE_ANNOTATION: admission.cluster_queue}
    return merge({"metadata": {"annotations": annotations}}, adapter.start_patch(job, infos))


def restore_patch(job: Mapping[str, Any], workload_obj: Mapping[str, Any]) -> Obj:
    """Put back the pod templates stored in the Workload (the pre-admission ones)."""
    pod_sets = [
        ps
        for ps in (workload_obj.get("spec") or {}).get("podSets") or []
        if isinstance(ps, Mapping)
    ]
    originals = {str(ps.get("name")): ps.get("template") or {} for ps in pod_sets}
    counts = {str(ps.get("name")): int(ps.get("count") or 0) for ps in pod_sets}
    remove_annotation: Obj = {"metadata": {"annotations": {CLUSTER_QUEUE_ANNOTATION: None}}}
    return merge(remove_annotation, adapter_of(job).restore_patch(job, originals, counts))


# ----- Workload status ------------------------------------------------------------------


def admission_dict(admission: Admission) -> Obj:
    assignments = []
    for psa in admission.pod_set_assignments:
        entry: Obj = {
            "name": psa.name,
            "flavors": dict(psa.flavors),
            "resourceUsage": {
                r: format_amount(r, v) for r, v in sorted(psa.resource_usage.items())
            },
            "count": psa.count,
        }
        if psa.topology is not None:
            entry["topologyAssignment"] = encode_assignment(psa.topology)
        if psa.delayed_topology is not None:
            entry["delayedTopologyRequest"] = psa.delayed_topology
        assignments.append(entry)
    return {"clusterQueue": admission.cluster_queue, "podSetAssignments": assignments}


def admit_patch(
    obj: Mapping[str, Any],
    admission: Admission,
    now: float,
    *extra: tuple[str, str, str, str],
    checks: Sequence[CheckState] = (),
) -> Obj:
    """The admission write: status.admission + QuotaReserved and Admitted (and `extra`
    conditions), as one patch. With AdmissionChecks to pass, only QuotaReserved, and the
    checks' states: Admitted follows once all are Ready."""
    cq = admission.cluster_queue
    changes = [(QUOTA_RESERVED, "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}")]
    if not checks:
        changes.append((ADMITTED, "True", "Admitted", "The workload is admitted"))
    evicted = condition(obj, EVICTED)
    if evicted is not None:
        previously = f"Previously: {evicted.get('message') or ''}"
        changes.append((EVICTED, "False", "QuotaReserved", previously))
    status: Obj = {
        "admission": admission_dict(admission),
        "conditions": with_conditions(obj, now, *changes, *extra),
    }
    if checks:
        status["admissionChecks"] = checks_status(checks)
    return {"status": status}


def checks_status(checks: Iterable[CheckState]) -> list[Obj]:
    """status.admissionChecks as written."""
    out = []
    for check in checks:
        entry: Obj = {
            "name": check.name,
            "state": check.state,
            "lastTransitionTime": rfc3339(check.last_transition),
            "message": check.message[:32768],
        }
        if check.retry_count:
            entry["retryCount"] = check.retry_count
        if check.requeue_after is not None:
            entry["requeueAfterSeconds"] = check.requeue_after
        if check.pod_set_updates:
            entry["podSetUpdates"] = [dict(u) for u in check.pod_set_updates]
        out.append(entry)
    return out


def pending_patch(obj: Mapping[str, Any], reason: str, message: str, now: float) -> Obj:
    """QuotaReserved=False with the core's reason and message."""
    return {
        "status": {
            "conditions": with_conditions(obj, now, (QUOTA_RESERVED, "False", reason, message))
        }
    }


def evict_patch(
    obj: Mapping[str, Any], reason: str, preemption_reason: str | None, message: str, now: float
) -> Obj:
    """Evicted=True (+ Preempted=True): the durable intent to stop, written first."""
    changes = [(EVICTED, "True", reason, message)]
    if preemption_reason is not None:
        changes.append((PREEMPTED, "True", preemption_reason, message))
    return {
        "status": {"conditions": with_conditions(obj, now, *changes)},
    }


def requeue_patch(
    obj: Mapping[str, Any],
    reason: str,
    message: str,
    now: float,
    *extra: tuple[str, str, str, str],
    requeued: bool = True,
) -> Obj:
    """Once stopped: no admission, QuotaReserved/Admitted False, Requeued, back in the queue.
    Requeued=False says it waits for something first (a backoff), as Kueue says it. Where
    MultiKueue dispatched it (clusterName, nominatedClusterNames) is cleared, as Kueue
    clears it, so it is dispatched afresh. An admission that ends adds its seconds to
    accumulatedPastExecutionTimeSeconds, as Kueue adds them."""
    status = obj.get("status") or {}
    dispatched = {k: None for k in ("clusterName", "nominatedClusterNames") if k in status}
    ran: Obj = {}
    admitted = condition(obj, ADMITTED) or {}
    if admitted.get("status") == "True":
        past = status.get(EXECUTED)
        since = seconds_at(admitted.get("lastTransitionTime"))
        seconds = exec_time.accumulated(past if isinstance(past, int) else None, since, now)
        ran[EXECUTED] = seconds
    return {
        "status": {
            **dispatched,
            **ran,
            "admission": None,
            "conditions": with_conditions(
                obj,
                now,
                (QUOTA_RESERVED, "False", reason, message),
                (ADMITTED, "False", "NoReservation", "The workload has no reservation"),
                (REQUEUED, "True" if requeued else "False", reason, message),
                *extra,
            ),
        }
    }


def finish_patch(obj: Mapping[str, Any], reason: str, message: str, now: float) -> Obj:
    """Finished=True and nothing else, as Kueue's finish.Finish writes it: a Workload that
    held quota keeps QuotaReserved=True and its admission (what ran, and where), and holds
    no quota any more because it is finished (see holds_quota)."""
    return {
        "status": {"conditions": with_conditions(obj, now, (FINISHED, "True", reason, message))}
    }


def holds_quota(obj: Mapping[str, Any] | None) -> bool:
    """Whether the Workload holds its ClusterQueue's quota now: QuotaReserved=True and not
    Finished (a finished Workload keeps QuotaReserved=True, as Kueue leaves it)."""
    return obj is not None and is_true(obj, QUOTA_RESERVED) and not is_true(obj, FINISHED)


def job_queue_name(job: Mapping[str, Any]) -> str | None:
    value = _m(_m(job.get("metadata")).get("labels")).get(QUEUE_NAME_LABEL)
    return value if isinstance(value, str) and value else None

"""MultiKueue as policy: which workers a reserved Workload goes to, who won, what it says.

A manager cluster reserves quota and dispatches each Workload whose ClusterQueue has a
`kueue.x-k8s.io/multikueue` AdmissionCheck to worker clusters, each named by a
MultiKueueCluster in the check's MultiKueueConfig. A copy of the Workload is made on the
nominated workers; the first that admits it wins, the other copies are removed, and the job
is made there with the prebuilt Workload's name. The manager's check is Ready once a worker
admitted it, and its job mirrors the worker's. Everything here is pure: the controller
(extender/kube/controller/multikueue/) reads the objects and writes what this decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.admission.cluster_profile import AccessProvider
from extender.core.api.models import MULTIKUEUE_ORIGIN_LABEL, PREBUILT_WORKLOAD_LABEL
from extender.core.jobframework.adapter import as_mapping, as_sequence

CONTROLLER = "kueue.x-k8s.io/multikueue"  # the check's controllerName, the job's managedBy
ORIGIN_LABEL = MULTIKUEUE_ORIGIN_LABEL
SECRET_KEY = "kubeconfig"  # the key of a worker's kubeconfig in its Secret
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
RESOURCE_IN_USE = "kueue.x-k8s.io/resource-in-use"  # the finalizer a worker's Kueue sets
ALL_AT_ONCE = "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
INCREMENTAL = "kueue.x-k8s.io/multikueue-dispatcher-incremental"
INCREMENTAL_ROUND = 300.0  # seconds between the incremental dispatcher's rounds (Kueue's)
INCREMENTAL_STEP = 3  # workers added per round unless the Configuration says otherwise
SYNC_DEFERRED_RETRY = 2.0  # a job status copy that waits for the manager's job to start

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class MultiKueueSettings:
    """Kueue's Configuration `multiKueue` section, and Tower's bound on a dispatch."""

    origin: str = "multikueue"
    worker_lost_timeout: float = 900.0
    gc_interval: float = 60.0
    dispatcher: str = ALL_AT_ONCE
    incremental_step: int = INCREMENTAL_STEP
    incremental_round: float = INCREMENTAL_ROUND  # Kueue's five minutes (not configurable there)
    # Beyond Kueue (#8602): a Workload no worker admits within this is given back with
    # what each worker said (0: it waits, as in Kueue).
    admission_timeout: float = 900.0
    # multiKueue.clusterProfile.accessProviders: the exec plugins for ClusterProfile workers
    access_providers: tuple[AccessProvider, ...] = ()


# ----- MultiKueueCluster: where its kubeconfig is --------------------------------------------


@dataclass(frozen=True, slots=True)
class KubeConfigSource:
    """Where a worker's kubeconfig is: a Secret in the controller's namespace, or a path."""

    location: str
    location_type: str  # "Secret" or "Path"


def cluster_source(obj: Mapping[str, Any]) -> KubeConfigSource | tuple[str, str]:
    """A MultiKueueCluster's kubeconfig source, or (reason, message) why it has none Tower
    can use. Read at either version (v1beta1 names it at spec.kubeConfig)."""
    spec = as_mapping(obj.get("spec"))
    source = as_mapping(spec.get("clusterSource")) or spec
    if source.get("clusterProfileRef") and not source.get("kubeConfig"):
        return (
            "MultiKueueClusterProfileFeatureDisabled",
            "load client config failed: clusterProfileRef is not supported (Kueue's "
            "MultiKueueClusterProfile gate, off by default): name a kubeconfig instead",
        )
    kube_config = as_mapping(source.get("kubeConfig"))
    location = kube_config.get("location")
    if not isinstance(location, str) or not location:
        return (
            "BadConfig",
            "load client config failed: spec.clusterSource.kubeConfig.location is empty",
        )
    kind = kube_config.get("locationType") or "Secret"
    if kind not in ("Secret", "Path"):
        return (
            "BadConfig",
            f"load client config failed: locationType {kind!r} is neither Secret nor Path",
        )
    return KubeConfigSource(location, str(kind))


def insecure(kubeconfig: Mapping[str, Any]) -> str | None:
    """Why a worker's kubeconfig is refused, as Kueue refuses it (its current context's
    cluster and user must be inline and verified), or None. Kueue's checks: no token or
    certificate files, TLS verified, a server given, no exec or auth-provider plugins."""
    current = kubeconfig.get("current-context")
    contexts = {
        c.get("name"): as_mapping(c.get("context"))
        for c in as_sequence(kubeconfig.get("contexts"))
        if isinstance(c, Mapping)
    }
    context = contexts.get(current) if current else next(iter(contexts.values()), None)
    if context is None:
        return "the kubeconfig has no current context"
    clusters = {
        c.get("name"): as_mapping(c.get("cluster"))
        for c in as_sequence(kubeconfig.get("clusters"))
        if isinstance(c, Mapping)
    }
    users = {
        u.get("name"): as_mapping(u.get("user"))
        for u in as_sequence(kubeconfig.get("users"))
        if isinstance(u, Mapping)
    }
    cluster = clusters.get(context.get("cluster"))
    if cluster is None:
        return f"the kubeconfig's context names no known cluster {context.get('cluster')!r}"
    user = users.get(context.get("user"), {})
    if not cluster.get("server"):
        return "the kubeconfig's cluster has no server"
    if cluster.get("insecure-skip-tls-verify"):
        return "insecure-skip-tls-verify is not allowed"
    if cluster.get("certificate-authority"):
        return "certificate-authority files are not allowed (use certificate-authority-data)"
    if user.get("tokenFile"):
        return "tokenFile is not allowed"
    if user.get("exec"):
        return "exec plugins are not allowed"
    if user.get("auth-provider"):
        return "auth-provider plugins are not allowed"
    if user.get("username") or user.get("password"):
        return "basic authentication is not allowed"
    for key in ("client-certificate", "client-key"):
        if user.get(key):
            return f"{key} files are not allowed (use {key}-data)"
    return None


# ----- the AdmissionCheck's Active condition ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Condition:
    status: str
    reason: str
    message: str


def check_active(
    config_error: str | None, clusters: Sequence[tuple[str, bool | None]]
) -> Condition:
    """A MultiKueue AdmissionCheck's Active condition, as Kueue words it. `clusters`: each
    of its config's clusters in order, with whether it is Active (None: no such
    MultiKueueCluster)."""
    if config_error is not None:
        return Condition(
            "False", "BadConfig", f"Cannot load the AdmissionChecks parameters: {config_error}"
        )
    missing = [name for name, active in clusters if active is None]
    inactive = [name for name, active in clusters if active is False]
    if not missing and not inactive:
        return Condition("True", "Active", "The admission check is active")
    parts = []
    if missing:
        parts.append(f"Missing clusters: [{' '.join(missing)}]")
    if inactive:
        parts.append(f"Inactive clusters: [{' '.join(inactive)}]")
    message = ", ".join(parts)
    if len(missing) + len(inactive) == len(clusters):
        return Condition("False", "NoUsableClusters", message)
    return Condition("True", "SomeActiveClusters", message)


def config_error(
    check_parameters: Mapping[str, Any] | None, configs: Mapping[str, Any]
) -> str | None:
    """Why a MultiKueue check's parameters name no MultiKueueConfig (Kueue's words)."""
    if not check_parameters:
        return "missing parameters reference"
    name = check_parameters.get("name")
    if not name:
        return "empty name: bad parameters reference"
    group = check_parameters.get("apiGroup")
    if group != "kueue.x-k8s.io":
        return f'wrong group "{group}", expecting "kueue.x-k8s.io": bad parameters reference'
    kind = check_parameters.get("kind")
    if kind != "MultiKueueConfig":
        return f'wrong kind "{kind}", expecting "MultiKueueConfig": bad parameters reference'
    if name not in configs:
        return f'multikueueconfigs.kueue.x-k8s.io "{name}" not found'
    return None


def config_clusters(config: Mapping[str, Any]) -> tuple[str, ...]:
    """A MultiKueueConfig's clusters, in order (the incremental dispatcher follows it)."""
    return tuple(str(c) for c in as_sequence(as_mapping(config.get("spec")).get("clusters")) if c)


# ----- dispatching ----------------------------------------------------------------------------


def nominate(
    dispatcher: str,
    clusters: Sequence[str],
    connected: Sequence[str],
    nominated: Sequence[str],
    round_started: float | None,
    now: float,
    step: int = INCREMENTAL_STEP,
    round_seconds: float = INCREMENTAL_ROUND,
) -> tuple[tuple[str, ...], float | None] | None:
    """The workers a reserved Workload is dispatched to now, and when the current round
    started; None: nothing changes. AllAtOnce nominates every connected worker;
    Incremental adds `step` more of the config's workers (in its order, connected or not)
    each round of five minutes; another dispatcher's nominations are left to it."""
    if dispatcher == ALL_AT_ONCE:
        wanted = tuple(c for c in clusters if c in connected)
        return None if set(wanted) == set(nominated) else (wanted, None)
    if dispatcher != INCREMENTAL:
        return None
    if round_started is not None and now - round_started < round_seconds and nominated:
        return None
    left = [c for c in clusters if c not in nominated]
    if not left:
        return None
    return (*nominated, *left[:step]), now


# ----- the Workload copies on the workers -----------------------------------------------------


def remote_workload(local: Mapping[str, Any], origin: str) -> Obj:
    """The copy of a Workload made on a worker: its name, namespace, labels (without the
    manager's job uid, with the origin) and annotations, and its spec as it is; no owner
    and no status (the worker's queue admits it)."""
    meta = as_mapping(local.get("metadata"))
    labels = {k: v for k, v in as_mapping(meta.get("labels")).items() if k != JOB_UID_LABEL}
    labels[ORIGIN_LABEL] = origin
    out_meta: Obj = {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "labels": labels,
    }
    annotations = as_mapping(meta.get("annotations"))
    if annotations:
        out_meta["annotations"] = dict(annotations)
    return {
        "apiVersion": local.get("apiVersion") or "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": out_meta,
        "spec": dict(as_mapping(local.get("spec"))),
    }


def runs_on_worker(workload: Mapping[str, Any], controller_of: Callable[[str], Any]) -> bool:
    """Whether a Workload has a MultiKueue check (`controller_of` names a check's
    controller): its pods never run on the manager (Kueue's ShouldSkipLocalExecution)."""
    states = as_sequence(as_mapping(workload.get("status")).get("admissionChecks"))
    return any(
        isinstance(s, Mapping) and controller_of(str(s.get("name"))) == CONTROLLER for s in states
    )


def dispatches(check_names: Iterable[str], controller_of: Callable[[str], Any]) -> bool:
    """Whether a ClusterQueue with these checks hands its workloads to MultiKueue: their
    pods run on worker clusters, so the manager's nodes say nothing about where they fit."""
    return any(controller_of(name) == CONTROLLER for name in check_names)


def priority_of(workload: Mapping[str, Any]) -> dict[str, Any]:
    """A Workload's priority and its class, as a copy on a worker must carry them."""
    spec = as_mapping(workload.get("spec"))
    return {"priority": spec.get("priority"), "priorityClassRef": spec.get("priorityClassRef")}


SIBLINGS_RETRY = 1.0  # seconds before a Workload whose siblings are not all made looks again


@dataclass(frozen=True)
class Turn:
    """Whether one of several Workloads of one object may be dispatched now."""

    follow: str | None = None  # the worker its siblings went to: it goes there too
    waits: str | None = None  # why it is not dispatched yet (None: it may be)
    retry: float | None = None  # when to look again (None: a sibling's change wakes it)


def component_turn(name: str, components: Sequence[str], where: Mapping[str, str | None]) -> Turn:
    """Kueue's component Workloads (a LeaderWorkerSet's groups, `components` in the order of
    their index; `where` the worker each made one was admitted by): once all are made, the
    first is dispatched, and the others follow it to the worker that admits it."""
    missing = [n for n in components if n not in where]
    if missing:
        return Turn(waits=f"its sibling Workloads {missing} are not made yet", retry=SIBLINGS_RETRY)
    clusters = {c for n, c in where.items() if n != name and c}
    if len(clusters) > 1:
        return Turn(waits=f"its sibling Workloads went to different workers: {sorted(clusters)}")
    if clusters:
        return Turn(follow=next(iter(clusters)))
    if components and name != components[0]:
        return Turn(waits=f"it follows the first of its group, {components[0]}")
    return Turn()


def job_markers(origin: str, workload_name: str) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and annotations of a job made on a worker: its origin, and the prebuilt
    Workload it runs as (an annotation, as Kueue v0.19.2 writes it by default)."""
    return {ORIGIN_LABEL: origin}, {PREBUILT_WORKLOAD_LABEL: workload_name}


def _condition(obj: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    for c in as_sequence(as_mapping(as_mapping(obj).get("status")).get("conditions")):
        if isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "True":
            return c
    return None


def earliest(remotes: Mapping[str, Mapping[str, Any] | None], kind: str) -> str | None:
    """The worker whose copy has the condition `kind` True the longest (by its transition
    time, then by name): the first admitted wins, the first finished is reported."""
    found = []
    for cluster, obj in remotes.items():
        c = _condition(obj, kind)
        if c is not None:
            found.append((str(c.get("lastTransitionTime") or ""), cluster))
    return min(found)[1] if found else None


def finished_as(remote: Mapping[str, Any]) -> tuple[str, str]:
    """(reason, message) of a worker's Finished condition, for the manager's Workload."""
    c = _condition(remote, "Finished") or {}
    return str(c.get("reason") or "Succeeded"), str(c.get("message") or "")


def pending_reason(remote: Mapping[str, Any] | None) -> str:
    """What a worker says about a copy it has not admitted, for "why is it pending"."""
    if remote is None:
        return "no copy yet"
    status = as_mapping(remote.get("status"))
    for kind in ("QuotaReserved", "Admitted"):
        for c in as_sequence(status.get("conditions")):
            if isinstance(c, Mapping) and c.get("type") == kind and c.get("status") == "False":
                message = c.get("message")
                if message:
                    return str(message)
    return "pending, without a reason yet"


# ----- the manager's check state's messages (Kueue's) -----------------------------------------


def admitted_on(cluster: str) -> str:
    return f'The workload was admitted on "{cluster}"'


def previously(message: str, state: str) -> str:
    return f'{message}, Previously: "{state}"'


def not_managed(managed_by: Any, field: str = "spec.managedBy") -> str:
    """Why a job whose managedBy `field` is not MultiKueue's is rejected (Kueue's words)."""
    return (
        f"The owner is not managed by Kueue: Expecting {field} to be "
        f'"{CONTROLLER}" not "{managed_by or ""}"'
    )


def evicted_on(cluster: str) -> str:
    return f'Workload evicted on worker cluster: "{cluster}", resetting for re-admission'


def whereabouts(cluster_queue: str, status: Mapping[str, Any]) -> tuple[str, Obj] | None:
    """Where a multi-cluster Workload is, for `kubectl tower why` and the dashboard: (one
    line, the details), or None when it was never dispatched."""
    admitted_by = status.get("clusterName")
    nominated = [str(c) for c in as_sequence(status.get("nominatedClusterNames")) if c]
    if admitted_by:
        return (
            f"quota reserved in ClusterQueue {cluster_queue}; admitted by worker cluster "
            f"{admitted_by}, where it runs",
            {"reservedIn": cluster_queue, "admittedBy": str(admitted_by)},
        )
    if nominated:
        return (
            f"quota reserved in ClusterQueue {cluster_queue}; dispatched to worker cluster(s) "
            f"{', '.join(nominated)}, waiting for one to admit it",
            {"reservedIn": cluster_queue, "dispatchedTo": nominated},
        )
    return None

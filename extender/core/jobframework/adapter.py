"""The adapter: what every kind of job tells Tower about itself.

Its podSets, whether it runs or finished, how to start and stop it.

An adapter is pure: it reads and writes dicts shaped as the API server sends them. The
controller, the webhook, the simulator and the cache all ask the same adapter, so a kind is
described once. The generic parts (a pod template placed on an admission's flavors, the
Workload's name) live here, beside the interface they serve.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from extender.core.api.parse import ManifestError

Obj = dict[str, Any]


_MAX_PREFIX = 252 - 5


def workload_name(kind: str, group: str, name: str, uid: str) -> str:
    """Kueue's deterministic Workload name: `<kind>-<name>-<5 hex of sha1>`."""
    digest = hashlib.sha1(f"{kind}\n{group}\n{name}\n{uid}".encode()).hexdigest()
    return f"{kind.lower()}-{name}"[:_MAX_PREFIX] + "-" + digest[:5]


def pointer(*parts: str) -> str:
    """A JSON pointer (RFC 6901) to a field: /spec/suspend."""
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)


def as_mapping(value: Any) -> Mapping[str, Any]:
    """A field that should be an object, or an empty one (watched objects are not trusted)."""
    return value if isinstance(value, Mapping) else {}


def as_sequence(value: Any) -> Sequence[Any]:
    return value if isinstance(value, list) else []


def as_count(value: Any, default: int = 0) -> int:
    """A field that should be a whole number of pods, or `default` (not trusted either)."""
    whole = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if whole else default


@dataclass(frozen=True, slots=True)
class PodSetTemplate:
    """One podSet as a job declares it: Kueue's name, how many pods, and their template."""

    name: str
    count: int
    template: Mapping[str, Any]
    path: str  # where the template is in the job, for errors ("spec.template")
    min_count: int | None = None
    # The labels that number the kind's pods, for topology-aware placement by rank.
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None


@dataclass(frozen=True, slots=True)
class PodSetInfo:
    """What an admission sets on one podSet's pods when the job starts (Kueue's PodSetInfo)."""

    count: int
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: Sequence[Mapping[str, Any]] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    scheduling_gates: Sequence[Mapping[str, Any]] = ()
    scheduler_name: str | None = None


@dataclass(frozen=True, slots=True)
class Reference:
    """Another object a job's podSets are read from (a TrainJob's runtime): its kind and
    where it is. `namespace` is None for a cluster-scoped kind."""

    group: str
    version: str
    kind: str
    plural: str
    namespace: str | None
    name: str

    def describe(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


class MissingReferenceError(ManifestError):
    """A job refers to an object that does not exist (yet): it waits, and is read again."""


# Where `resolved` puts the objects a job refers to, in the in-memory copy only.
REFERENCED_KEY = "tower.dev/referenced"


def info_fields(info: PodSetInfo) -> Obj:
    """A PodSetInfo as the kinds that take it whole write it (an AppWrapper's podSetInfos,
    Kubeflow Trainer's runtime patch): labels, annotations, nodeSelector, tolerations and
    schedulingGates, the empty ones left out, as Kueue writes them."""
    out: Obj = {}
    if info.labels:
        out["labels"] = dict(info.labels)
    if info.annotations:
        out["annotations"] = dict(info.annotations)
    if info.node_selector:
        out["nodeSelector"] = dict(info.node_selector)
    if info.tolerations:
        out["tolerations"] = [dict(t) for t in info.tolerations]
    if info.scheduling_gates:
        out["schedulingGates"] = [dict(g) for g in info.scheduling_gates]
    return out


# The parts of a pod template that a start sets and a stop puts back.
PLACEMENT_FIELDS = ("nodeSelector", "tolerations", "schedulingGates", "schedulerName")


def placed(template: Mapping[str, Any], info: PodSetInfo) -> Obj:
    """A pod template with an admission's PodSetInfo merged in: the flavors' node labels and
    tolerations added to the pod's own, labels and annotations set, gates appended."""
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {})
    if info.labels:
        meta.setdefault("labels", {}).update(info.labels)
    if info.annotations:
        meta.setdefault("annotations", {}).update(info.annotations)
    pod = out.setdefault("spec", {})
    if info.node_selector:
        pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **info.node_selector}
    tolerations = list(pod.get("tolerations") or [])
    for toleration in info.tolerations:
        if toleration not in tolerations:
            tolerations.append(dict(toleration))
    if tolerations:
        pod["tolerations"] = tolerations
    gates = list(pod.get("schedulingGates") or [])
    for gate in info.scheduling_gates:
        if gate not in gates:
            gates.append(dict(gate))
    if gates:
        pod["schedulingGates"] = gates
    if info.scheduler_name is not None:
        pod["schedulerName"] = info.scheduler_name
    return out


def restored(current: Mapping[str, Any], original: Mapping[str, Any] | None) -> Obj:
    """A pod template with what a start changed put back from the original (the one the
    Workload recorded when it was created)."""
    out = copy.deepcopy(dict(current))
    if original is None:
        return out
    meta = out.setdefault("metadata", {})
    for part in ("labels", "annotations"):
        wanted = dict(as_mapping(as_mapping(original.get("metadata")).get(part)))
        if wanted:
            meta[part] = wanted
        else:
            meta.pop(part, None)
    pod = out.setdefault("spec", {})
    for part in PLACEMENT_FIELDS:
        wanted_value = as_mapping(original.get("spec")).get(part)
        if wanted_value:
            pod[part] = copy.deepcopy(wanted_value)
        else:
            pod.pop(part, None)
    return out


def template_placement(template: Any) -> Obj:
    """What of a pod template a start sets and a stop restores (all a cache keeps of it)."""
    if not isinstance(template, Mapping):
        return {}
    out: Obj = {}
    meta = template.get("metadata")
    if isinstance(meta, Mapping):
        kept = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
        if kept:
            out["metadata"] = kept
    spec = template.get("spec")
    if isinstance(spec, Mapping):
        kept = {k: spec[k] for k in PLACEMENT_FIELDS[:3] if k in spec}
        if kept:
            out["spec"] = kept
    return out


def condition_true(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The condition of this type when its status is True."""
    for entry in as_sequence(as_mapping(obj.get("status")).get("conditions")):
        if isinstance(entry, Mapping) and entry.get("type") == kind:
            return entry if entry.get("status") == "True" else None
    return None


class JobAdapter:
    """One kind of job, as Kueue's GenericJob describes it. Subclasses set the class
    attributes and implement the reading and the writing of their pod templates; the rest
    has the behaviour most kinds share."""

    framework: ClassVar[str]  # Kueue's integration name, e.g. "batch/job"
    group: ClassVar[str]
    version: ClassVar[str]
    kind: ClassVar[str]
    plural: ClassVar[str]
    # Kinds whose objects this one creates and queues itself (a JobSet's Jobs): such a
    # child is never queued on its own.
    children: ClassVar[tuple[tuple[str, str], ...]] = ()
    # Where the kind says it is suspended (MPIJob: spec.runPolicy.suspend); Tower owns it.
    suspend_path: ClassVar[tuple[str, ...]] = ("spec", "suspend")
    # A status field by which the kind's own controller counts it started, and which a stop
    # must clear through /status before the pod templates may change (a Job's startTime).
    started_path: ClassVar[tuple[str, ...] | None] = None
    # Whether the kind can be suspended after it is created (a pod cannot: it is gated once,
    # at create, and a stop deletes it).
    can_suspend: ClassVar[bool] = True
    # Whether the webhook queues objects of the kind without the queue-name label in the
    # namespaces that ask for it (manageJobsWithoutQueueName; bare pods too, as in Kueue).
    default_queue: ClassVar[bool] = True
    # A name for the controller's cache of this kind when another part of Tower also
    # watches the same API resource (every pod, for placement): the two are kept apart.
    cache_view: ClassVar[str] = ""
    # (group, kind, plural) of the kinds its `references` name (a TrainJob's runtimes): the
    # controller reads them, its RBAC grants get on them, the simulator takes them in.
    referenced_kinds: ClassVar[tuple[tuple[str, str, str], ...]] = ()
    # Annotations of the job that its start or stop reads (a Job's job-min-parallelism): the
    # watch cache keeps these, and only these, of its annotations.
    kept_annotations: ClassVar[tuple[str, ...]] = ()
    # spec.managedBy of the kind's own controller, for a kind MultiKueue can run on a worker
    # (None: it cannot). The webhook hands such a job to MultiKueue when its ClusterQueue
    # has a MultiKueue check, so the manager's own controller never runs it.
    own_controller: ClassVar[str | None] = None
    # A kind without a managedBy that MultiKueue runs on a worker all the same (a pod): the
    # manager's stays gated (Kueue's composable jobs, ShouldSkipLocalExecution).
    gated_on_manager: ClassVar[bool] = False
    # Where the kind keeps its managedBy (a Kubeflow job's is in its runPolicy).
    managed_by_path: ClassVar[tuple[str, ...]] = ("spec", "managedBy")
    # Fields of the spec that a change on the manager's job, once it runs on a worker,
    # carries to the worker's copy (a RayService's Serve config, as Kueue's
    # MultiKueueRemoteSpecSync); `kept` must keep them.
    worker_synced_fields: ClassVar[tuple[str, ...]] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    # ----- reading ------------------------------------------------------------------------

    def references(self, obj: Mapping[str, Any]) -> tuple[Reference, ...]:
        """Other objects its podSets are read from (none for most kinds); ManifestError when
        the job names one it cannot refer to."""
        return ()

    def holds_finalizer(self, obj: Mapping[str, Any]) -> bool:
        """Whether the object carries a finalizer of Kueue's that Tower takes off once its
        end is counted (`release_patch`)."""
        return False

    def queue_ops(self, obj: Mapping[str, Any]) -> list[Obj] | None:
        """The webhook's JSON patch operations that queue the object at create, when they
        are more than setting the suspend field (None: set it)."""
        return None

    def create_ops(self, obj: Mapping[str, Any]) -> list[Obj]:
        """More operations Kueue's webhook adds to a queued object at create (a TrainJob's
        empty runtimePatches entry of Kueue's manager); the same object twice, none."""
        return []

    def resolved(
        self, obj: Mapping[str, Any], referenced: Mapping[Reference, Mapping[str, Any] | None]
    ) -> Obj:
        """The job with the objects it refers to attached (None: not found), for reading its
        podSets; never written back."""
        if not referenced:
            return dict(obj)
        return {**obj, REFERENCED_KEY: dict(referenced)}

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        """The podSets, in Kueue's order; ManifestError names a field that is wrong."""
        raise NotImplementedError

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        """podSet name -> its pod template, read leniently (for writing, never raises)."""
        raise NotImplementedError

    def pod_priority_class(self, obj: Mapping[str, Any]) -> Any:
        """The first priorityClassName among the pod templates (Kueue's fallback priority)."""
        for template in self.templates(obj).values():
            value = as_mapping(template.get("spec")).get("priorityClassName")
            if value is not None:
                return value
        return None

    def is_suspended(self, obj: Mapping[str, Any]) -> bool:
        value: Any = obj
        for part in self.suspend_path:
            value = as_mapping(value).get(part)
        return value is True

    def is_started(self, obj: Mapping[str, Any]) -> bool:
        """Whether the job's own controller still counts it as started (`started_path`)."""
        if self.started_path is None:
            return False
        value: Any = obj
        for part in self.started_path:
            value = as_mapping(value).get(part)
        return bool(value)

    def unstart_patch(self) -> Obj:
        """The /status patch that clears `started_path` ({} for a kind without one)."""
        if self.started_path is None:
            return {}
        patch: Obj = {self.started_path[-1]: None}
        for part in reversed(self.started_path[:-1]):
            patch = {part: patch}
        return patch

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        """Whether pods may still run: evicted quota is given back only once none do."""
        raise NotImplementedError

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        """(Succeeded or Failed, message) once the job is done; None while it is not."""
        raise NotImplementedError

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        """Whether every pod the admission started is ready (Kueue's PodsReady)."""
        return False

    def check_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """ManifestError for an update Kueue refuses on the kind (beyond the queue's rules)."""

    def group_of(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        """(Workload name, podSet) when the object is one member of a group that shares one
        Workload (a pod group's pod); None for an object that is its own Workload."""
        return None

    def is_child(self, obj: Mapping[str, Any]) -> bool:
        """A child another managed kind created: its parent is the one queued."""
        for owner in as_sequence(as_mapping(obj.get("metadata")).get("ownerReferences")):
            if not isinstance(owner, Mapping) or owner.get("controller") is not True:
                continue
            group = str(owner.get("apiVersion", "")).rpartition("/")[0]
            if (group, owner.get("kind")) in _PARENTS.get((self.group, self.kind), ()):
                return True
        return False

    # ----- writing ------------------------------------------------------------------------

    def suspend_patch(self, suspend: bool) -> Obj:
        patch: Obj = {self.suspend_path[-1]: suspend}
        for part in reversed(self.suspend_path[:-1]):
            patch = {part: patch}
        return patch

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        """The merge patch that sets these podSets' pod templates (a podSet not named keeps
        its own)."""
        raise NotImplementedError

    def counts_patch(self, obj: Mapping[str, Any], counts: Mapping[str, int]) -> Obj:
        """The merge patch that sets these podSets' pod counts (partial admission); kinds
        that cannot run with fewer pods keep theirs."""
        return {}

    def start_patch(self, obj: Mapping[str, Any], infos: Mapping[str, PodSetInfo]) -> Obj:
        """The one patch that starts the job with an admission: unsuspended, every podSet's
        pods placed as the admission says."""
        templates = self.templates(obj)
        wanted = {
            name: placed(templates[name], info) for name, info in infos.items() if name in templates
        }
        counts = {name: info.count for name, info in infos.items()}
        return merge(
            self.suspend_patch(False),
            self.templates_patch(obj, wanted),
            self.counts_patch(obj, counts),
        )

    def restore_patch(
        self,
        obj: Mapping[str, Any],
        originals: Mapping[str, Mapping[str, Any]],
        counts: Mapping[str, int],
    ) -> Obj:
        """The patch that puts back what a start changed, from the Workload's podSets."""
        templates = self.templates(obj)
        wanted = {
            name: restored(template, originals.get(name)) for name, template in templates.items()
        }
        return merge(self.templates_patch(obj, wanted), self.counts_patch(obj, counts))

    def release_patch(self, obj: Mapping[str, Any]) -> Obj:
        """The patch that takes Kueue's finalizer off ({} for a kind that has none)."""
        return {}

    # ----- MultiKueue (the job run on a worker cluster) ----------------------------------

    @property
    def runs_on_workers(self) -> bool:
        """Whether MultiKueue can run the kind on a worker cluster."""
        return self.own_controller is not None or self.gated_on_manager

    @property
    def managed_by_field(self) -> str:
        return ".".join(self.managed_by_path)

    def managed_by(self, obj: Mapping[str, Any]) -> str | None:
        """The controller the job is left to (`managed_by_path`; None: the kind's own)."""
        value: Any = obj
        for part in self.managed_by_path:
            value = as_mapping(value).get(part)
        return value if isinstance(value, str) and value else None

    def managed_by_ops(self, obj: Mapping[str, Any], controller: str) -> list[Obj]:
        """The webhook's operations that hand a new job to `controller` (its managedBy),
        when the job leaves it to the kind's own controller (unset, or set to it)."""
        if self.own_controller is None:
            return []
        if self.managed_by(obj) not in (None, self.own_controller):
            return []
        # The first parent the object lacks (a Kubeflow job without a runPolicy) is added
        # with the field inside it: a JSON patch cannot add below a missing parent.
        value: Any = controller
        parents = self.managed_by_path[:-1]
        depth = len(parents)
        node: Any = obj
        for i, part in enumerate(parents):
            node = node.get(part) if isinstance(node, Mapping) else None
            if not isinstance(node, Mapping):
                depth = i
                break
        for part in reversed(self.managed_by_path[depth + 1 :]):
            value = {part: value}
        return [{"op": "add", "path": pointer(*self.managed_by_path[: depth + 1]), "value": value}]

    def remote_copy(
        self,
        obj: Mapping[str, Any],
        extra_labels: Mapping[str, str],
        extra_annotations: Mapping[str, str],
    ) -> Obj:
        """The job as it is created on a worker: its name, namespace, labels and annotations
        (with these added) and its spec, without managedBy (the worker's own controller runs
        it) and without what the API server or a controller set on the manager's."""
        meta = as_mapping(obj.get("metadata"))
        out_meta: Obj = {"name": meta.get("name"), "namespace": meta.get("namespace")}
        labels = {**as_mapping(meta.get("labels")), **extra_labels}
        annotations = {**as_mapping(meta.get("annotations")), **extra_annotations}
        out_meta["labels"] = labels
        if annotations:
            out_meta["annotations"] = annotations
        spec = copy.deepcopy(dict(as_mapping(obj.get("spec"))))
        holder: Any = spec
        for part in self.managed_by_path[1:-1]:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            holder.pop(self.managed_by_path[-1], None)
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": out_meta,
            "spec": self.worker_spec(spec),
        }

    def worker_spec(self, spec: Obj) -> Obj:
        """A job's spec as the worker takes it (a Job's selector is the worker's to make)."""
        return spec

    def status_from_worker(self, local: Mapping[str, Any], remote: Mapping[str, Any]) -> Obj | None:
        """The status the manager's job takes from the worker's copy: all of it (None: not
        now, the manager's job is not started yet)."""
        return dict(as_mapping(remote.get("status")))

    def remote_spec_patch(self, local: Mapping[str, Any], remote: Mapping[str, Any]) -> Obj | None:
        """The merge patch that carries the manager's `worker_synced_fields` to the worker's
        copy where they differ (None: they do not)."""
        mine, theirs = as_mapping(local.get("spec")), as_mapping(remote.get("spec"))
        changed = {
            f: mine.get(f) for f in self.worker_synced_fields if mine.get(f) != theirs.get(f)
        }
        return {"spec": changed} if changed else None

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        """What the watch cache keeps of the spec to start and stop the job later: its
        pod templates trimmed to their placement, in the object's own shape."""
        raise NotImplementedError


# Every registered kind by (group, kind), and for a child kind the (group, kind) of the
# parents that queue it instead (from each adapter's `children`): filled by the registry,
# read by an adapter that asks whether an owner of its object is managed.
_KINDS: dict[tuple[str, str], JobAdapter] = {}
_PARENTS: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {}


def register_kind(adapter: JobAdapter) -> None:
    _KINDS[(adapter.group, adapter.kind)] = adapter
    for child in adapter.children:
        _PARENTS[child] = (*_PARENTS.get(child, ()), (adapter.group, adapter.kind))


def registered(group: str, kind: str) -> JobAdapter | None:
    """The registered adapter of a kind (None: no managed kind)."""
    return _KINDS.get((group, kind))


def merge(*patches: Mapping[str, Any]) -> Obj:
    """Merge patches into one, deeper keys combined (the later wins on a leaf)."""
    out: Obj = {}
    for patch in patches:
        for key, value in patch.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), dict):
                out[key] = merge(out[key], value)
            else:
                out[key] = copy.deepcopy(value) if isinstance(value, (dict, list)) else value
    return out


def replace_maps(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> Obj:
    """A merge patch turning `current` into `wanted` (null for keys that must go)."""
    out: Obj = {}
    for key in set(current) | set(wanted):
        if key not in wanted:
            out[key] = None
        elif isinstance(wanted[key], Mapping) and isinstance(current.get(key), Mapping):
            sub = replace_maps(current[key], wanted[key])
            if sub:
                out[key] = sub
        elif current.get(key) != wanted[key]:
            out[key] = copy.deepcopy(wanted[key])
    return out

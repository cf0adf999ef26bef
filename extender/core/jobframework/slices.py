"""Kueue's elastic jobs (ElasticJobsViaWorkloadSlices): Workload slices and the webhook's rules.

A Job, RayJob, RayCluster or RayService annotated `kueue.x-k8s.io/elastic-job: "true"` (with
the gate on) is not stopped when its pod counts change while it runs. As Kueue's
pkg/workloadslicing does:
- scaled down, its Workload's podSet counts are updated in place (the quota it no longer
  uses is free at once);
- scaled up, a new Workload (a slice) is made for the job as it now is, naming the one it
  replaces (`workload-slice-replacement-for`). It waits in the queue like any Workload, but
  counts the old slice's quota as its own, so it needs only the difference; once admitted,
  the old slice is finished (`WorkloadSliceReplaced`) and its quota goes to the new one.
Every pod starts behind the `kueue.x-k8s.io/elastic-job` scheduling gate, and only as many
as the admitted slice counts are let through.

This module is the policy, pure: which slice a job follows, which are finished and why, what
a change of counts calls for, the slices' names, and the webhook's refusals.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.jobframework.adapter import (
    JobAdapter,
    as_count,
    as_mapping,
    as_sequence,
    pointer,
)

ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"  # the job's annotation, and its slices'
SCHEDULING_GATE = "kueue.x-k8s.io/elastic-job"  # Kueue's ElasticJobSchedulingGate
REPLACEMENT_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
SLICE_NAME = "kueue.x-k8s.io/workload-slice-name"  # the first slice's name, on every slice
GATE = "ElasticJobsViaWorkloadSlices"
MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"

# Kueue's reasons and messages (apis/kueue/v1beta2, pkg/workloadslicing, pkg/scheduler).
REPLACED = "WorkloadSliceReplaced"
OUT_OF_SYNC = "OutOfSync"
OUT_OF_SYNC_MESSAGE = "The workload slice is out of sync with its parent job"
REPLACED_MESSAGE = "Replaced to accommodate a new workload slice"

# Kueue's supportedElasticJobGVKs.
FRAMEWORKS = ("batch/job", "ray.io/rayjob", "ray.io/raycluster", "ray.io/rayservice")

_MAX_PREFIX = 252 - 5


def annotated(obj: Mapping[str, Any]) -> bool:
    """The job (or Workload) asks to be elastic: Kueue matches the value "true" exactly."""
    annotations = as_mapping(as_mapping(obj.get("metadata")).get("annotations"))
    return annotations.get(ELASTIC_JOB) == "true"


def enabled(obj: Mapping[str, Any], gates: Mapping[str, bool]) -> bool:
    """Kueue's workloadslicing.Enabled: annotated, with the gate on (its default)."""
    return gates.get(GATE, True) and annotated(obj)


def slice_name(kind: str, group: str, name: str, uid: str, generation: int | str) -> str:
    """Kueue's name for an elastic job's Workload: the usual `<kind>-<name>-<hash>`, the hash
    taking the job's generation in too (with a RayJob's or RayService's, its cluster's:
    `ray.name_extra`), so each scale-up's slice has a name of its own."""
    text = f"{kind}\n{group}\n{name}\n{uid}\n{generation}"
    digest = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()
    return f"{kind.lower()}-{name}"[:_MAX_PREFIX] + "-" + digest[:5]


def replaced_message(new_uid: str, job_uid: str) -> str:
    """The Finished message of a slice replaced by an admitted one (Kueue's scheduler)."""
    return (
        f"Replaced to accommodate a workload (UID: {new_uid}, JobUID: {job_uid}) due to "
        "workload slice aggregation"
    )


Counts = tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class Slice:
    """One not-finished Workload of an elastic job, as the slice rules read it."""

    key: str  # namespace/name
    uid: str
    created: str  # creationTimestamp (RFC 3339 sorts as text)
    counts: Counts  # (podSet, count) as its spec declares them
    holds_quota: bool
    evicted: bool
    replaces: str | None  # the key in its workload-slice-replacement-for
    origin: str  # the first slice's name (workload-slice-name), or its own

    @property
    def name(self) -> str:
        return self.key.split("/", 1)[1]


def replacement_for(annotations: Any) -> str:
    """The slice a Workload replaces, from its annotations ("" for none)."""
    value = as_mapping(annotations).get(REPLACEMENT_FOR)
    return value if isinstance(value, str) else ""


def counts_of(workload: Mapping[str, Any]) -> Counts:
    """A Workload's podSets and their counts, in order."""
    out: list[tuple[str, int]] = []
    for ps in as_sequence(as_mapping(workload.get("spec")).get("podSets")):
        ps = as_mapping(ps)
        out.append((str(ps.get("name") or "main"), as_count(ps.get("count"), 1)))
    return tuple(out)


def _true(obj: Mapping[str, Any], kind: str) -> bool:
    for c in as_sequence(as_mapping(obj.get("status")).get("conditions")):
        c = as_mapping(c)
        if c.get("type") == kind:
            return c.get("status") == "True"
    return False


def slice_of(workload: Mapping[str, Any]) -> Slice:
    meta = as_mapping(workload.get("metadata"))
    annotations = as_mapping(meta.get("annotations"))
    name = str(meta.get("name") or "")
    replaces = annotations.get(REPLACEMENT_FOR)
    origin = annotations.get(SLICE_NAME)
    return Slice(
        key=f"{meta.get('namespace') or ''}/{name}",
        uid=str(meta.get("uid") or ""),
        created=str(meta.get("creationTimestamp") or ""),
        counts=counts_of(workload),
        holds_quota=_true(workload, "QuotaReserved") and not finished(workload),
        evicted=_true(workload, "Evicted"),
        replaces=replaces if isinstance(replaces, str) and replaces else None,
        origin=origin if isinstance(origin, str) and origin else name,
    )


def finished(workload: Mapping[str, Any]) -> bool:
    return _true(workload, "Finished")


@dataclass(frozen=True, slots=True)
class Chain:
    """A job's slices sorted out (Kueue's normalizeActiveSlices): the one the job's counts are
    compared with (`selected`), the one whose admission runs its pods now (`active`), and the
    ones to finish, each with Kueue's reason and message."""

    selected: Slice | None
    active: Slice | None
    finish: tuple[tuple[Slice, str, str], ...] = ()


def chain(slices: Sequence[Slice], job_uid: str = "") -> Chain:
    """Kueue's invariant over a job's not-finished slices: at most one admitted (the head of
    the replacement chain), at most one pending replacement of it; every other one is
    finished: replaced if something replaces it, else out of sync with its job."""
    ordered = sorted(slices, key=lambda s: (s.created, s.uid))
    if len(ordered) <= 1:
        only = ordered[0] if ordered else None
        active = only if only is not None and only.holds_quota and not only.evicted else None
        return Chain(only, active)
    replacements: dict[str, Slice] = {}
    for s in ordered:
        if s.replaces is not None and not s.evicted:
            known = replacements.get(s.replaces)
            if known is None or (not known.holds_quota and s.holds_quota):
                replacements[s.replaces] = s
    head = latest = None
    for s in ordered:
        if s.evicted:
            continue
        latest = s
        if not s.holds_quota:
            continue
        by = replacements.get(s.key)
        if by is not None and by.holds_quota:
            continue  # an admitted slice replaces it
        head = s
    pending = None
    if head is not None:
        by = replacements.get(head.key)
        if by is not None and not by.holds_quota:
            pending = by
    selected = pending or head or latest
    finish = []
    for s in ordered:
        if s is selected or s is head:
            continue
        if s.key in replacements:
            by = replacements[s.key]
            message = REPLACED_MESSAGE
            if by.holds_quota:
                message = replaced_message(by.uid, job_uid)
            finish.append((s, REPLACED, message))
        else:
            finish.append((s, OUT_OF_SYNC, OUT_OF_SYNC_MESSAGE))
    return Chain(selected, head, tuple(finish))


def fewer(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    """Some podSet of `a` has fewer pods than in `b` (Kueue's HasFewerReplicasThan)."""
    return any(count < b.get(name, count) for name, count in a.items())


def scaled_down(old: Mapping[str, int], new: Mapping[str, int]) -> bool:
    """Kueue's ScaledDown: some podSet has fewer pods, and none has more."""
    return fewer(new, old) and not fewer(old, new)


FOLLOW, CREATE, UPDATE, SCALE_UP, INCOMPATIBLE = (
    "follow",
    "create",
    "update",
    "scale-up",
    "incompatible",
)


def decide(job: Counts, selected: Slice | None) -> str:
    """What a job's counts call for against the slice it is compared with (Kueue's
    EnsureWorkloadSlices): a first slice, nothing, the counts updated in place (a slice
    that holds no quota, or a scale-down), a new slice (a scale-up of an admitted one), or
    nothing a slice can do (its podSets are others: the job is handled as not elastic)."""
    if selected is None:
        return CREATE
    now, was = dict(job), dict(selected.counts)
    if [n for n, _ in job] != [n for n, _ in selected.counts]:
        return INCOMPATIBLE
    if now == was:
        return FOLLOW
    if not selected.holds_quota or scaled_down(was, now):
        return UPDATE
    return SCALE_UP


def with_counts(pod_sets: Sequence[Any], counts: Mapping[str, int]) -> list[dict[str, Any]]:
    """A Workload's spec.podSets with these counts (Kueue's ApplyPodSetCounts)."""
    out = []
    for ps in pod_sets:
        ps = dict(as_mapping(ps))
        name = str(ps.get("name") or "main")
        if name in counts:
            ps["count"] = counts[name]
        out.append(ps)
    return out


# ----- the webhook's rules ---------------------------------------------------------------


def _gvk(adapter: JobAdapter) -> str:
    """A kind as Kueue's errors write it: `batch/v1, Kind=Job`."""
    group = f"{adapter.group}/" if adapter.group else ""
    return f"{group}{adapter.version}, Kind={adapter.kind}"


def _bool(value: Any) -> str:
    return "true" if value else "false"


def create_problems(
    adapter: JobAdapter, obj: Mapping[str, Any], gates: Mapping[str, bool]
) -> list[str]:
    """Kueue's refusals of a queued job at create, as its webhooks word them."""
    problems = []
    elastic = enabled(obj, gates)
    path = f"metadata.annotations[{ELASTIC_JOB}]"
    if elastic and adapter.framework not in FRAMEWORKS:
        problems.append(f'{path}: Forbidden: elastic job is not supported for "{_gvk(adapter)}"')
    annotations = as_mapping(as_mapping(obj.get("metadata")).get("annotations"))
    if elastic and adapter.framework == "batch/job" and MIN_PARALLELISM in annotations:
        value = annotations[MIN_PARALLELISM]
        problems.append(
            f'metadata.annotations[{MIN_PARALLELISM}]: Invalid value: "{value}": partial '
            "admission and elastic job cannot be used together"
        )
    if elastic and adapter.framework in FRAMEWORKS:
        for template_path, template in _templates(adapter, obj):
            meta = as_mapping(as_mapping(template).get("metadata"))
            for key, mode in (
                ("kueue.x-k8s.io/podset-required-topology", "required"),
                ("kueue.x-k8s.io/podset-preferred-topology", "preferred"),
            ):
                if key in as_mapping(meta.get("annotations")):
                    problems.append(
                        f"{template_path}.metadata.annotations[{key}]: Forbidden: {mode} "
                        "topology is not supported with elastic jobs"
                    )
    autoscaling = _autoscaling(adapter, obj)
    if autoscaling is not None and not elastic:
        where, message = autoscaling
        problems.append(f"{where}: Invalid value: true: {message}")
    return problems


def _autoscaling(adapter: JobAdapter, obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """A Ray kind whose cluster autoscales: where, and Kueue's refusal when not elastic."""
    spec = as_mapping(obj.get("spec"))
    if adapter.framework == "ray.io/raycluster" and spec.get("enableInTreeAutoscaling") is True:
        return (
            "spec.enableInTreeAutoscaling",
            "a kueue-managed RayCluster can use autoscaling only as an elastic job: enable the "
            f'{GATE} feature gate and set the "{ELASTIC_JOB}": "true" annotation',
        )
    field = {"ray.io/rayjob": "rayClusterSpec", "ray.io/rayservice": "rayClusterConfig"}
    name = field.get(adapter.framework)
    if name is not None and as_mapping(spec.get(name)).get("enableInTreeAutoscaling") is True:
        return (
            f"spec.{name}.enableInTreeAutoscaling",
            "a kueue managed job should only use autoscaling when workload slicing is enabled",
        )
    return None


def update_problems(
    adapter: JobAdapter, old: Mapping[str, Any], new: Mapping[str, Any], gates: Mapping[str, bool]
) -> list[str]:
    """Kueue's refusals of an update: the elastic annotation cannot be turned on or off, and
    a running Job that takes partial admission cannot change its parallelism."""
    problems = []
    was, now = enabled(old, gates), enabled(new, gates)
    if was != now:
        problems.append(
            f"metadata.annotations[{ELASTIC_JOB}]: Invalid value: {_bool(now)}: field is immutable"
        )
    if adapter.framework == "batch/job":
        annotations = as_mapping(as_mapping(old.get("metadata")).get("annotations"))
        old_spec, new_spec = as_mapping(old.get("spec")), as_mapping(new.get("spec"))
        if (
            MIN_PARALLELISM in annotations
            and old_spec.get("suspend") is not True
            and old_spec.get("parallelism", 1) != new_spec.get("parallelism", 1)
        ):
            problems.append(
                "spec.parallelism: Forbidden: cannot change when partial admission is enabled "
                "and the job is not suspended"
            )
    return problems


def _templates(adapter: JobAdapter, obj: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Each pod template of a kind that may be elastic, with its path (dotted)."""
    spec = as_mapping(obj.get("spec"))
    if adapter.framework == "batch/job":
        return [("spec.template", spec.get("template"))]
    if adapter.framework == "ray.io/rayjob":
        prefix, cluster = "spec.rayClusterSpec", as_mapping(spec.get("rayClusterSpec"))
    elif adapter.framework == "ray.io/rayservice":
        prefix, cluster = "spec.rayClusterConfig", as_mapping(spec.get("rayClusterConfig"))
    elif adapter.framework == "ray.io/raycluster":
        prefix, cluster = "spec", spec
    else:
        return []
    out: list[tuple[str, Any]] = [
        (
            f"{prefix}.headGroupSpec.template",
            as_mapping(cluster.get("headGroupSpec")).get("template"),
        )
    ]
    for i, group in enumerate(as_sequence(cluster.get("workerGroupSpecs"))):
        out.append((f"{prefix}.workerGroupSpecs[{i}].template", as_mapping(group).get("template")))
    return out


def gate_ops(adapter: JobAdapter, obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSON patch that puts the elastic scheduling gate on each pod template of an
    elastic job at create (Kueue's webhooks do so): its pods start gated, and the controller
    lets through as many as its admitted slice counts. Applied twice, the same object."""
    if adapter.framework not in FRAMEWORKS:
        return []
    ops: list[dict[str, Any]] = []
    for path, template in _templates(adapter, obj):
        if not isinstance(template, Mapping):
            continue
        parts = [p for chunk in path.split(".") for p in _split_index(chunk)]
        pod = template.get("spec")
        if not isinstance(pod, Mapping):
            continue
        gates = pod.get("schedulingGates")
        wanted = {"name": SCHEDULING_GATE}
        if isinstance(gates, list):
            if wanted in gates:
                continue
            where = pointer(*parts, "spec", "schedulingGates", "-")
            ops.append({"op": "add", "path": where, "value": wanted})
        else:
            where = pointer(*parts, "spec", "schedulingGates")
            ops.append({"op": "add", "path": where, "value": [wanted]})
    return ops


def _split_index(chunk: str) -> list[str]:
    """`workerGroupSpecs[2]` -> [`workerGroupSpecs`, `2`]."""
    if chunk.endswith("]") and "[" in chunk:
        name, index = chunk[:-1].split("[", 1)
        return [name, index]
    return [chunk]


def gated(pod: Mapping[str, Any]) -> bool:
    """A pod still held by the elastic gate."""
    gates = as_sequence(as_mapping(pod.get("spec")).get("schedulingGates"))
    return any(as_mapping(g).get("name") == SCHEDULING_GATE for g in gates)


def to_let_through(pods: Sequence[tuple[str, str, bool]], granted: Mapping[str, int]) -> list[str]:
    """Of a job's running pods as (name, podSet, gated), the gated ones to let through: per
    podSet, as many as the admitted slice grants beyond those already through, lowest names
    first (Kueue's ungater)."""
    through: dict[str, int] = {}
    waiting: dict[str, list[str]] = {}
    for name, pod_set, is_gated in pods:
        if is_gated:
            waiting.setdefault(pod_set, []).append(name)
        else:
            through[pod_set] = through.get(pod_set, 0) + 1
    out = []
    for pod_set, names in sorted(waiting.items()):
        room = granted.get(pod_set, 0) - through.get(pod_set, 0)
        if room > 0:
            out += sorted(names)[:room]
    return out

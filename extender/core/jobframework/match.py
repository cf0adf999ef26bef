"""Whether a job still matches its Workload, for what quota counts (Kueue's EquivalentToWorkload).

Quota is counted from a Workload's podSets: their names, how many pods, and what each pod
requests. A user who patches a running job (its parallelism, a JobSet's replicas, a worker
group's template) changes what runs without changing what was admitted. Kueue then stops the
job, deletes its Workload and makes a new one from the job as it now is, which is queued
again; so does Tower. This module says whether, and where, the two differ.

A podSet's shape is its name, its count, and its containers' resources as written (requests
and limits, init containers and overhead): what quota is computed from, compared as the
object holds it, so nothing is parsed on the watch's path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from extender.core.jobframework.adapter import PodSetTemplate, as_mapping, as_sequence


@dataclass(frozen=True, slots=True)
class Shape:
    """One podSet as quota sees it."""

    name: str
    count: int
    resources: tuple[object, ...]  # the pod spec's resources, as written
    path: str = ""  # where its template is in the job ("spec.template"), for messages


def _frozen(value: Any) -> object:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def resources_of(template: Mapping[str, Any]) -> tuple[object, ...]:
    """A pod template's resources as written: each container's and init container's
    `resources` (with an init container's restartPolicy: a sidecar counts apart), and the
    pod's overhead."""
    spec = as_mapping(template.get("spec"))
    containers = tuple(
        _frozen(as_mapping(c).get("resources")) for c in as_sequence(spec.get("containers"))
    )
    inits = tuple(
        (_frozen(as_mapping(c).get("resources")), _frozen(as_mapping(c).get("restartPolicy")))
        for c in as_sequence(spec.get("initContainers"))
    )
    return (containers, inits, _frozen(spec.get("overhead")))


def job_shapes(pod_sets: Sequence[PodSetTemplate]) -> tuple[Shape, ...]:
    return tuple(Shape(ps.name, ps.count, resources_of(ps.template), ps.path) for ps in pod_sets)


def workload_shapes(workload: Mapping[str, Any]) -> tuple[Shape, ...]:
    """A Workload object's podSets as its spec declares them."""
    pod_sets = as_sequence(as_mapping(workload.get("spec")).get("podSets"))
    return tuple(
        Shape(
            str(as_mapping(ps).get("name") or ""),
            _count(as_mapping(ps).get("count"), 1),
            resources_of(as_mapping(as_mapping(ps).get("template"))),
        )
        for ps in pod_sets
    )


def admitted_counts(workload: Mapping[str, Any]) -> dict[str, int]:
    """podSet -> the count its admission holds (status.admission.podSetAssignments)."""
    admission = as_mapping(as_mapping(workload.get("status")).get("admission"))
    return {
        str(as_mapping(a).get("name")): _count(as_mapping(a).get("count"), 0)
        for a in as_sequence(admission.get("podSetAssignments"))
        if as_mapping(a).get("name")
    }


def _count(value: Any, default: int) -> int:
    whole = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return value if whole else default


def difference(
    job: Sequence[Shape], declared: Sequence[Shape], admitted: Mapping[str, int]
) -> str | None:
    """Where a job differs from its Workload, in one line naming the podSet and what
    changed; None when it matches. A podSet matches with the count its admission holds
    (a partially admitted job runs with fewer pods than it declared) or the count its
    Workload declared (a job not yet started, or stopped and put back)."""
    names = [s.name for s in job]
    if names != [s.name for s in declared]:
        wanted = ", ".join(s.name for s in declared)
        return f"its podSets are now [{', '.join(names)}], its Workload's [{wanted}]"
    for now, was in zip(job, declared, strict=True):
        where = f" ({now.path})" if now.path else ""
        if now.count not in (was.count, admitted.get(was.name, was.count)):
            held = admitted.get(was.name, was.count)
            return f"podSet {now.name}{where} now has {now.count} pods, its admission {held}"
        if now.resources != was.resources:
            return f"podSet {now.name}{where}: its containers' resources changed since admission"
    return None


def key(shapes: Sequence[Shape]) -> int:
    """One number for a job's shapes, kept in the watch cache in place of the shapes (a
    hash: compared within one process only)."""
    return hash(tuple((s.name, s.count, s.resources) for s in shapes))


def workload_keys(workload: Mapping[str, Any]) -> frozenset[int]:
    """The keys of the shapes a job that matches this Workload may have: as declared, and
    with the counts its admission holds."""
    declared = workload_shapes(workload)
    admitted = admitted_counts(workload)
    running = tuple(Shape(s.name, admitted.get(s.name, s.count), s.resources) for s in declared)
    return frozenset((key(declared), key(running)))

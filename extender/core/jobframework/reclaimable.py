"""Reclaimable pods (Kueue's ReclaimablePods): a running job's finished pods give their quota back.

A Job whose remaining completions no longer fill its parallelism, or a JobSet whose replicated
jobs succeeded, runs fewer pods than it was admitted for. Kueue's generic reconciler writes
how many pods of each podSet are done for good into the Workload's `status.reclaimablePods`;
the cache then counts an admitted Workload's usage, and a waiting one's request, for the pods
that remain. The counts are read from the job's status here, per kind, as Kueue's adapters
read them (pkg/controller/jobs/{job,jobset,pod}); the quota after reclaim is Kueue's
podSetsCountsAfterReclaim and totalRequestsFromAdmission (pkg/workload/workload.go).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from extender.core.api.models import Admission, FlavorResource, PodSet, PodSetAssignment
from extender.core.jobframework.adapter import as_count, as_mapping, as_sequence
from extender.core.jobframework.groups import Member

Reclaimable = tuple[tuple[str, int], ...]
"""(podSet name, pods reclaimable), in the order the job lists its podSets."""


def _terminal_indexes(completed: Any, failed: Any, completions: int) -> int:
    """How many indexes below `completions` an Indexed Job finished, succeeded or failed: the
    union of its status.completedIndexes and status.failedIndexes ("1,3-5"); a malformed or
    descending interval is skipped, as Kueue skips it."""
    if completions <= 0:
        return 0
    intervals: list[tuple[int, int]] = []
    for text in (completed, failed):
        if not isinstance(text, str) or not text:
            continue
        for part in text.split(","):
            first_text, dash, last_text = part.partition("-")
            try:
                first = int(first_text)
                last = int(last_text) if dash else first
            except ValueError:
                continue
            if first < 0 or last < first:
                continue
            last = min(last, completions - 1)
            if first <= last:
                intervals.append((first, last))
    count, counted = 0, -1
    for first, last in sorted(intervals):
        start = max(first, counted + 1)
        if start > last:
            continue
        count += last - start + 1
        counted = last
    return count


def batch_job(obj: Mapping[str, Any]) -> Reclaimable:
    """A Job: once fewer completions remain than its parallelism, the difference (Kueue's
    Job.ReclaimablePods). A single-pod Job has nothing to reclaim."""
    spec, status = as_mapping(obj.get("spec")), as_mapping(obj.get("status"))
    parallelism = as_count(spec.get("parallelism"), 1)
    completions = as_count(spec.get("completions"), parallelism)
    terminal = as_count(status.get("succeeded"))
    if spec.get("completionMode") == "Indexed":
        terminal = _terminal_indexes(
            status.get("completedIndexes"), status.get("failedIndexes"), completions
        )
    if parallelism <= 1 or terminal <= 0:
        return ()
    remaining = max(completions - terminal, 0)
    if remaining >= parallelism:
        return ()
    return (("main", parallelism - remaining),)


def _pods_per_replica(job_spec: Mapping[str, Any]) -> int:
    parallelism = as_count(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    return parallelism if completions is None else min(parallelism, as_count(completions, 1))


def jobset(obj: Mapping[str, Any]) -> Reclaimable:
    """A JobSet: each replicated job's succeeded Jobs, times the pods of one (Kueue's
    JobSet.ReclaimablePods); nothing before its controller reports any status."""
    statuses = {
        str(s.get("name")): as_count(s.get("succeeded"))
        for s in as_sequence(as_mapping(obj.get("status")).get("replicatedJobsStatus"))
        if isinstance(s, Mapping)
    }
    if not statuses:
        return ()
    out = []
    for rjob in as_sequence(as_mapping(obj.get("spec")).get("replicatedJobs")):
        rjob = as_mapping(rjob)
        name = str(rjob.get("name") or "")
        succeeded = statuses.get(name, 0)
        if 0 < succeeded <= as_count(rjob.get("replicas"), 1):
            job_spec = as_mapping(as_mapping(rjob.get("template")).get("spec"))
            out.append((name.lower(), succeeded * _pods_per_replica(job_spec)))
    return tuple(out)


def pod_group(members: Sequence[Member], serving: bool) -> Reclaimable:
    """A plain pod group: its succeeded pods, by role (Kueue's Pod.ReclaimablePods); a
    serving group (pod-group-serving: "true") reclaims nothing."""
    if serving:
        return ()
    counts: dict[str, int] = {}
    for member in members:
        if member.phase == "Succeeded":
            counts[member.role] = counts.get(member.role, 0) + 1
    return tuple(counts.items())


# The kinds whose adapters Kueue v0.19.2 gives reclaimable pods, by framework name; pod groups
# are read from their pods (pod_group). Its TrainJobs have them too, read from the TrainJob's
# JobSet; Tower does not reclaim for those yet (docs/kueue.md).
BY_FRAMEWORK: Mapping[str, Callable[[Mapping[str, Any]], Reclaimable]] = {
    "batch/job": batch_job,
    "jobset.x-k8s.io/jobset": jobset,
}


def of_job(framework: str, obj: Mapping[str, Any]) -> Reclaimable | None:
    """The job's reclaimable pods; None for a kind that has none."""
    read = BY_FRAMEWORK.get(framework)
    return None if read is None else read(obj)


def limited(reclaimable: Reclaimable, counts: Mapping[str, int]) -> Reclaimable:
    """Each count capped at its podSet's (Kueue's LimitReclaimablePodsToPodSetSizes: a count
    read from a job's status may outgrow a podSet scaled down since)."""
    return tuple((name, min(n, counts[name]) if name in counts else n) for name, n in reclaimable)


def from_status(workload: Mapping[str, Any]) -> dict[str, int]:
    """A Workload's status.reclaimablePods, by podSet (anything malformed is left out)."""
    out: dict[str, int] = {}
    for entry in as_sequence(as_mapping(workload.get("status")).get("reclaimablePods")):
        entry = as_mapping(entry)
        name, count = entry.get("name"), entry.get("count")
        if isinstance(name, str) and isinstance(count, int) and not isinstance(count, bool):
            out[name] = max(count, 0)
    return out


def pod_set_counts(workload: Mapping[str, Any]) -> dict[str, int]:
    """A Workload's spec.podSets' counts, by name."""
    return {
        str(as_mapping(ps).get("name") or "main"): as_count(as_mapping(ps).get("count"), 1)
        for ps in as_sequence(as_mapping(workload.get("spec")).get("podSets"))
    }


def status_value(reclaimable: Reclaimable) -> list[dict[str, Any]] | None:
    """status.reclaimablePods as written (None clears it, as Kueue writes an empty list)."""
    return [{"name": name, "count": n} for name, n in reclaimable] or None


def same(reclaimable: Reclaimable, written: Mapping[str, int]) -> bool:
    """Kueue's ReclaimablePodsAreEqual: the same podSets with the same counts."""
    return dict(reclaimable) == dict(written) and len(reclaimable) == len(written)


def pod_sets_after(
    pod_sets: Sequence[PodSet], reclaimable: Mapping[str, int]
) -> tuple[PodSet, ...]:
    """A waiting Workload's podSets as it requests quota: without its reclaimable pods
    (Kueue's totalRequestsFromPodSets), never below none."""
    out = []
    for ps in pod_sets:
        gone = min(reclaimable.get(ps.name, 0), ps.count)
        if not gone:
            out.append(ps)
            continue
        count = ps.count - gone
        min_count = ps.min_count if ps.min_count is None or ps.min_count <= count else count
        out.append(replace(ps, count=count, min_count=min_count or None))
    return tuple(out)


def admission_after(
    admission: Admission, counts: Mapping[str, int], reclaimable: Mapping[str, int]
) -> Admission:
    """An admission as it holds quota once its reclaimable pods are gone: each podSet's
    usage scaled to the pods that remain (Kueue's totalRequestsFromAdmission). A podSet
    admitted with fewer pods than it now has left (a partial admission) keeps its own."""
    out = []
    for psa in admission.pod_set_assignments:
        total = counts.get(psa.name, psa.count)
        left = total - min(reclaimable.get(psa.name, 0), total)
        if left >= psa.count or psa.count <= 0:
            out.append(psa)
            continue
        usage = {r: v // psa.count * left for r, v in psa.resource_usage.items()}
        out.append(
            PodSetAssignment(psa.name, psa.flavors, usage, left, psa.topology, psa.delayed_topology)
        )
    return Admission(admission.cluster_queue, tuple(out))


def usage_after(
    admission: Admission, counts: Mapping[str, int], reclaimable: Mapping[str, int]
) -> dict[FlavorResource, int]:
    """The quota an admitted Workload holds, per (flavor, resource), after reclaim."""
    return admission_after(admission, counts, reclaimable).usage()

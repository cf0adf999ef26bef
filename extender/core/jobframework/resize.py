"""A running job resized by an update: what changed, so the webhook can stop it in the same write.

Kueue stops a running job whose podSets no longer match its Workload and queues it again as it
now is (EquivalentToWorkload). Done by the controller alone, the job's own controller sees the
new size first and starts the extra pods, which run until the stop reaches them. Tower's
webhook instead sets the suspend field in the very update that resizes a running job: the
outcome is Kueue's (stopped, queued again at the new size), and no pod beyond the admission
starts. An elastic job (Kueue's workload slices) scales in place and is left alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.core.api.parse import ManifestError
from extender.core.jobframework.adapter import JobAdapter, as_mapping
from extender.core.jobframework.match import Shape, job_shapes

ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
ELASTIC_GATE = "ElasticJobsViaWorkloadSlices"


def is_elastic(obj: Mapping[str, Any], gates: Mapping[str, bool]) -> bool:
    """Kueue's elastic job: annotated `kueue.x-k8s.io/elastic-job: "true"`, with its gate on."""
    annotations = as_mapping(as_mapping(obj.get("metadata")).get("annotations"))
    return annotations.get(ELASTIC_JOB_ANNOTATION) == "true" and gates.get(ELASTIC_GATE, True)


def _change(before: tuple[Shape, ...], after: tuple[Shape, ...]) -> str | None:
    if [s.name for s in before] != [s.name for s in after]:
        was = ", ".join(s.name for s in before)
        return f"its podSets are now [{', '.join(s.name for s in after)}], were [{was}]"
    for old, new in zip(before, after, strict=True):
        where = f" ({new.path})" if new.path else ""
        if old.count != new.count:
            return f"podSet {new.name}{where} now has {new.count} pods, had {old.count}"
        if old.resources != new.resources:
            return f"podSet {new.name}{where}: its containers' resources changed"
    return None


def running_resize(
    adapter: JobAdapter, old: Mapping[str, Any], new: Mapping[str, Any]
) -> str | None:
    """What an update changes of a running job's podSets (names, counts, resources), in one
    line; None when the job is suspended before or after it, or its podSets stay as they were.
    A job whose podSets cannot be read is left to the checks that say why."""
    if adapter.is_suspended(old) or adapter.is_suspended(new):
        return None
    try:
        before = job_shapes(adapter.pod_sets(old))
        after = job_shapes(adapter.pod_sets(new))
    except (ManifestError, ValueError):
        return None
    return _change(before, after)

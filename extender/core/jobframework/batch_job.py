"""batch/v1 Job: one podSet, `main`, of min(parallelism, completions) pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from extender.core.api.parse import ManifestError, as_map
from extender.core.jobframework.adapter import (
    JobAdapter,
    Obj,
    PodSetTemplate,
    as_count,
    as_mapping,
    condition_true,
    replace_maps,
    template_placement,
)
from extender.core.jobframework.slices import ELASTIC_JOB
from extender.core.jobframework.topology import COMPLETION_INDEX

MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
# Kueue's: completions follow parallelism when a partial admission changes it.
COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"


def _shrinks(annotations: Mapping[str, Any]) -> bool:
    """Whether a Job accepts partial admission: its minimum parallelism is an integer (Kueue
    takes one that is not as no partial admission)."""
    try:
        int(annotations[MIN_PARALLELISM_ANNOTATION])
    except (KeyError, TypeError, ValueError):
        return False
    return True


def non_negative(spec: Mapping[str, Any], key: str, path: str, default: int | None) -> int | None:
    """An integer field of a spec that must not be negative (None or the default if unset)."""
    value = spec.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ManifestError(f"{path}.{key}", f"must be a non-negative integer, got {value!r}")
    return value


def job_pod_count(spec: Mapping[str, Any], path: str) -> int:
    """The pods a Job runs at once: its parallelism, capped by its completions."""
    parallelism = non_negative(spec, "parallelism", path, 1)
    completions = non_negative(spec, "completions", path, None)
    assert parallelism is not None
    return parallelism if completions is None else min(parallelism, completions)


def job_finished(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """A Job's (or JobSet's) Complete/Completed or Failed condition, as Kueue reads it."""
    for kind in ("Complete", "Completed"):
        entry = condition_true(obj, kind)
        if entry is not None:
            return "Succeeded", str(entry.get("message") or "Job finished successfully")
    entry = condition_true(obj, "Failed")
    if entry is not None:
        return "Failed", str(entry.get("message") or "Job failed")
    return None


# The pod-template labels kube-apiserver sets from a Job's uid (the worker's Job has its own).
_CONTROLLER_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name")


class BatchJob(JobAdapter):
    framework = "batch/job"
    group, version, kind, plural = "batch", "v1", "Job", "jobs"
    # kube-apiserver refuses a change to a Job's template while status.startTime is set.
    started_path = ("status", "startTime")
    kept_annotations = (
        MIN_PARALLELISM_ANNOTATION,
        COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
        ELASTIC_JOB,  # an elastic Job's counts follow its slices (core/jobframework/slices.py)
    )
    own_controller = "kubernetes.io/job-controller"

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        spec = as_map(obj.get("spec"), "spec")
        template = as_map(spec.get("template"), "spec.template")
        annotations = as_map(
            as_mapping(obj.get("metadata")).get("annotations"), "metadata.annotations"
        )
        min_count = None
        if MIN_PARALLELISM_ANNOTATION in annotations:
            try:
                min_count = int(annotations[MIN_PARALLELISM_ANNOTATION])
            except (TypeError, ValueError):
                raise ManifestError(
                    f'metadata.annotations["{MIN_PARALLELISM_ANNOTATION}"]',
                    f"must be an integer, got {annotations[MIN_PARALLELISM_ANNOTATION]!r}",
                ) from None
        count = job_pod_count(spec, "spec")
        if min_count is not None and not 0 < min_count < count:
            # Kueue's Job webhook refuses it so; the Workload's schema would refuse it too.
            raise ManifestError(
                f'metadata.annotations["{MIN_PARALLELISM_ANNOTATION}"]',
                f"should be between 0 and {count - 1}, got {min_count}",
            )
        return [
            PodSetTemplate(
                "main",
                count,
                template,
                "spec.template",
                min_count,
                pod_index_label=COMPLETION_INDEX,
            )
        ]

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return {"main": as_mapping(as_mapping(obj.get("spec")).get("template"))}

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        """Pods run, or still stop: Kueue counts `status.active` alone, but a terminating
        pod's containers run until its grace period ends, so its quota is held till then."""
        status = as_mapping(obj.get("status"))
        return bool(status.get("active")) or bool(status.get("terminating"))

    def worker_spec(self, spec: Obj) -> Obj:
        # The selector and the labels that carry the manager's Job uid are the worker's
        # Job controller's to make (kube-apiserver refuses a selector it did not generate).
        spec.pop("selector", None)
        template = spec.get("template")
        labels = as_mapping(as_mapping(template).get("metadata")).get("labels")
        if isinstance(labels, dict):
            for key in _CONTROLLER_LABELS:
                labels.pop(key, None)
        return spec

    def status_from_worker(self, local: Mapping[str, Any], remote: Mapping[str, Any]) -> Obj | None:
        # A startTime copied onto a Job still suspended here would freeze its template
        # (kube-apiserver refuses changes once it is set): wait for the start, unless the
        # worker's Job already ended or both are suspended.
        if (
            self.is_suspended(local)
            and not self.is_suspended(remote)
            and self.finished(remote) is None
        ):
            return None
        return dict(as_mapping(remote.get("status")))

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        return job_finished(obj)

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        status = as_mapping(obj.get("status"))
        ready = as_count(status.get("ready")) + as_count(status.get("succeeded"))
        try:
            wanted = job_pod_count(as_mapping(obj.get("spec")), "spec")
        except ManifestError:
            return False  # a malformed spec never runs: its Workload is refused elsewhere
        return ready >= wanted

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        if "main" not in wanted:
            return {}
        current = self.templates(obj)["main"]
        return {"spec": {"template": replace_maps(current, wanted["main"])}}

    def counts_patch(self, obj: Mapping[str, Any], counts: Mapping[str, int]) -> Obj:
        """A Job that accepts partial admission runs with parallelism = the admitted count,
        and a stop puts back the count it asked for; completions change only where the
        Job asks them to follow parallelism (as Kueue's RunWithPodSetsInfo)."""
        annotations = as_mapping(as_mapping(obj.get("metadata")).get("annotations"))
        if "main" not in counts or not _shrinks(annotations):
            return {}
        spec: Obj = {"parallelism": counts["main"]}
        follow = str(annotations.get(COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION, "")).lower()
        if follow in ("true", "1", "t"):
            spec["completions"] = counts["main"]
        return {"spec": spec}

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        return {"template": template_placement(as_mapping(obj.get("spec")).get("template"))}

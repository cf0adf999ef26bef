"""jobset.x-k8s.io JobSet: one podSet per replicatedJob, of replicas × each Job's pods."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from extender.core.api.parse import ManifestError, as_list, as_map
from extender.core.jobframework.adapter import (
    JobAdapter,
    Obj,
    PodSetTemplate,
    as_count,
    as_mapping,
    as_sequence,
)
from extender.core.jobframework.batch_job import job_finished, job_pod_count, non_negative
from extender.core.jobframework.topology import COMPLETION_INDEX, JOB_INDEX_LABEL


def _job_template(replicated_job: Any) -> Mapping[str, Any]:
    return as_mapping(as_mapping(as_mapping(replicated_job).get("template")).get("spec"))


class JobSetAdapter(JobAdapter):
    framework = "jobset.x-k8s.io/jobset"
    group, version, kind, plural = "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"
    children = (("batch", "Job"),)
    own_controller = "jobset.sigs.k8s.io/jobset-controller"

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        spec = as_map(obj.get("spec"), "spec")
        replicated = as_list(spec.get("replicatedJobs"), "spec.replicatedJobs")
        if not replicated:
            raise ManifestError("spec.replicatedJobs", "must list at least one replicatedJob")
        out = []
        for i, rjob in enumerate(replicated):
            path = f"spec.replicatedJobs[{i}]"
            rjob = as_map(rjob, path)
            name = rjob.get("name")
            if not name or not isinstance(name, str):
                raise ManifestError(f"{path}.name", "is required")
            replicas = non_negative(rjob, "replicas", path, 1)
            job_template = as_map(rjob.get("template"), f"{path}.template")
            job_spec = as_map(job_template.get("spec"), f"{path}.template.spec")
            template_path = f"{path}.template.spec.template"
            template = as_map(job_spec.get("template"), template_path)
            assert replicas is not None
            count = replicas * job_pod_count(job_spec, f"{path}.template.spec")
            out.append(
                PodSetTemplate(
                    name.lower(),
                    count,
                    template,
                    template_path,
                    pod_index_label=COMPLETION_INDEX,
                    sub_group_index_label=JOB_INDEX_LABEL,
                    sub_group_count=replicas,
                )
            )
        return out

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return {
            str(r.get("name", "")).lower(): as_mapping(_job_template(r).get("template"))
            for r in as_sequence(as_mapping(obj.get("spec")).get("replicatedJobs"))
            if isinstance(r, Mapping)
        }

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        return any(
            isinstance(r, Mapping) and (r.get("active") or 0) > 0
            for r in as_sequence(as_mapping(obj.get("status")).get("replicatedJobsStatus"))
        )

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        return job_finished(obj)

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        replicated = as_sequence(as_mapping(obj.get("spec")).get("replicatedJobs"))
        statuses = {
            r["name"]: r
            for r in as_sequence(as_mapping(obj.get("status")).get("replicatedJobsStatus"))
            if isinstance(r, Mapping) and isinstance(r.get("name"), str)
        }
        for rjob in replicated:
            if not isinstance(rjob, Mapping) or not isinstance(rjob.get("name"), str):
                return False
            status = as_mapping(statuses.get(rjob["name"]))
            done = as_count(status.get("ready")) + as_count(status.get("succeeded"))
            if done < as_count(rjob.get("replicas"), 1):
                return False
        return True

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        # A merge patch replaces a list whole: every replicatedJob goes out, changed or not.
        replicated = copy.deepcopy(
            list(as_sequence(as_mapping(obj.get("spec")).get("replicatedJobs")))
        )
        for rjob in replicated:
            name = str(rjob.get("name", "")).lower()
            if name in wanted:
                rjob.setdefault("template", {}).setdefault("spec", {})["template"] = wanted[name]
        return {"spec": {"replicatedJobs": replicated}}

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        return {"replicatedJobs": as_mapping(obj.get("spec")).get("replicatedJobs") or []}

"""Kubeflow's jobs (MPIJob, PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob) as Kueue reads them.

One podSet per replica type, in Kueue's order; suspended at spec.runPolicy.suspend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from extender.core.api.parse import ManifestError, as_map
from extender.core.jobframework.adapter import (
    JobAdapter,
    Obj,
    PodSetTemplate,
    as_mapping,
    as_sequence,
    condition_true,
    pointer,
    replace_maps,
    template_placement,
)
from extender.core.jobframework.batch_job import non_negative
from extender.core.jobframework.topology import GROUP_ANNOTATION, POD_INDEX_OFFSET

# The label the Kubeflow operators (and MPI's) number a replica type's pods with.
REPLICA_INDEX = "training.kubeflow.org/replica-index"


class ReplicaSpecsJob(JobAdapter):
    """A kind whose pods are a map of replica types to {replicas, template} (Kubeflow's
    ReplicaSpec): Kueue's KubeflowJob and MPIJob adapters read them alike."""

    replica_field: ClassVar[str]  # spec.<field>: pytorchReplicaSpecs, mpiReplicaSpecs, ...
    replica_types: ClassVar[tuple[str, ...]]  # Kueue's order (its OrderedReplicaTypes)
    suspend_path = ("spec", "runPolicy", "suspend")
    managed_by_path = ("spec", "runPolicy", "managedBy")
    own_controller = "kubeflow.org/training-operator"

    def _replica_specs(self, obj: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
        """(replica type, the key the job writes it with, its spec), in Kueue's order. The
        operators' defaulting camel-cases the key; Tower takes it in any case as they do."""
        specs = as_mapping(as_mapping(obj.get("spec")).get(self.replica_field))
        by_type = {key.lower(): key for key in specs if isinstance(key, str)}
        out = []
        for replica_type in self.replica_types:
            key = by_type.get(replica_type.lower())
            if key is not None and isinstance(specs[key], Mapping):
                out.append((replica_type, key, specs[key]))
        return out

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        spec = as_map(obj.get("spec"), "spec")
        field = f"spec.{self.replica_field}"
        specs = as_map(spec.get(self.replica_field), field)
        known = {t.lower() for t in self.replica_types}
        for key in specs:
            if str(key).lower() not in known:
                raise ManifestError(
                    f"{field}.{key}",
                    f"is not a replica type of {self.kind} ({', '.join(self.replica_types)})",
                )
        out = []
        for replica_type, key, _ in self._replica_specs(obj):
            path = f"{field}.{key}"
            replica = as_map(specs[key], path)
            count = non_negative(replica, "replicas", path, 1)  # Kueue: replicas, else 1
            template = as_map(replica.get("template"), f"{path}.template")
            assert count is not None
            out.append(
                PodSetTemplate(
                    replica_type.lower(),
                    count,
                    template,
                    f"{path}.template",
                    pod_index_label=REPLICA_INDEX,
                )
            )
        if not out:
            raise ManifestError(field, f"must have one of {', '.join(self.replica_types)}")
        return out

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        return {
            replica_type.lower(): as_mapping(replica.get("template"))
            for replica_type, _, replica in self._replica_specs(obj)
        }

    def pod_priority_class(self, obj: Mapping[str, Any]) -> Any:
        """runPolicy.schedulingPolicy.priorityClass, else the first replica type's pods' (in
        Kueue's order), as Kueue reads a Kubeflow job's priority."""
        run_policy = as_mapping(as_mapping(obj.get("spec")).get("runPolicy"))
        chosen = as_mapping(run_policy.get("schedulingPolicy")).get("priorityClass")
        if chosen:
            return chosen
        for template in self.templates(obj).values():
            value = as_mapping(template.get("spec")).get("priorityClassName")
            if value:
                return value
        return None

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        statuses = as_mapping(as_mapping(obj.get("status")).get("replicaStatuses"))
        return any(as_mapping(s).get("active") for s in statuses.values())

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        """The first Succeeded or Failed condition that is True; Kueue copies its message."""
        for entry in as_sequence(as_mapping(obj.get("status")).get("conditions")):
            if not isinstance(entry, Mapping) or entry.get("status") != "True":
                continue
            if entry.get("type") == "Succeeded":
                return "Succeeded", str(entry.get("message") or f"{self.kind} succeeded")
            if entry.get("type") == "Failed":
                return "Failed", str(entry.get("message") or f"{self.kind} failed")
        return None

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        return condition_true(obj, "Running") is not None

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        # The replica specs are a map: each template is patched where it is, nothing else.
        replicas: Obj = {}
        for replica_type, key, replica in self._replica_specs(obj):
            template = wanted.get(replica_type.lower())
            if template is None:
                continue
            change = replace_maps(as_mapping(replica.get("template")), template)
            if change:
                replicas[key] = {"template": change}
        return {"spec": {self.replica_field: replicas}} if replicas else {}

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        return {
            self.replica_field: {
                key: {"template": template_placement(replica.get("template"))}
                for _, key, replica in self._replica_specs(obj)
            }
        }


class MPIJob(ReplicaSpecsJob):
    framework = "kubeflow.org/mpijob"
    group, version, kind, plural = "kubeflow.org", "v2beta1", "MPIJob", "mpijobs"
    replica_field = "mpiReplicaSpecs"
    own_controller = "kubeflow.org/mpi-operator"
    replica_types = ("Launcher", "Worker")

    def create_ops(self, obj: Mapping[str, Any]) -> list[Obj]:
        """Kueue's webhook: when the launcher runs as a worker (index 0) and is not grouped
        with the workers, the workers (1..n) are ranked from their index less one."""
        spec = as_mapping(obj.get("spec"))
        if spec.get("runLauncherAsWorker") is not True:
            return []
        specs = {
            str(k).lower(): (k, v) for k, v in as_mapping(spec.get(self.replica_field)).items()
        }
        if "launcher" not in specs or "worker" not in specs:
            return []
        launcher = as_mapping(as_mapping(specs["launcher"][1]).get("template"))
        if GROUP_ANNOTATION in as_mapping(as_mapping(launcher.get("metadata")).get("annotations")):
            return []
        key, worker = specs["worker"]
        if not isinstance(as_mapping(worker).get("template"), Mapping):
            return []
        template = as_mapping(as_mapping(worker).get("template"))
        meta = as_mapping(template.get("metadata"))
        annotations = as_mapping(meta.get("annotations"))
        if annotations.get(POD_INDEX_OFFSET) == "1":
            return []
        path = ("spec", self.replica_field, str(key), "template", "metadata")
        value = {**meta, "annotations": {**annotations, POD_INDEX_OFFSET: "1"}}
        return [{"op": "add", "path": pointer(*path), "value": value}]


class PyTorchJob(ReplicaSpecsJob):
    framework = "kubeflow.org/pytorchjob"
    group, version, kind, plural = "kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"
    replica_field = "pytorchReplicaSpecs"
    replica_types = ("Master", "Worker")


class TFJob(ReplicaSpecsJob):
    framework = "kubeflow.org/tfjob"
    group, version, kind, plural = "kubeflow.org", "v1", "TFJob", "tfjobs"
    replica_field = "tfReplicaSpecs"
    replica_types = ("Chief", "Master", "PS", "Worker", "Evaluator")


class XGBoostJob(ReplicaSpecsJob):
    framework = "kubeflow.org/xgboostjob"
    group, version, kind, plural = "kubeflow.org", "v1", "XGBoostJob", "xgboostjobs"
    replica_field = "xgbReplicaSpecs"
    replica_types = ("Master", "Worker")


class PaddleJob(ReplicaSpecsJob):
    framework = "kubeflow.org/paddlejob"
    group, version, kind, plural = "kubeflow.org", "v1", "PaddleJob", "paddlejobs"
    replica_field = "paddleReplicaSpecs"
    replica_types = ("Master", "Worker")


class JAXJob(ReplicaSpecsJob):
    framework = "kubeflow.org/jaxjob"
    group, version, kind, plural = "kubeflow.org", "v1", "JAXJob", "jaxjobs"
    replica_field = "jaxReplicaSpecs"
    replica_types = ("Worker",)


ADAPTERS: tuple[JobAdapter, ...] = (
    MPIJob(),
    PyTorchJob(),
    TFJob(),
    XGBoostJob(),
    PaddleJob(),
    JAXJob(),
)

"""Kubeflow Trainer v2's TrainJob (trainer.kubeflow.org/v1alpha1) as Kueue v0.19.2 reads it.

Its podSets come from the TrainingRuntime or ClusterTrainingRuntime it references, rendered
as trainer v2.2.1 renders them: one podSet per replicatedJob of the runtime's JobSet
template, its count from the ML policy and `spec.trainer.numNodes`, the trainer's image,
command and `resourcesPerNode` on its `node` container. Admission is written into the
TrainJob's `spec.runtimePatches`, under Kueue's manager; a stop clears it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from extender.core.api.models import QUEUE_NAME_LABEL
from extender.core.api.parse import ManifestError, as_list, as_map
from extender.core.jobframework.adapter import (
    REFERENCED_KEY,
    JobAdapter,
    MissingReferenceError,
    Obj,
    PodSetInfo,
    PodSetTemplate,
    Reference,
    as_mapping,
    as_sequence,
    info_fields,
    merge,
)
from extender.core.jobframework.batch_job import non_negative
from extender.core.jobframework.topology import COMPLETION_INDEX, JOB_INDEX_LABEL

TRAINER = "trainer.kubeflow.org"
MANAGER = "kueue.x-k8s.io/manager"  # Kueue's entry in spec.runtimePatches
ANCESTOR_LABEL = f"{TRAINER}/trainjob-ancestor-step"
TRAINER_STEP = "trainer"
INITIALIZERS = ("dataset-initializer", "model-initializer")
NODE = "node"  # the container (and, for MPI, the replicatedJob) the trainer's settings go to
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
RUNTIME_KINDS = {
    "ClusterTrainingRuntime": "clustertrainingruntimes",
    "TrainingRuntime": "trainingruntimes",
}
POLICIES = ("torch", "mpi", "jax", "xgboost", "flux")
# What of the TrainJob itself sizes its podSets: pods (numNodes) and what each asks for.
SIZE_FIELDS = ("numNodes", "resourcesPerNode")


def _ancestor(rjob: Mapping[str, Any]) -> str | None:
    labels = as_mapping(as_mapping(as_mapping(rjob.get("template")).get("metadata")).get("labels"))
    value = labels.get(ANCESTOR_LABEL)
    return str(value) if value else None


def _merge_pod_patch(template: Obj, patch: Mapping[str, Any]) -> None:
    """A runtime patch's pod template onto a pod template, as trainer's strategic merge does
    it for what changes where pods go: labels, annotations and nodeSelector key by key,
    tolerations replaced, scheduling gates by name, affinity merged."""
    meta = as_mapping(patch.get("metadata"))
    for part in ("labels", "annotations"):
        if as_mapping(meta.get(part)):
            target = template.setdefault("metadata", {}).setdefault(part, {})
            target.update(as_mapping(meta.get(part)))
    spec = as_mapping(patch.get("spec"))
    pod = template.setdefault("spec", {})
    if as_mapping(spec.get("nodeSelector")):
        pod["nodeSelector"] = {**as_mapping(pod.get("nodeSelector")), **spec["nodeSelector"]}
    if "tolerations" in spec:
        pod["tolerations"] = copy.deepcopy(list(as_sequence(spec.get("tolerations"))))
    if as_sequence(spec.get("schedulingGates")):
        gates = {
            g.get("name"): g
            for g in as_sequence(pod.get("schedulingGates"))
            if isinstance(g, Mapping)
        }
        for gate in as_sequence(spec.get("schedulingGates")):
            if isinstance(gate, Mapping):
                gates[gate.get("name")] = dict(gate)
        pod["schedulingGates"] = list(gates.values())
    if as_mapping(spec.get("affinity")):
        pod["affinity"] = merge(as_mapping(pod.get("affinity")), spec["affinity"])
    if spec.get("serviceAccountName"):
        pod["serviceAccountName"] = spec["serviceAccountName"]


class TrainJob(JobAdapter):
    framework = "trainer.kubeflow.org/trainjob"
    group, version, kind, plural = TRAINER, "v1alpha1", "TrainJob", "trainjobs"
    children = (("jobset.x-k8s.io", "JobSet"),)  # trainer's JobSet: the TrainJob is queued
    referenced_kinds = tuple((TRAINER, kind, plural) for kind, plural in RUNTIME_KINDS.items())
    own_controller = "trainer.kubeflow.org/trainjob-controller"

    # ----- the runtime ----------------------------------------------------------------------

    def references(self, obj: Mapping[str, Any]) -> tuple[Reference, ...]:
        ref = as_map(
            as_map(obj.get("spec"), "spec").get("runtimeRef"), "spec.runtimeRef", required=True
        )
        name = ref.get("name")
        if not name or not isinstance(name, str):
            raise ManifestError("spec.runtimeRef.name", "is required")
        group = ref.get("apiGroup") or TRAINER
        kind = ref.get("kind") or "ClusterTrainingRuntime"
        if group != TRAINER or kind not in RUNTIME_KINDS:
            raise ManifestError(
                "spec.runtimeRef",
                f"unsupported runtime: {kind}.{group} (a ClusterTrainingRuntime or TrainingRuntime "
                f"of {TRAINER})",
            )
        namespace = None
        if kind == "TrainingRuntime":
            namespace = str(as_mapping(obj.get("metadata")).get("namespace") or "default")
        return (Reference(TRAINER, "v1alpha1", kind, RUNTIME_KINDS[kind], namespace, name),)

    def _runtime(self, obj: Mapping[str, Any]) -> tuple[Reference, Mapping[str, Any]]:
        [ref] = self.references(obj)
        referenced = obj.get(REFERENCED_KEY)
        runtime = referenced.get(ref) if isinstance(referenced, Mapping) else None
        if not isinstance(runtime, Mapping):
            raise MissingReferenceError(
                "spec.runtimeRef",
                f"{ref.describe()} does not exist: the TrainJob is queued once it is created",
            )
        return ref, runtime

    def _rendered(self, obj: Mapping[str, Any]) -> list[tuple[str, int, Obj, str, int]]:
        """(podSet name, pods, pod template, where it comes from, Jobs) per replicatedJob of
        the runtime, in its order, with the TrainJob's settings and runtime patches applied."""
        ref, runtime = self._runtime(obj)
        where = ref.describe()
        spec = as_map(runtime.get("spec"), f"{where}: spec")
        jobset = as_map(
            as_map(spec.get("template"), f"{where}: spec.template").get("spec"),
            f"{where}: spec.template.spec",
        )
        replicated = as_list(
            jobset.get("replicatedJobs"), f"{where}: spec.template.spec.replicatedJobs"
        )
        if not replicated:
            raise ManifestError("spec.runtimeRef", f"{where} has no replicatedJobs")
        policy = as_mapping(spec.get("mlPolicy"))
        source = next((p for p in POLICIES if p in policy), None)
        job_spec = as_map(obj.get("spec"), "spec")
        trainer = as_map(job_spec.get("trainer"), "spec.trainer")
        num_nodes = non_negative(trainer, "numNodes", "spec.trainer", None)
        mpi = as_mapping(policy.get("mpi"))
        launcher_as_node = source == "mpi" and mpi.get("runLauncherAsNode") is True
        resources = as_mapping(trainer.get("resourcesPerNode"))
        patches = [
            p
            for p in as_sequence(job_spec.get("runtimePatches"))
            if isinstance(p, Mapping) and p.get("manager") != MANAGER  # Kueue's own: admission
        ]
        coscheduling = "coscheduling" in as_mapping(spec.get("podGroupPolicy"))
        name = str(as_mapping(obj.get("metadata")).get("name") or "")

        out = []
        for i, rjob in enumerate(replicated):
            path = f"{where}: spec.template.spec.replicatedJobs[{i}]"
            rjob = as_map(rjob, path)
            job_name = rjob.get("name")
            if not job_name or not isinstance(job_name, str):
                raise ManifestError(f"{path}.name", "is required")
            ancestor = _ancestor(rjob)
            job_template = as_mapping(as_mapping(rjob.get("template")).get("spec"))
            template = copy.deepcopy(
                dict(as_map(job_template.get("template"), f"{path}.template.spec.template"))
            )
            pods = non_negative(job_template, "parallelism", f"{path}.template.spec", 1) or 1
            if ancestor == TRAINER_STEP and policy:
                pods = non_negative(policy, "numNodes", f"{where}: spec.mlPolicy", 1) or 1
            if num_nodes is not None:
                if source == "mpi" and job_name == NODE:
                    pods = max(num_nodes - 1, 1) if launcher_as_node else num_nodes
                elif source != "mpi" and ancestor == TRAINER_STEP:
                    pods = num_nodes
            replicas = (
                1
                if ancestor in (TRAINER_STEP, *INITIALIZERS)
                else (non_negative(rjob, "replicas", path, 1) or 1)
            )
            for patch in patches:
                runtime_spec = as_mapping(
                    as_mapping(patch.get("trainingRuntimeSpec")).get("template")
                )
                for entry in as_sequence(
                    as_mapping(runtime_spec.get("spec")).get("replicatedJobs")
                ):
                    if isinstance(entry, Mapping) and entry.get("name") == job_name:
                        pod_patch = as_mapping(
                            as_mapping(as_mapping(entry.get("template")).get("spec")).get(
                                "template"
                            )
                        )
                        _merge_pod_patch(template, pod_patch)
            if ancestor == TRAINER_STEP or (launcher_as_node and job_name == NODE):
                self._apply_trainer(
                    template, trainer, resources, ancestor == TRAINER_STEP, where, job_name
                )
            if coscheduling:
                template.setdefault("metadata", {}).setdefault("labels", {})[POD_GROUP_LABEL] = name
            where_from = f"{path}.template.spec.template"
            out.append((job_name, replicas * pods, template, where_from, replicas))
        return out

    @staticmethod
    def _apply_trainer(
        template: Obj,
        trainer: Mapping[str, Any],
        resources: Mapping[str, Any],
        ancestor: bool,
        where: str,
        job_name: str,
    ) -> None:
        """spec.trainer's image, command and args (the trainer's job only) and its
        resourcesPerNode, on container `node`: trainer requires that container, and a
        TrainJob whose settings would reach no pod is refused rather than run without them."""
        containers = [
            c
            for c in as_sequence(as_mapping(template.get("spec")).get("containers"))
            if isinstance(c, dict)
        ]
        node = next((c for c in containers if c.get("name") == NODE), None)
        sets = [k for k in ("image", "command", "args") if trainer.get(k) and ancestor]
        if resources.get("requests") or resources.get("limits"):
            sets.append("resourcesPerNode")
        if node is None:
            if sets:
                raise ManifestError(
                    f"spec.trainer.{sets[0]}",
                    f"reaches no pod: the replicatedJob {job_name!r} of {where} has no container "
                    f"named {NODE!r}, which Kubeflow Trainer requires",
                )
            return
        if ancestor:
            for key in ("image", "command", "args"):
                if trainer.get(key):
                    node[key] = copy.deepcopy(trainer[key])
        if resources.get("requests") or resources.get("limits"):
            node["resources"] = copy.deepcopy(dict(resources))

    def check_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        """A queued TrainJob keeps its size. Its podSets are rendered from its runtime, which
        neither the webhook nor the watch cache reads, so a new size could not be compared
        with its admission: it would run at the new size under the old one. Refused instead,
        in every state, with the way to scale it."""
        labels = as_mapping(as_mapping(new.get("metadata")).get("labels"))
        if not labels.get(QUEUE_NAME_LABEL):
            return
        before = as_mapping(as_mapping(old.get("spec")).get("trainer"))
        after = as_mapping(as_mapping(new.get("spec")).get("trainer"))
        for key in SIZE_FIELDS:
            if before.get(key) != after.get(key):
                was, now = _said(before.get(key)), _said(after.get(key))
                raise ManifestError(
                    f"spec.trainer.{key}",
                    f"cannot change from {was} to {now} on a queued TrainJob: its podSets "
                    "are read from its runtime once, when it is queued, and its admission "
                    "would not follow; delete it and create it again at the new size",
                )

    # ----- reading --------------------------------------------------------------------------

    def pod_sets(self, obj: Mapping[str, Any]) -> list[PodSetTemplate]:
        # Kueue reads the podSets of the JobSet the trainer makes: its pods are ranked as a
        # JobSet's (completion index within the job index), for the topology ungater.
        return [
            PodSetTemplate(n, c, t, p, pod_index_label=COMPLETION_INDEX,
                           sub_group_index_label=JOB_INDEX_LABEL, sub_group_count=jobs)
            for n, c, t, p, jobs in self._rendered(obj)
        ]  # fmt: skip

    def templates(self, obj: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        try:
            return {n: t for n, _, t, _, _ in self._rendered(obj)}
        except ManifestError:
            return {}  # without its runtime no template is known; a start needs none

    def is_active(self, obj: Mapping[str, Any]) -> bool:
        return any(
            isinstance(s, Mapping) and (s.get("active") or 0) > 0
            for s in as_sequence(as_mapping(obj.get("status")).get("jobsStatus"))
        )

    def finished(self, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        """Trainer's Complete or Failed condition (copied from its JobSet's), with its message."""
        for entry in as_sequence(as_mapping(obj.get("status")).get("conditions")):
            if not isinstance(entry, Mapping) or entry.get("status") != "True":
                continue
            if entry.get("type") == "Complete":
                return "Succeeded", str(entry.get("message") or "TrainJob completed")
            if entry.get("type") == "Failed":
                return "Failed", str(entry.get("message") or "TrainJob failed")
        return None

    def pods_ready(self, obj: Mapping[str, Any]) -> bool:
        """Every Job of its JobSet that is running has its pods ready (Kueue compares the
        runtime's replicas with ready + succeeded Jobs; the runtime is not read again here)."""
        statuses = [
            s
            for s in as_sequence(as_mapping(obj.get("status")).get("jobsStatus"))
            if isinstance(s, Mapping)
        ]
        if not statuses:
            return False
        return all(
            (s.get("ready") or 0) >= (s.get("active") or 0)
            and (s.get("ready") or 0) + (s.get("succeeded") or 0) > 0
            for s in statuses
        )

    # ----- writing --------------------------------------------------------------------------

    def create_ops(self, obj: Mapping[str, Any]) -> list[Obj]:
        """Kueue's webhook adds its entry to spec.runtimePatches at create, empty: trainer's
        own webhook lets Kueue's manager fill it later only while the job is suspended, and
        only when it exists (trainjob_webhook.go Default). The list goes whole (`add`
        replaces it), so the patch applies twice the same."""
        current = as_sequence(as_mapping(obj.get("spec")).get("runtimePatches"))
        if any(isinstance(p, Mapping) and p.get("manager") == MANAGER for p in current):
            return []
        entry = {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}
        value = [copy.deepcopy(p) for p in current] + [entry]
        if not isinstance(obj.get("spec"), Mapping):
            return [{"op": "add", "path": "/spec", "value": {"runtimePatches": value}}]
        return [{"op": "add", "path": "/spec/runtimePatches", "value": value}]

    def _patches_with(self, obj: Mapping[str, Any], replicated: list[Obj] | None) -> list[Obj]:
        """spec.runtimePatches with Kueue's entry set to these replicatedJobs (none: emptied);
        the list goes out whole, every other manager's entry as it is."""
        current = [
            copy.deepcopy(dict(p))
            for p in as_sequence(as_mapping(obj.get("spec")).get("runtimePatches"))
            if isinstance(p, Mapping)
        ]
        spec: Obj = {"replicatedJobs": replicated} if replicated else {}
        ours = next((p for p in current if p.get("manager") == MANAGER), None)
        if ours is None:
            ours = {"manager": MANAGER}
            current.append(ours)
        ours["trainingRuntimeSpec"] = {"template": {"spec": spec}}
        return current

    def start_patch(self, obj: Mapping[str, Any], infos: Mapping[str, PodSetInfo]) -> Obj:
        replicated = []
        for name, info in infos.items():
            fields = info_fields(info)
            meta = {k: fields[k] for k in ("labels", "annotations") if k in fields}
            pod = {k: v for k, v in fields.items() if k not in meta}
            template: Obj = {}
            if meta:
                template["metadata"] = meta
            if pod:
                template["spec"] = pod
            replicated.append({"name": name, "template": {"spec": {"template": template}}})
        patches = self._patches_with(obj, replicated)
        return merge(self.suspend_patch(False), {"spec": {"runtimePatches": patches}})

    def restore_patch(
        self,
        obj: Mapping[str, Any],
        originals: Mapping[str, Mapping[str, Any]],
        counts: Mapping[str, int],
    ) -> Obj:
        return {"spec": {"runtimePatches": self._patches_with(obj, None)}}

    def templates_patch(self, obj: Mapping[str, Any], wanted: Mapping[str, Obj]) -> Obj:
        return {}  # the runtime's templates are trainer's: admission goes in runtimePatches

    def kept(self, obj: Mapping[str, Any]) -> Obj:
        return {"runtimePatches": as_mapping(obj.get("spec")).get("runtimePatches") or []}

    def worker_spec(self, spec: Obj) -> Obj:
        # The manager's admission is not the worker's: its Tower writes its own entry.
        patches = [
            p
            for p in as_sequence(spec.get("runtimePatches"))
            if not (isinstance(p, Mapping) and p.get("manager") == MANAGER)
        ]
        if patches:
            spec["runtimePatches"] = patches
        else:
            spec.pop("runtimePatches", None)
        return spec


def _said(value: Any) -> str:
    """A size field as a user wrote it, for a message (unset: its runtime's)."""
    if value is None:
        return "unset"
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


ADAPTERS: tuple[JobAdapter, ...] = (TrainJob(),)

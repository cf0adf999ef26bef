"""The operators Kueue's extended e2e cases run (JobSet, MPI, Kubeflow training, Trainer,
AppWrapper), played by a thread of the test: their CRDs are installed, their controllers are not.

Each player does what its operator does with the object's spec, and no more: it makes the
children (Jobs, pods, a JobSet, the wrapped objects) once the object is unsuspended, with the
pod templates as the object holds them (so the placement Tower wrote reaches the pods), takes
them down when it is suspended, and writes the status the operator writes from its children.
The real job and deployment controllers, the scheduler and the node do the rest.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from extender.core.jobframework.adapter import workload_name
from tests.e2e.conftest import kubectl
from tests.e2e.kueue.util import (
    KUEUE,
    LONG_TIMEOUT,
    MEDIUM_TIMEOUT,
    ROOT,
    Cluster,
    Tower,
    V,
    end_container,
    eventually,
    gone,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
)

JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
MPIJOB = ("kubeflow.org", "v2beta1", "mpijobs")
PYTORCHJOB = ("kubeflow.org", "v1", "pytorchjobs")
JAXJOB = ("kubeflow.org", "v1", "jaxjobs")
TRAINJOB = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
APPWRAPPER = ("workload.codeflare.dev", "v1beta2", "appwrappers")
RUNTIMES = ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes")

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
KUBEFLOW_JOB = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
APPWRAPPER_LABEL = "workload.codeflare.dev/appwrapper"
KUEUE_MANAGER = "kueue.x-k8s.io/manager"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def owner(obj: dict) -> dict:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
            "name": obj["metadata"]["name"], "uid": obj["metadata"]["uid"],
            "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def job_condition(job: Any, kind: str) -> bool:
    return any(c.type == kind and c.status == "True" for c in job.status.conditions or [])


def set_condition(
    conditions: list[dict], kind: str, status: str, reason: str, message: str
) -> None:
    """One condition set in place, its transition time kept while its status holds."""
    for c in conditions:
        if c["type"] == kind:
            if c["status"] != status:
                c.update(status=status, lastTransitionTime=now())
            c.update(reason=reason, message=message, lastUpdateTime=now())
            return
    conditions.append({"type": kind, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now(), "lastUpdateTime": now()})  # fmt: skip


class Operators:
    """One thread that plays every operator in one namespace, twice a second, until stopped."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.cluster = cluster
        self.ns = namespace
        self.custom = cluster.custom
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.players: list[tuple[tuple[str, str, str], Callable[[dict], None]]] = [
            (JOBSET, self.jobset),
            (MPIJOB, self.mpijob),
            (PYTORCHJOB, lambda o: self.kubeflow(o, "pytorchReplicaSpecs", ("Master",))),
            (JAXJOB, lambda o: self.kubeflow(o, "jaxReplicaSpecs", ("Worker",))),
            (TRAINJOB, self.trainjob),
            (APPWRAPPER, self.appwrapper),
        ]
        self.thread = threading.Thread(target=self._run, name="operators", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)

    def _run(self) -> None:
        while not self.stopping.wait(0.5):
            for (group, version, plural), play in self.players:
                try:
                    items = self.custom.list_namespaced_custom_object(
                        group, version, self.ns, plural
                    )["items"]
                except client.ApiException:
                    continue  # the CRD is not installed, or the namespace is going
                for obj in items:
                    if obj["metadata"].get("deletionTimestamp"):
                        continue
                    try:
                        play(obj)
                    except client.ApiException as err:
                        if err.status not in (404, 409):  # a race the next pass settles
                            self.errors.append(f"{plural}/{obj['metadata']['name']}: {err}")
                    except Exception as err:  # said at the end of the test
                        self.errors.append(f"{plural}/{obj['metadata']['name']}: {err!r}")

    def _status(self, gvp: tuple[str, str, str], obj: dict, status: dict) -> None:
        if all((obj.get("status") or {}).get(k) == v for k, v in status.items()):
            return
        group, version, plural = gvp
        self.custom.patch_namespaced_custom_object_status(
            group, version, self.ns, plural, obj["metadata"]["name"], {"status": status}
        )

    def _jobs(self, selector: str) -> list[Any]:
        return list(self.cluster.batch.list_namespaced_job(self.ns, label_selector=selector).items)

    def _pods(self, selector: str) -> list[Any]:
        return list(self.cluster.core.list_namespaced_pod(self.ns, label_selector=selector).items)

    def _create_job(self, body: dict) -> None:
        try:
            self.cluster.batch.create_namespaced_job(self.ns, body)
        except client.ApiException as err:
            if err.status != 409:  # made by an earlier pass
                raise

    def _delete_jobs(self, jobs: list[Any]) -> None:
        for job in jobs:
            with contextlib.suppress(client.ApiException):
                self.cluster.batch.delete_namespaced_job(
                    job.metadata.name, self.ns, propagation_policy="Background"
                )

    def _delete_pods(self, pods: list[Any]) -> None:
        for pod in pods:
            with contextlib.suppress(client.ApiException):
                self.cluster.core.delete_namespaced_pod(pod.metadata.name, self.ns)

    # ----- JobSet (jobset v0.12's controller) -------------------------------------------------

    def jobset(self, js: dict) -> None:
        name = js["metadata"]["name"]
        spec = js.get("spec") or {}
        jobs = self._jobs(f"{JOBSET_NAME}={name}")
        status = dict(js.get("status") or {})
        conditions = copy.deepcopy(status.get("conditions") or [])
        if any(c["type"] in ("Completed", "Failed") and c["status"] == "True" for c in conditions):
            return
        if spec.get("suspend"):
            # The controller suspends its Jobs; the job controller then removes their pods.
            self._delete_jobs(jobs)
            set_condition(conditions, "Suspended", "True", "SuspendedJobs", "jobset is suspended")
            self._status(JOBSET, js, {"conditions": conditions})
            return
        have = {j.metadata.name for j in jobs}
        for rjob in spec.get("replicatedJobs") or []:
            for index in range(int(rjob.get("replicas", 1))):
                job_name = f"{name}-{rjob['name']}-{index}"
                if job_name in have:
                    continue
                labels = {JOBSET_NAME: name, REPLICATED_JOB: rjob["name"], JOB_INDEX: str(index)}
                template = copy.deepcopy(rjob["template"])
                job_spec = template.get("spec") or {}
                pod_meta = job_spec.setdefault("template", {}).setdefault("metadata", {})
                pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
                # JobSet's defaulting webhook: a pod template without one restarts OnFailure.
                pod_spec = job_spec["template"].setdefault("spec", {})
                pod_spec["restartPolicy"] = pod_spec.get("restartPolicy") or "OnFailure"
                meta = template.get("metadata") or {}
                self._create_job({
                    "apiVersion": "batch/v1", "kind": "Job",
                    "metadata": {"name": job_name, "namespace": self.ns,
                                 "labels": {**(meta.get("labels") or {}), **labels},
                                 "annotations": dict(meta.get("annotations") or {}),
                                 "ownerReferences": [owner(js)]},
                    "spec": {**job_spec, "suspend": False},
                })  # fmt: skip
        statuses = []
        all_done = bool(spec.get("replicatedJobs"))
        any_failed = False
        for rjob in spec.get("replicatedJobs") or []:
            mine = [
                j for j in jobs if (j.metadata.labels or {}).get(REPLICATED_JOB) == rjob["name"]
            ]
            done = sum(1 for j in mine if job_condition(j, "Complete"))
            failed = sum(1 for j in mine if job_condition(j, "Failed"))
            ready = sum(1 for j in mine if (j.status.ready or 0) > 0)
            statuses.append({"name": rjob["name"], "ready": ready, "succeeded": done,
                             "failed": failed, "active": len(mine) - done - failed,
                             "suspended": 0})  # fmt: skip
            all_done = all_done and done == int(rjob.get("replicas", 1))
            any_failed = any_failed or bool(failed)
        set_condition(conditions, "Suspended", "False", "ResumeJobs", "jobset is resumed")
        out: dict[str, Any] = {"replicatedJobsStatus": statuses, "conditions": conditions}
        # JobSet writes its end twice: a condition, and status.terminalState (which
        # Kueue's e2e cases and `kubectl get jobset` read).
        if any_failed:
            set_condition(conditions, "Failed", "True", "FailedJobs",
                          "jobset failed due to one or more job failures")  # fmt: skip
            out["terminalState"] = "Failed"
        elif all_done:
            set_condition(conditions, "Completed", "True", "AllJobsCompleted",
                          "jobset completed successfully")  # fmt: skip
            out["terminalState"] = "Completed"
        self._status(JOBSET, js, out)

    # ----- Kubeflow training-operator v1.9 (PyTorchJob, JAXJob) ---------------------------------

    def _replica_pods(self, job: dict, field: str, kind: str) -> tuple[list[Any], bool]:
        """The job's pods, made where missing from each replica type's template."""
        name = job["metadata"]["name"]
        pods = self._pods(f"{KUBEFLOW_JOB}={name}")
        have = {p.metadata.name for p in pods}
        made = False
        for replica_type, replica in (job["spec"].get(field) or {}).items():
            for index in range(int(replica.get("replicas", 1))):
                pod_name = f"{name}-{replica_type.lower()}-{index}"
                if pod_name in have:
                    continue
                template = copy.deepcopy(replica.get("template") or {})
                meta = template.get("metadata") or {}
                labels = {**(meta.get("labels") or {}), KUBEFLOW_JOB: name,
                          REPLICA_TYPE: replica_type.lower(), REPLICA_INDEX: str(index)}  # fmt: skip
                pod_spec = template.get("spec") or {}
                policy = replica.get("restartPolicy") or pod_spec.get("restartPolicy") or "Never"
                pod_spec["restartPolicy"] = "Never" if policy == "ExitCode" else policy
                with contextlib.suppress(client.ApiException):
                    self.cluster.core.create_namespaced_pod(self.ns, {
                        "apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": pod_name, "labels": labels,
                                     "annotations": dict(meta.get("annotations") or {}),
                                     "ownerReferences": [owner(job)]},
                        "spec": pod_spec,
                    })  # fmt: skip
                made = True
        return pods, made

    def kubeflow(self, job: dict, field: str, primary: tuple[str, ...]) -> None:
        gvp = {"pytorchReplicaSpecs": PYTORCHJOB, "jaxReplicaSpecs": JAXJOB}[field]
        kind = job["kind"]
        name = job["metadata"]["name"]
        conditions = copy.deepcopy((job.get("status") or {}).get("conditions") or [])
        if any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conditions):
            return
        set_condition(conditions, "Created", "True", f"{kind}Created", f"{kind} {name} is created.")
        if (job["spec"].get("runPolicy") or {}).get("suspend"):
            self._delete_pods(self._pods(f"{KUBEFLOW_JOB}={name}"))
            set_condition(conditions, "Running", "False", f"{kind}Suspended", "suspended")
            set_condition(conditions, "Suspended", "True", f"{kind}Suspended", f"{kind} suspended")
            self._status(gvp, job, {"conditions": conditions, "replicaStatuses": {}})
            return
        pods, made = self._replica_pods(job, field, kind)
        if made:
            return  # their status is read on the next pass
        statuses: dict[str, dict] = {}
        for replica_type in job["spec"].get(field) or {}:
            mine = [p for p in pods if p.metadata.labels.get(REPLICA_TYPE) == replica_type.lower()]
            statuses[replica_type] = {
                "active": sum(1 for p in mine if p.status.phase in ("Pending", "Running")),
                "succeeded": sum(1 for p in mine if p.status.phase == "Succeeded"),
                "failed": sum(1 for p in mine if p.status.phase == "Failed"),
            }
            statuses[replica_type] = {k: v for k, v in statuses[replica_type].items() if v}
        if any(s.get("failed") for s in statuses.values()):
            set_condition(conditions, "Running", "False", f"{kind}Failed", "a replica failed")
            set_condition(conditions, "Failed", "True", f"{kind}Failed", f"{kind} {name} failed")
        elif all(
            statuses.get(t, {}).get("succeeded") == int(s.get("replicas", 1))
            for t, s in (job["spec"].get(field) or {}).items()
            if t in primary
        ):
            set_condition(conditions, "Running", "False", f"{kind}Succeeded", "completed")
            set_condition(conditions, "Succeeded", "True", f"{kind}Succeeded",
                          f"{kind} {self.ns}/{name} successfully completed.")  # fmt: skip
        elif pods and all(p.status.phase == "Running" for p in pods):
            set_condition(conditions, "Suspended", "False", f"{kind}Resumed", "resumed")
            set_condition(conditions, "Running", "True", f"{kind}Running",
                          f"{kind} {self.ns}/{name} is running.")  # fmt: skip
        self._status(gvp, job, {"conditions": conditions, "replicaStatuses": statuses})

    # ----- MPIJob (mpi-operator v0.8's v2beta1 controller) -----------------------------------

    def mpijob(self, job: dict) -> None:
        """Workers are pods, the launcher a batch Job, as mpi-operator v2 makes them."""
        name = job["metadata"]["name"]
        specs = job["spec"].get("mpiReplicaSpecs") or {}
        conditions = copy.deepcopy((job.get("status") or {}).get("conditions") or [])
        if any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conditions):
            return
        set_condition(conditions, "Created", "True", "MPIJobCreated", f"MPIJob {name} is created.")
        workers = self._pods(f"{KUBEFLOW_JOB}={name},{REPLICA_TYPE}=worker")
        launchers = self._jobs(f"{KUBEFLOW_JOB}={name},{REPLICA_TYPE}=launcher")
        if (job["spec"].get("runPolicy") or {}).get("suspend"):
            self._delete_pods(workers)
            self._delete_jobs(launchers)
            set_condition(conditions, "Running", "False", "MPIJobSuspended", "suspended")
            set_condition(conditions, "Suspended", "True", "MPIJobSuspended", "MPIJob suspended")
            self._status(MPIJOB, job, {"conditions": conditions, "replicaStatuses": {}})
            return
        have = {p.metadata.name for p in workers}
        worker = specs.get("Worker") or {}
        for index in range(int(worker.get("replicas", 0)) if worker else 0):
            pod_name = f"{name}-worker-{index}"
            if pod_name in have:
                continue
            template = copy.deepcopy(worker.get("template") or {})
            pod_spec = template.get("spec") or {}
            pod_spec["restartPolicy"] = pod_spec.get("restartPolicy") or "Never"
            labels = {**((template.get("metadata") or {}).get("labels") or {}),
                      KUBEFLOW_JOB: name, REPLICA_TYPE: "worker", REPLICA_INDEX: str(index)}  # fmt: skip
            with contextlib.suppress(client.ApiException):
                self.cluster.core.create_namespaced_pod(self.ns, {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod_name, "labels": labels,
                                 "ownerReferences": [owner(job)]},
                    "spec": pod_spec})  # fmt: skip
        launcher = specs.get("Launcher") or {}
        if not launchers and launcher:
            template = copy.deepcopy(launcher.get("template") or {})
            pod_spec = template.setdefault("spec", {})
            pod_spec["restartPolicy"] = pod_spec.get("restartPolicy") or "Never"
            labels = {KUBEFLOW_JOB: name, REPLICA_TYPE: "launcher"}
            meta = template.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
            self._create_job({
                "apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": f"{name}-launcher", "labels": labels,
                             "ownerReferences": [owner(job)]},
                "spec": {"backoffLimit": 6, "template": template},
            })  # fmt: skip
        statuses: dict[str, dict] = {}
        if launchers:
            state = launchers[0].status
            statuses["Launcher"] = {k: v for k, v in {"active": state.active or 0,
                                    "succeeded": state.succeeded or 0,
                                    "failed": state.failed or 0}.items() if v}  # fmt: skip
        running = sum(1 for p in workers if p.status.phase == "Running")
        statuses["Worker"] = {"active": running} if running else {}
        if launchers and job_condition(launchers[0], "Complete"):
            set_condition(conditions, "Running", "False", "MPIJobSucceeded", "completed")
            set_condition(conditions, "Succeeded", "True", "MPIJobSucceeded",
                          f"MPIJob {self.ns}/{name} successfully completed.")  # fmt: skip
            self._delete_pods(workers)  # mpi-operator's cleanPodPolicy Running
        elif launchers and job_condition(launchers[0], "Failed"):
            set_condition(conditions, "Failed", "True", "MPIJobFailed", f"MPIJob {name} failed")
        elif launchers and (launchers[0].status.active or 0):
            set_condition(conditions, "Suspended", "False", "MPIJobResumed", "resumed")
            set_condition(conditions, "Running", "True", "MPIJobRunning",
                          f"MPIJob {self.ns}/{name} is running.")  # fmt: skip
        self._status(MPIJOB, job, {"conditions": conditions, "replicaStatuses": statuses})

    # ----- TrainJob (Kubeflow Trainer v2.2's controller) -------------------------------------

    def _rendered_jobset(self, tj: dict) -> dict:
        """The JobSet trainer makes of the TrainJob's runtime: the trainer's image, command,
        args and resourcesPerNode on container `node` of the trainer step, numNodes pods, and
        each runtime patch's pod template merged in (Kueue's: its nodeSelector)."""
        ref = tj["spec"]["runtimeRef"]
        runtime = self.custom.get_cluster_custom_object(*RUNTIMES, ref["name"])
        trainer = tj["spec"].get("trainer") or {}
        nodes = trainer.get("numNodes") or runtime["spec"].get("mlPolicy", {}).get("numNodes", 1)
        js_spec = copy.deepcopy(runtime["spec"]["template"]["spec"])
        patches = {
            r["name"]: ((r.get("template") or {}).get("spec") or {}).get("template") or {}
            for p in tj["spec"].get("runtimePatches") or []
            for r in (((p.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec")
                      or {}).get("replicatedJobs") or []
        }  # fmt: skip
        for rjob in js_spec.get("replicatedJobs") or []:
            job_spec = rjob["template"]["spec"]
            pod = job_spec["template"]
            labels = (rjob["template"].get("metadata") or {}).get("labels") or {}
            if labels.get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer":
                job_spec["parallelism"] = job_spec["completions"] = nodes
                for container in pod["spec"]["containers"]:
                    if container["name"] == "node":
                        for key in ("image", "command", "args"):
                            if trainer.get(key):
                                container[key] = trainer[key]
                        if trainer.get("resourcesPerNode"):
                            container["resources"] = trainer["resourcesPerNode"]
            patch = patches.get(rjob["name"]) or {}
            for key in ("nodeSelector", "tolerations"):
                value = (patch.get("spec") or {}).get(key)
                if value:
                    pod["spec"][key] = value
            for key in ("labels", "annotations"):
                value = (patch.get("metadata") or {}).get(key)
                if value:
                    pod.setdefault("metadata", {}).setdefault(key, {}).update(value)
        return js_spec

    def trainjob(self, tj: dict) -> None:
        name = tj["metadata"]["name"]
        conditions = copy.deepcopy((tj.get("status") or {}).get("conditions") or [])
        if any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions):
            return
        group, version, plural = JOBSET
        try:
            js = self.custom.get_namespaced_custom_object(group, version, self.ns, plural, name)
        except client.ApiException as err:
            if err.status != 404:
                raise
            js = None
        suspend = bool(tj["spec"].get("suspend"))
        if js is None:
            if suspend:
                return  # trainer makes the JobSet suspended; nothing runs until it resumes
            spec = {**self._rendered_jobset(tj), "suspend": False}
            self.custom.create_namespaced_custom_object(group, version, self.ns, plural, {
                "apiVersion": f"{group}/{version}", "kind": "JobSet",
                "metadata": {"name": name, "ownerReferences": [owner(tj)]}, "spec": spec,
            })  # fmt: skip
            return
        if bool((js.get("spec") or {}).get("suspend")) != suspend:
            patch: dict[str, Any] = {"spec": {"suspend": suspend}}
            if not suspend:
                patch["spec"]["replicatedJobs"] = self._rendered_jobset(tj)["replicatedJobs"]
            self.custom.patch_namespaced_custom_object(group, version, self.ns, plural, name, patch)
        done = {c["type"]: c for c in (js.get("status") or {}).get("conditions") or []
                if c["status"] == "True"}  # fmt: skip
        if "Completed" in done:
            set_condition(conditions, "Complete", "True", "JobsCompleted",
                          done["Completed"].get("message") or "")  # fmt: skip
        elif "Failed" in done:
            set_condition(conditions, "Failed", "True", "JobsFailed", done["Failed"]["message"])
        set_condition(conditions, "Suspended", "True" if suspend else "False",
                      "Suspended" if suspend else "Resumed", "")  # fmt: skip
        self._status(TRAINJOB, tj, {"conditions": conditions})

    # ----- AppWrapper (the appwrapper v1.2 controller) -----------------------------------------

    def appwrapper(self, aw: dict) -> None:
        status = aw.get("status") or {}
        if status.get("phase") in ("Succeeded", "Failed"):
            return
        components = aw["spec"].get("components") or []
        if aw["spec"].get("suspend"):
            for component in components:
                self._delete_component(component["template"])
            if status.get("phase") not in (None, "", "Suspended"):
                self._status(APPWRAPPER, aw, {"phase": "Suspended"})
            return
        for component in components:
            self._deploy(aw, component)
        done = all(self._component_succeeded(c["template"]) for c in components)
        phase = "Succeeded" if components and done else "Running"
        conditions = [{"type": t, "status": "True", "reason": "Deployed", "message": "",
                       "lastTransitionTime": now()}
                      for t in ("QuotaReserved", "ResourcesDeployed")]  # fmt: skip
        if status.get("phase") != phase:
            self._status(APPWRAPPER, aw, {"phase": phase, "conditions": conditions})

    def _deploy(self, aw: dict, component: dict) -> None:
        """The wrapped object, with each podSetInfo (Kueue's admission) on its pod template."""
        body = copy.deepcopy(component["template"])
        meta = body.setdefault("metadata", {})
        meta["namespace"] = self.ns
        meta["labels"] = {**(meta.get("labels") or {}), APPWRAPPER_LABEL: aw["metadata"]["name"]}
        meta["ownerReferences"] = [owner(aw)]
        paths = [p["path"] for p in component.get("podSets") or []] or _inferred_paths(body)
        infos = component.get("podSetInfos") or []
        for index, path in enumerate(paths):
            template = _at(body, path)
            info = infos[index] if index < len(infos) else {}
            spec = template.setdefault("spec", {})
            if info.get("nodeSelector"):
                spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **info["nodeSelector"]}
            if info.get("tolerations"):
                spec["tolerations"] = [*(spec.get("tolerations") or []), *info["tolerations"]]
            pod_meta = template.setdefault("metadata", {})
            for key in ("labels", "annotations"):
                if info.get(key):
                    pod_meta[key] = {**(pod_meta.get(key) or {}), **info[key]}
            # The controller labels every pod it wraps with its AppWrapper's name.
            pod_meta["labels"] = {**(pod_meta.get("labels") or {}),
                                  APPWRAPPER_LABEL: aw["metadata"]["name"]}  # fmt: skip
        try:
            if body["kind"] == "Job":
                self.cluster.batch.create_namespaced_job(self.ns, body)
            elif body["kind"] == "Deployment":
                self.cluster.apps.create_namespaced_deployment(self.ns, body)
            elif body["kind"] == "JobSet":
                group, version, plural = JOBSET
                self.custom.create_namespaced_custom_object(group, version, self.ns, plural, body)
        except client.ApiException as err:
            if err.status != 409:  # made by an earlier pass
                raise

    def _component_succeeded(self, template: dict) -> bool:
        name = template["metadata"]["name"]
        try:
            if template["kind"] == "Job":
                return job_condition(self.cluster.batch.read_namespaced_job(name, self.ns),
                                     "Complete")  # fmt: skip
            if template["kind"] == "JobSet":
                status = get(self.cluster, JOBSET, self.ns, name).get("status") or {}
                return status.get("terminalState") == "Completed"
        except client.ApiException:
            return False
        return False  # a Deployment runs until the AppWrapper is deleted

    def _delete_component(self, template: dict) -> None:
        name = template["metadata"]["name"]
        with contextlib.suppress(client.ApiException):
            if template["kind"] == "Job":
                self.cluster.batch.delete_namespaced_job(
                    name, self.ns, propagation_policy="Background"
                )
            elif template["kind"] == "Deployment":
                self.cluster.apps.delete_namespaced_deployment(name, self.ns)
            elif template["kind"] == "JobSet":
                group, version, plural = JOBSET
                self.custom.delete_namespaced_custom_object(
                    group, version, self.ns, plural, name, propagation_policy="Background"
                )


def _inferred_paths(body: dict) -> list[str]:
    """The pod templates the appwrapper library finds in a kind it knows, without podSets."""
    if body["kind"] == "JobSet":
        rjobs = (body.get("spec") or {}).get("replicatedJobs") or []
        return [f"template.spec.replicatedJobs[{i}].template.spec.template"
                for i in range(len(rjobs))]  # fmt: skip
    return ["template.spec.template"]  # a Job's and a Deployment's


def _at(body: dict, path: str) -> dict:
    """The mapping at an appwrapper podSet path ("template.spec.replicatedJobs[0]...")."""
    node: Any = body
    for step in path.split(".")[1:]:
        key, _, index = step.partition("[")
        node = node.setdefault(key, {})
        if index:
            node = node[int(index.rstrip("]"))]
    return node


@contextlib.contextmanager
def operators(cluster: Cluster, namespace: str) -> Iterator[Operators]:
    played = Operators(cluster, namespace)
    try:
        yield played
    finally:
        played.stop()
    assert not played.errors, f"the operators' player failed: {played.errors[:3]}"


def terminate(cluster: Cluster, pod: Any) -> None:
    """One active pod asked to end with code 0 (agnhost's netexec on SIGTERM): by the node's
    containerd where a real kubelet runs it, else as the stand-in kubelet would report it."""
    real = {
        n.metadata.name
        for n in cluster.core.list_node().items
        if n.status.node_info and n.status.node_info.kubelet_version
    }
    if pod.spec.node_name in real:
        end_container(pod)
        return
    terminated = {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": now()}}
    statuses = [{"name": c.name, "image": c.image, "imageID": "", "ready": False,
                 "restartCount": 0, "state": terminated} for c in pod.spec.containers]  # fmt: skip
    cluster.core.patch_namespaced_pod_status(
        pod.metadata.name, pod.metadata.namespace,
        {"status": {"phase": "Succeeded", "containerStatuses": statuses}},
    )  # fmt: skip


def wait_for_active_pods_and_terminate(
    cluster: Cluster, namespace: str, count: int, selector: str = "", timeout: float = 45.0
) -> None:
    """util.WaitForActivePodsAndTerminate: `count` pods running (their containers started),
    then each told to end with code 0."""
    deadline = time.monotonic() + timeout
    while True:
        pods = cluster.core.list_namespaced_pod(namespace, label_selector=selector).items
        active = [p for p in pods
                  if p.status.phase == "Running" and not p.metadata.deletion_timestamp]  # fmt: skip
        if len(active) == count:
            break
        assert time.monotonic() < deadline, f"{len(active)} active pods, not {count}"
        time.sleep(0.25)
    for pod in active:
        deadline = time.monotonic() + timeout
        while True:
            try:
                terminate(cluster, pod)
                break
            except AssertionError:  # its container is not started yet
                assert time.monotonic() < deadline, f"{pod.metadata.name} never started"
                time.sleep(0.25)
                pod = cluster.core.read_namespaced_pod(pod.metadata.name, namespace)


# ----- the cases' setup: CRDs, flavors and queues ----------------------------------------------

CRD_FILES = (
    "jobset/jobset.x-k8s.io_jobsets.yaml",
    "kubeflow/kubeflow.org_mpijobs.v2beta1.yaml",
    "kubeflow/kubeflow.org_pytorchjobs.yaml",
    "kubeflow/kubeflow.org_jaxjobs.yaml",
    "trainer/trainer.kubeflow.org_trainjobs.yaml",
    "trainer/trainer.kubeflow.org_trainingruntimes.yaml",
    "trainer/trainer.kubeflow.org_clustertrainingruntimes.yaml",
    "appwrapper/workload.codeflare.dev_appwrappers.yaml",
)


def install_operators_crds(tower: Tower) -> None:
    """The operators' CRDs, as Kueue's e2e cluster has them installed, and trainer's
    `torch-distributed` ClusterTrainingRuntime. A CRD new to the cluster restarts the
    controller, which then watches its kind at once (it would in 30 s on its own)."""
    before = set(kubectl("get", "crd", "-o", "name").split())
    data = ROOT / "tests" / "data"
    for path in CRD_FILES:
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(data / path))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    kubectl("apply", "--server-side", "--force-conflicts", "-f",
            str(data / "trainer" / "runtimes" / "torch_distributed.yaml"))  # fmt: skip
    if set(kubectl("get", "crd", "-o", "name").split()) - before:
        tower.restart_controller()


@contextlib.contextmanager
def queues(
    cluster: Cluster,
    ns: str,
    flavors: dict[str, dict[str, str] | None],
    quota: dict[str, str],
    *,
    cluster_queue: str,
    local_queue: str = "main",
    preemption: bool = False,
    kinds: tuple[tuple[str, str, str], ...] = (),
) -> Iterator[str]:
    """The When's BeforeEach (flavors with their node labels, a ClusterQueue with `quota` in
    each flavor, a LocalQueue; waited Active) and AfterEach (the kinds' objects, the
    Workloads, the queues and flavors deleted)."""
    for name, labels in flavors.items():
        cluster.create("resourceflavors", make_resource_flavor(name, labels))
    spec = {"preemption": {"withinClusterQueue": "LowerPriority"}} if preemption else {}
    quotas = [make_flavor_quotas(name, **quota) for name in flavors]
    cluster.create_active("clusterqueues", make_cluster_queue(cluster_queue, *quotas, **spec))
    cluster.create_active("localqueues", make_local_queue(local_queue, ns, cluster_queue), ns)
    yield cluster_queue
    for group, version, plural in kinds:
        with contextlib.suppress(client.ApiException):
            cluster.custom.delete_collection_namespaced_custom_object(group, version, ns, plural)
    for wl in cluster.list("workloads", ns):
        cluster.delete("workloads", wl["metadata"]["name"], ns, strip_finalizers=True)
    cluster.delete("localqueues", local_queue, ns)
    cluster.expect_deleted("clusterqueues", cluster_queue)
    for name in flavors:
        cluster.expect_deleted("resourceflavors", name)


def stop_cluster_queue(cluster: Cluster, name: str) -> None:
    """The case's 'Stopping the ClusterQueue': spec.stopPolicy HoldAndDrain."""
    cluster.custom.patch_cluster_custom_object(
        KUEUE, V, "clusterqueues", name, {"spec": {"stopPolicy": "HoldAndDrain"}}
    )


def get(cluster: Cluster, gvp: tuple[str, str, str], ns: str, name: str) -> dict:
    group, version, plural = gvp
    return cluster.custom.get_namespaced_custom_object(group, version, ns, plural, name)


def create(cluster: Cluster, gvp: tuple[str, str, str], ns: str, body: dict) -> dict:
    """util.MustCreate."""
    group, version, plural = gvp
    return cluster.custom.create_namespaced_custom_object(group, version, ns, plural, body)


def workload_of(kind: str, group: str, obj: dict) -> str:
    """GetWorkloadNameFor<Kind>(name, uid)."""
    return workload_name(kind, group, obj["metadata"]["name"], obj["metadata"]["uid"])


def expect_replicas_running(
    cluster: Cluster, gvp: tuple[str, str, str], ns: str, name: str, replica: str, active: int
) -> None:
    """The case's 'Waiting for replicas to be ready': status.replicaStatuses[replica].active
    and a Running condition that is True."""

    def running() -> bool:
        job = get(cluster, gvp, ns, name)
        status = job.get("status") or {}
        replicas = (status.get("replicaStatuses") or {}).get(replica)
        assert replicas is not None, f"{replica} replica status not found: {status}"
        assert replicas.get("active", 0) == active, f"active {replica}: {replicas}"
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        assert conditions.get("Running") == "True", f"conditions: {conditions}"
        return True

    eventually(running, MEDIUM_TIMEOUT, f"{name}'s {replica} replicas running")


def expect_gone(cluster: Cluster, gvp: tuple[str, str, str], ns: str, name: str) -> None:
    """util.ExpectObjectToBeDeleted(ctx, k8sClient, obj, true): deleted (in the foreground)
    and waited for."""
    group, version, plural = gvp
    with contextlib.suppress(client.ApiException):
        cluster.custom.delete_namespaced_custom_object(
            group, version, ns, plural, name, propagation_policy="Foreground"
        )
    eventually(lambda: gone(lambda: get(cluster, gvp, ns, name)), LONG_TIMEOUT, f"{name} deleted")

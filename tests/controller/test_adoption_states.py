"""Tower adopts the rest of what Kueue v0.19.2 leaves, on the API double: running JobSets,
RayJobs and StatefulSets, a topology assignment, admission-check states, a MultiKueue
dispatch and a backoff that ends. Each object is written as Kueue's controllers write it
(named by the Kueue function that writes it), committed straight to the store, then Tower's
controller is started and what it kept is counted."""

from __future__ import annotations

import contextlib
import copy
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from extender.core.jobframework import registry
from extender.core.jobframework.adapter import workload_name
from extender.kube.api import resources as r
from extender.kube.api.client import ApiError
from extender.kube.controller.context import Settings
from tests import yamlc
from tests.controller.conftest import CRDS, Running, controller_process, eventually
from tests.controller.test_admission_checks import CHECK, activate, set_check
from tests.controller.test_admission_checks import setup as checks_setup
from tests.controller.test_adoption import (
    FINALIZER,
    FLAVOR,
    INDEX_LABEL,
    JOB_UID_LABEL,
    NODE_LABELS,
    NS,
    QUEUE_LABEL,
    KueueLeft,
    condition,
    conditions_of,
    evicted_backing_off,
    pending,
    pod_template,
    stamp,
)
from tests.controller.test_jobset import JOBSET_CRD
from tests.controller.test_kubeflow import load
from tests.controller.test_pod_groups import STATEFULSETS, statefulset_pod
from tests.controller.test_pods import ungated
from tests.controller.test_preemption import cluster_queue, flavor, local_queue, priority
from tests.controller.test_ray import DATA, EXAMPLES
from tests.controller.test_topology import HOSTNAME, INDEX, NODES, RACK, let_through
from tests.controller.test_topology import example as tas_example
from tests.controller.test_topology import pods_of as tas_pods_of
from tests.controller.test_topology import started as tas_started
from tests.controller.workers import name_worker, worker_cluster

PODSET_LABEL = "kueue.x-k8s.io/podset"
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
SUSPENDING = "kueue.x-k8s.io/pod-suspending-parent"
GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"


def at_path(obj: dict[str, Any], path: str) -> dict[str, Any]:
    """The field at an adapter's template path ("spec.a.b[0].template")."""
    here: Any = obj
    for part in path.split("."):
        m = re.fullmatch(r"(\w+)(?:\[(\d+)\])?", part)
        assert m, path
        here = here[m.group(1)]
        if m.group(2) is not None:
            here = here[int(m.group(2))]
    return here


def kueue_started(template: dict[str, Any], pod_set: str, wl_name: str) -> None:
    """podset.Merge of what getPodSetsInfoFromStatus gives (FromAssignment: the flavor's
    nodeLabels; the podset label; with TopologyAwareScheduling on, as by default, the workload
    annotation) into a template, as each kind's RunWithPodSetsInfo does."""
    meta = template.setdefault("metadata", {})
    meta.setdefault("labels", {})[PODSET_LABEL] = pod_set
    meta.setdefault("annotations", {})[WORKLOAD_ANNOTATION] = wl_name
    template["spec"].setdefault("nodeSelector", {}).update(NODE_LABELS)


def admitted_sets(cq: str, sets: list[tuple[str, int, str]], at: float) -> dict[str, Any]:
    """SetQuotaReservation for several podSets (name, count, cpu each), then
    SyncAdmittedCondition."""
    assignments = [
        {"name": name, "flavors": {"cpu": FLAVOR, "memory": FLAVOR},
         "resourceUsage": {"cpu": f"{count * int(cpu.rstrip('m'))}m", "memory": f"{count}Gi"},
         "count": count}
        for name, count, cpu in sets
    ]  # fmt: skip
    return {
        "admission": {"clusterQueue": cq, "podSetAssignments": assignments},
        "conditions": [
            condition("QuotaReserved", "True", "QuotaReserved",
                      f"Quota reserved in ClusterQueue {cq}", stamp(at)),
            condition("Admitted", "True", "Admitted", "The workload is admitted", stamp(at)),
        ],
    }  # fmt: skip


def owned_workload(
    left: KueueLeft,
    job: dict[str, Any],
    pod_sets: list[dict[str, Any]],
    status: dict[str, Any],
    *,
    controller: bool = True,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """ConstructWorkload (or, for a StatefulSet, its reconciler's constructWorkload with
    NewGroupWorkload and SetOwnerReference): Kueue's name, the job-uid label, the finalizer."""
    meta = job["metadata"]
    kind, group = job["kind"], job["apiVersion"].rpartition("/")[0]
    owner = {"apiVersion": job["apiVersion"], "kind": kind, "name": meta["name"],
             "uid": meta["uid"]}  # fmt: skip
    if controller:
        owner |= {"controller": True, "blockOwnerDeletion": True}
    body = {
        "metadata": {
            "name": workload_name(kind, group, meta["name"], meta["uid"]),
            "namespace": NS,
            "labels": {JOB_UID_LABEL: meta["uid"]},
            "annotations": annotations or {},
            "finalizers": [FINALIZER],
            "ownerReferences": [owner],
        },
        "spec": {"queueName": "lq", "priority": 0, "active": True, "podSets": pod_sets},
        "status": status,
    }
    return left.commit("workloads", body)


def running_pod(name: str, owner: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    """A pod its workload controller (Job, KubeRay, StatefulSet) made from a started template,
    bound and running."""
    meta = copy.deepcopy(template.get("metadata") or {})
    return {
        "metadata": {**meta, "name": name, "namespace": NS, "ownerReferences": [owner]},
        "spec": copy.deepcopy(template["spec"]) | {"nodeName": "node-1"},
        "status": {"phase": "Running"},
    }


def cpu_template(cpu: str, container: str = "c") -> dict[str, Any]:
    template = pod_template()
    template["spec"]["containers"][0].update(name=container)
    template["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
    return template


def pod_sets_of(framework: str, obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's podSets as Kueue's PodSets() reads them (name, count, template)."""
    return [
        {"name": ps.name, "count": ps.count, "template": copy.deepcopy(dict(ps.template))}
        for ps in registry.ADAPTERS[framework].pod_sets(obj)
    ]


def uids(cluster, plural: str) -> dict[str, str]:
    return {o["metadata"]["name"]: o["metadata"]["uid"] for o in cluster.api.list(plural, NS)}


def changed_specs(left: KueueLeft, plural: str, names: set[str]) -> list[str]:
    """Objects of `names` whose spec was written after Tower started (status aside)."""
    seen: dict[str, Any] = {}
    changed: list[str] = []
    with left.lock:
        for _event, kind, obj in left.log:
            name = obj["metadata"]["name"]
            if kind != plural or name not in names:
                continue
            if name in seen and seen[name] != obj.get("spec") and name not in changed:
                changed.append(name)
            seen[name] = copy.deepcopy(obj.get("spec"))
    return changed


def kueue_left_kinds(cluster) -> KueueLeft:
    """Kueue played, with the other kinds' writes recorded too."""
    left = KueueLeft(cluster)

    def seen(event: str, kind: Any, obj: dict[str, Any]) -> None:
        if kind.plural in ("jobsets", "rayjobs", "statefulsets"):
            with left.lock:
                left.log.append((event, kind.plural, copy.deepcopy(obj)))

    left.api.hooks.append(seen)
    return left


def test_tower_adopts_running_jobsets_rayjobs_and_statefulsets(cluster, start_controller):
    """One JobSet, one RayJob and one StatefulSet admitted and running as Kueue left them
    (started by RunWithPodSetsInfo, the StatefulSet's pods stamped and let through by its
    pod reconcilers): kept admitted, none suspended, their pods untouched; a waiting Job is
    admitted only into what they leave free."""
    cluster.admin.create(CRDS, JOBSET_CRD)
    for crd in ("rayjobs", "rayclusters"):
        cluster.admin.create(
            CRDS, yamlc.safe_load((DATA / "kuberay" / f"ray.io_{crd}.yaml").read_text())
        )
    cluster.apply(flavor(FLAVOR, NODE_LABELS), cluster_queue("cq", 8), local_queue("lq", "cq"),
                  priority("low", 10))  # fmt: skip
    left = kueue_left_kinds(cluster)

    # JobSet: two replicatedJobs (workers: 2 x 1 cpu, driver: 1 x 1 cpu), started.
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "js", "namespace": NS, "labels": {QUEUE_LABEL: "lq"}},
        "spec": {"suspend": True, "replicatedJobs": [
            {"name": rj, "replicas": n, "template": {"spec": {
                "parallelism": 1, "completions": 1, "template": cpu_template("1")}}}
            for rj, n in (("workers", 2), ("driver", 1))]},
    }  # fmt: skip
    jobset = left.commit("jobsets", jobset)
    js_sets = pod_sets_of("jobset.x-k8s.io/jobset", jobset)
    assert [(p["name"], p["count"]) for p in js_sets] == [("workers", 2), ("driver", 1)]
    js_wl = owned_workload(left, jobset, js_sets,
                           admitted_sets("cq", [("workers", 2, "1000m"), ("driver", 1, "1000m")], 1))  # fmt: skip
    with left.api.store.lock:
        started = copy.deepcopy(jobset)
        started["spec"]["suspend"] = False
        for rj in started["spec"]["replicatedJobs"]:
            kueue_started(rj["template"]["spec"]["template"], rj["name"], js_wl["metadata"]["name"])
        started["status"] = {"replicatedJobsStatus": [
            {"name": "workers", "active": 2, "ready": 2, "succeeded": 0, "failed": 0, "suspended": 0},
            {"name": "driver", "active": 1, "ready": 1, "succeeded": 0, "failed": 0, "suspended": 0}]}  # fmt: skip
        jobset = left.api._commit(left.api.kind("jobsets"), "MODIFIED", started)
    for rj in jobset["spec"]["replicatedJobs"]:
        for i in range(rj["replicas"]):
            owner = {"apiVersion": "batch/v1", "kind": "Job", "name": f"js-{rj['name']}-{i}",
                     "uid": f"child-{rj['name']}-{i}", "controller": True}  # fmt: skip
            left.commit("pods", running_pod(f"js-{rj['name']}-{i}-0", owner,
                                            rj["template"]["spec"]["template"]))  # fmt: skip

    # RayJob: Kueue's sample (head, small-group, submitter: 1 cpu each), started.
    [rayjob] = load(EXAMPLES / "ray" / "ray-job-sample.yaml")
    rayjob["metadata"] |= {"namespace": NS, "labels": {QUEUE_LABEL: "lq"}}
    rayjob["spec"]["suspend"] = True
    rayjob = left.commit("rayjobs", rayjob)
    ray_sets = pod_sets_of("ray.io/rayjob", rayjob)
    assert [(p["name"], p["count"]) for p in ray_sets] == [
        ("head", 1), ("small-group", 1), ("submitter", 1)
    ]  # fmt: skip
    usage = [(p["name"], p["count"], "1000m") for p in ray_sets]
    usage[-1] = ("submitter", 1, "500m")
    ray_wl = owned_workload(left, rayjob, ray_sets, admitted_sets("cq", usage, 2))
    with left.api.store.lock:
        started = copy.deepcopy(rayjob)
        started["spec"]["suspend"] = False
        spec = started["spec"]["rayClusterSpec"]
        wl_name = ray_wl["metadata"]["name"]
        kueue_started(spec["headGroupSpec"]["template"], "head", wl_name)
        kueue_started(spec["workerGroupSpecs"][0]["template"], "small-group", wl_name)
        submitter = copy.deepcopy(ray_sets[2]["template"])  # getSubmitterTemplate
        kueue_started(submitter, "submitter", wl_name)
        started["spec"]["submitterPodTemplate"] = submitter
        started["status"] = {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING",
                             "rayClusterName": "rayjob-sample-raycluster"}  # fmt: skip
        rayjob = left.api._commit(left.api.kind("rayjobs"), "MODIFIED", started)
    ray_owner = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
                 "name": "rayjob-sample-raycluster", "uid": "ray-cluster-uid", "controller": True}  # fmt: skip
    spec = rayjob["spec"]["rayClusterSpec"]
    left.commit("pods", running_pod("rayjob-sample-head", ray_owner,
                                    spec["headGroupSpec"]["template"]))  # fmt: skip
    left.commit("pods", running_pod("rayjob-sample-worker", ray_owner,
                                    spec["workerGroupSpecs"][0]["template"]))  # fmt: skip

    # StatefulSet: 2 replicas of 500m; its template marked by Kueue's StatefulSet webhook.
    template = cpu_template("500m")
    template["metadata"] = {"labels": {QUEUE_LABEL: "lq", "app": "web"},
                            "annotations": {SUSPENDING: "statefulset"}}  # fmt: skip
    sts = left.commit("statefulsets", {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": NS, "labels": {QUEUE_LABEL: "lq"}},
        "spec": {"replicas": 2, "serviceName": "web",
                 "selector": {"matchLabels": {"app": "web"}}, "template": template},
        "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2},
    })  # fmt: skip
    sts_name = workload_name("StatefulSet", "apps", "web", sts["metadata"]["uid"])
    sts_set = {"name": "main", "count": 2, "template": {"spec": copy.deepcopy(template["spec"])},
               "topologyRequest": {"podIndexLabel": "apps.kubernetes.io/pod-index"}}  # fmt: skip
    sts_wl = owned_workload(
        left, sts, [sts_set], admitted_sets("cq", [("main", 2, "500m")], 3), controller=False,
        annotations={"kueue.x-k8s.io/is-group-workload": "true",
                     "kueue.x-k8s.io/job-owner-gvk": "apps/v1, Kind=StatefulSet",
                     "kueue.x-k8s.io/job-owner-name": "web"},
    )  # fmt: skip
    assert sts_wl["metadata"]["name"] == sts_name
    sts_owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                 "uid": sts["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    for i in range(2):
        # PodWebhook.Default (gates, role hash), the StatefulSet pod reconciler's setDefault
        # (group name, count, fast-admission, serving, index label, role hash "main", the
        # prebuilt workload annotation), then the pod reconciler's Run: ungated, podset.Merge.
        pod_tpl = copy.deepcopy(template)
        pod_tpl["metadata"]["labels"] |= {
            "kueue.x-k8s.io/managed": "true", GROUP_LABEL: sts_name,
            "apps.kubernetes.io/pod-index": str(i), "statefulset.kubernetes.io/pod-name": f"web-{i}",
            "kueue.x-k8s.io/pod-group-pod-index": str(i),
        }  # fmt: skip
        pod_tpl["metadata"]["annotations"] |= {
            "kueue.x-k8s.io/prebuilt-workload-name": sts_name,
            "kueue.x-k8s.io/pod-group-total-count": "2",
            "kueue.x-k8s.io/pod-group-fast-admission": "true",
            "kueue.x-k8s.io/pod-group-serving": "true",
            "kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index",
            "kueue.x-k8s.io/role-hash": "main",
        }
        kueue_started(pod_tpl, "main", sts_name)
        pod_tpl["spec"]["schedulingGates"] = []
        left.commit("pods", running_pod(f"web-{i}", sts_owner, pod_tpl))

    # 7 of 8 cpu are used: a waiting Job of 1 cpu fits, a second one does not.
    for name, created in (("wait-1", 10), ("wait-2", 11)):
        job = left.job(name, "lq", "low", created, running=False)
        left.workload(job, "low", created, pending(created + 0.1))

    before = {w["metadata"]["name"]: copy.deepcopy(w) for w in cluster.api.list("workloads", NS)}
    pods = {p["metadata"]["name"]: copy.deepcopy(p) for p in cluster.api.list("pods", NS)}
    with left.lock:
        left.log.clear()

    start_controller()

    eventually(lambda: cluster.get("jobs", "wait-1", NS)["spec"]["suspend"] is False,
               what="the waiting Job admitted into the 1 cpu left")  # fmt: skip
    status = eventually(
        lambda: (
            (s := (cluster.get("clusterqueues", "cq") or {}).get("status") or {}).get(
                "admittedWorkloads"
            )
            == 4
            and s
        ),
        what="Tower to count Kueue's three and its own",
    )
    assert status["pendingWorkloads"] == 1
    assert cluster.get("jobs", "wait-2", NS)["spec"]["suspend"] is True

    kept = 0
    for wl in (js_wl, ray_wl, sts_wl):
        now = cluster.get("workloads", wl["metadata"]["name"], NS)
        assert now["metadata"]["uid"] == wl["metadata"]["uid"]
        assert now["status"]["admission"] == wl["status"]["admission"]
        assert conditions_of(now)["Admitted"] == "True"
        assert now["metadata"]["finalizers"] == [FINALIZER]
        kept += 1
    assert cluster.get("jobsets", "js", NS)["spec"]["suspend"] is False
    assert cluster.get("rayjobs", "rayjob-sample", NS)["spec"]["suspend"] is False
    # The kinds' specs as Kueue left them, and no pod written, replaced or gated.
    assert changed_specs(left, "jobsets", {"js"}) == []
    assert changed_specs(left, "rayjobs", {"rayjob-sample"}) == []
    assert changed_specs(left, "statefulsets", {"web"}) == []
    touched = [n for n, p in pods.items() if cluster.get("pods", n, NS) != p]
    assert touched == [], touched
    made_again = set(uids(cluster, "workloads")) - set(before)
    assert made_again == set(), made_again

    # A StatefulSet pod lost and made again by its controller (through Tower's webhook, which
    # gates it): let through under Kueue's admission, told its group, no Workload made.
    cluster.admin.delete(r.PODS, "web-1", NS)
    again = cluster.admin.create(r.PODS, statefulset_pod(sts, 1), NS)
    assert again["spec"].get("schedulingGates"), "made ungated"
    through = eventually(lambda: ungated(cluster, again), what="the new web-1 let through")
    assert through["spec"]["nodeSelector"] == NODE_LABELS
    assert through["metadata"]["annotations"][GROUP_LABEL] == sts_name  # the gate on
    assert set(uids(cluster, "workloads")) == set(before)
    assert (
        cluster.get("workloads", sts_name, NS)["status"]["admission"]
        == (sts_wl["status"]["admission"])
    )
    # Each ends as under Kueue: the JobSet completes (its Workload Finished, Kueue's
    # finalizer taken off), the StatefulSet is deleted (its Workload with it).
    done = {"terminalState": "Completed", "conditions": [
        condition("Completed", "True", "AllJobsCompleted", "jobset completed successfully",
                  stamp(50))]}  # fmt: skip
    cluster.admin.patch(r.JOBSETS, "js", {"status": done}, NS, subresource="status")
    finished = eventually(
        lambda: (
            (w := cluster.get("workloads", js_wl["metadata"]["name"], NS))
            and conditions_of(w).get("Finished") == "True"
            and w
        ),
        what="the JobSet's Workload finished",
    )
    eventually(
        lambda: (
            not cluster.get("workloads", js_wl["metadata"]["name"], NS)["metadata"].get(
                "finalizers"
            )
        ),
        what="Kueue's finalizer off the finished Workload",
    )
    assert finished["metadata"]["uid"] == js_wl["metadata"]["uid"]
    cluster.admin.delete(STATEFULSETS, "web", NS)
    for pod in ("web-0", "web-1"):  # as the StatefulSet controller (or the double's GC) does
        with contextlib.suppress(ApiError):
            cluster.admin.delete(r.PODS, pod, NS)
    eventually(lambda: cluster.get("workloads", sts_name, NS) is None,
               what="the StatefulSet's Workload gone with it")  # fmt: skip
    print(f"adoption (double): {kept} of 3 running JobSet/RayJob/StatefulSet kept admitted, "
          f"0 suspended, {len(pods) - len(touched)} of {len(pods)} pods untouched, "
          f"0 Workloads made again; a StatefulSet pod made again let through under Kueue's "
          f"admission; the JobSet finished and the StatefulSet deleted as under Kueue")  # fmt: skip


def checked_job(left: KueueLeft, name: str, created: float, *, running: bool) -> dict[str, Any]:
    """A Job of 1 cpu on Kueue's admission-check setup (default-flavor, user-queue)."""
    job = left.job(name, "user-queue", "low", created, running=False)
    if running:
        with left.api.store.lock:
            started = copy.deepcopy(job)
            started["spec"]["suspend"] = False
            # startJob: the flavor has no nodeLabels; the check's podSetUpdates are merged.
            started["spec"]["template"].setdefault("metadata", {})["labels"] = {
                PODSET_LABEL: "main", "example.com/provisioned": "yes"
            }  # fmt: skip
            started["status"] = {"active": 1, "ready": 1, "startTime": stamp(created + 1)}
            job = left.api._commit(left.api.kind("jobs"), "MODIFIED", started)
    return job


def reserved_with_check(state: str, at: float) -> dict[str, Any]:
    """SetQuotaReservation, the check's state as its controller set it (Ready with a
    podSetUpdate), and SyncAdmittedCondition: Admitted only once every check is Ready."""
    cq = "cluster-queue"
    status = {
        "admission": {"clusterQueue": cq, "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
            "resourceUsage": {"cpu": "1", "memory": "1Gi"}, "count": 1}]},
        "conditions": [condition("QuotaReserved", "True", "QuotaReserved",
                                 f"Quota reserved in ClusterQueue {cq}", stamp(at))],
        "admissionChecks": [{"name": CHECK, "state": state, "message": "",
                             "lastTransitionTime": stamp(at + 0.5)}],
    }  # fmt: skip
    if state == "Ready":
        status["admissionChecks"][0]["podSetUpdates"] = [
            {"name": "main", "labels": {"example.com/provisioned": "yes"}}
        ]
        status["conditions"].append(
            condition("Admitted", "True", "Admitted", "The workload is admitted", stamp(at + 0.5))
        )
    else:
        status["conditions"].append(condition(
            "Admitted", "False", "UnsatisfiedChecks", "The workload has not all checks ready",
            stamp(at)))  # fmt: skip
    return status


def test_admission_check_states_carry_over(cluster, start_controller):
    """One Workload holding quota with its check Pending (its Job suspended), one admitted
    with the check Ready (its Job running with the check's podSetUpdates): both kept as they
    are; the Pending one is admitted, on the same reservation, once its check says Ready."""
    checks_setup(cluster)
    activate(cluster)
    cluster.apply(priority("low", 10))
    left = KueueLeft(cluster)
    ready_job = checked_job(left, "checked", 0, running=True)
    ready_wl = left.workload(ready_job, "low", 0, reserved_with_check("Ready", 1))
    wait_job = checked_job(left, "checking", 2, running=False)
    wait_wl = left.workload(wait_job, "low", 2, reserved_with_check("Pending", 3))
    with left.lock:
        left.log.clear()

    start_controller()
    eventually(
        lambda: (
            ((cluster.get("clusterqueues", "cluster-queue") or {}).get("status") or {}).get(
                "reservingWorkloads"
            )
            == 2
        ),
        what="Tower to count both reservations",
    )
    for before in (ready_wl, wait_wl):
        now = cluster.get("workloads", before["metadata"]["name"], NS)
        assert now["status"]["admission"] == before["status"]["admission"]
        assert now["status"]["admissionChecks"] == before["status"]["admissionChecks"]
        assert conditions_of(now)["Admitted"] == conditions_of(before)["Admitted"]
    assert cluster.get("jobs", "checked", NS)["spec"]["suspend"] is False
    assert cluster.get("jobs", "checking", NS)["spec"]["suspend"] is True
    assert changed_specs(left, "jobs", {"checked"}) == []

    # The check's controller says Ready: Tower admits it on the reservation Kueue made.
    set_check(cluster, wait_wl, state="Ready", podSetUpdates=[
        {"name": "main", "labels": {"example.com/provisioned": "yes"}}])  # fmt: skip
    started = eventually(
        lambda: (j := cluster.get("jobs", "checking", NS)) and not j["spec"]["suspend"] and j,
        what="the checked Job started",
    )
    assert started["spec"]["template"]["metadata"]["labels"]["example.com/provisioned"] == "yes"
    now = cluster.get("workloads", wait_wl["metadata"]["name"], NS)
    assert now["status"]["admission"] == wait_wl["status"]["admission"]
    assert conditions_of(now)["Admitted"] == "True"
    assert admissions_of(left) == [], "a reservation Kueue made was made again"
    print(
        "adoption (double): admission checks: 1 Pending and 1 Ready kept as they were; the "
        "Pending one admitted on Kueue's reservation once Ready, 0 reserved again"
    )


def admissions_of(left: KueueLeft) -> list[str]:
    """Workloads whose QuotaReserved went from not True to True after Tower started."""
    was: dict[str, bool] = {}
    again: list[str] = []
    with left.lock:
        for event, plural, obj in left.log:
            if plural != "workloads" or event == "DELETED":
                continue
            name = obj["metadata"]["name"]
            now = conditions_of(obj).get("QuotaReserved") == "True"
            if now and name in was and not was[name]:
                again.append(name)
            was[name] = now
    return again


def test_a_backoff_kueue_set_is_waited_out_then_admitted(cluster, start_controller):
    """A Workload evicted by PodsReady timeout and backing off (requeueAt a few seconds
    ahead) in an empty ClusterQueue: not admitted before requeueAt, admitted after it, with its
    requeue count kept."""
    cluster.apply(flavor(FLAVOR, NODE_LABELS), cluster_queue("cq-a", 4),
                  local_queue("lq-a", "cq-a"), priority("low", 10))  # fmt: skip
    left = KueueLeft(cluster)
    job = left.job("backoff", "lq-a", "low", 0, running=False)
    requeue_at = (datetime.now(UTC) + timedelta(seconds=4)).replace(microsecond=0)
    wl = left.workload(job, "low", 0, evicted_backing_off("backoff", 30, requeue_at))
    starts: list[float] = []

    def seen(event: str, kind: Any, obj: dict[str, Any]) -> None:
        named = kind.plural == "jobs" and obj["metadata"]["name"] == "backoff"
        if named and not obj["spec"].get("suspend"):
            starts.append(time.time())

    left.api.hooks.append(seen)

    start_controller()
    started = eventually(
        lambda: not cluster.get("jobs", "backoff", NS)["spec"]["suspend"],
        timeout=15,
        what="the Job admitted once its backoff ended",
    )
    assert started
    first = starts[0]
    assert first >= requeue_at.timestamp(), (first, requeue_at)
    now = cluster.get("workloads", wl["metadata"]["name"], NS)
    assert now["status"]["requeueState"]["count"] == 1
    assert conditions_of(now)["Admitted"] == "True"
    print(
        f"adoption (double): backoff kept: admitted {first - requeue_at.timestamp():.1f}s "
        f"after Kueue's requeueAt, never before; requeueState.count 1 kept"
    )


def test_a_topology_assignment_kueue_made_carries_over(cluster):
    """Kueue's required-rack example admitted by Kueue into rack b1-r1 (5 pods on each host,
    a split Tower's own search would not make), its pods let through by Kueue's TAS ungater:
    the assignment and the pods are kept as they are, and the next such Job is placed in
    another rack, around them."""
    for obj in NODES:
        cluster.admin.create(r.NODES, obj)
    cluster.apply(*tas_example("sample-queues.yaml"))
    left = KueueLeft(cluster)
    (required,) = tas_example("sample-job-required.yaml")
    body = copy.deepcopy(required)
    body["metadata"] = {"name": "tas-kueue", "namespace": NS, "labels": dict(
        required["metadata"]["labels"])}  # fmt: skip
    body["spec"]["suspend"] = True
    job = left.commit("jobs", body)
    name = workload_name("Job", "batch", "tas-kueue", job["metadata"]["uid"])
    template = copy.deepcopy(required["spec"]["template"])
    assignment = {
        "levels": [HOSTNAME],
        "slices": [{"domainCount": 2,
                    "valuesPerLevel": [{"individual": {"prefix": "b1-r1-", "roots": ["1", "2"]}}],
                    "podCounts": {"individual": [5, 5]}}],
    }  # fmt: skip
    status = {
        "admission": {"clusterQueue": "tas-cluster-queue", "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": "tas-flavor", "memory": "tas-flavor"},
            "resourceUsage": {"cpu": "10", "memory": "2000Mi"}, "count": 10,
            "topologyAssignment": assignment}]},
        "conditions": [
            condition("QuotaReserved", "True", "QuotaReserved",
                      "Quota reserved in ClusterQueue tas-cluster-queue", stamp(1)),
            condition("Admitted", "True", "Admitted", "The workload is admitted", stamp(1)),
        ],
    }  # fmt: skip
    wl = left.commit("workloads", {
        "metadata": {"name": name, "namespace": NS,
                     "labels": {JOB_UID_LABEL: job["metadata"]["uid"]},
                     "finalizers": [FINALIZER],
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                          "name": "tas-kueue", "uid": job["metadata"]["uid"],
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"queueName": "tas-user-queue", "priority": 0, "active": True, "podSets": [
            {"name": "main", "count": 10, "template": template,
             "topologyRequest": {"required": RACK, "podIndexLabel": INDEX}}]},
        "status": status,
    })  # fmt: skip
    # startJob with TAS (getPodSetsInfoFromStatus, FromAssignment): the flavor's nodeLabels,
    # the podset label, the workload annotation and the topology gate on the template.
    with left.api.store.lock:
        started = copy.deepcopy(job)
        started["spec"]["suspend"] = False
        tpl = started["spec"]["template"]
        kueue_started(tpl, "main", name)
        tpl["spec"]["nodeSelector"] = {"cloud.provider.com/node-group": "tas-group"}
        tpl["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
        started["status"] = {"active": 10, "ready": 10, "startTime": stamp(2)}
        job = left.api._commit(left.api.kind("jobs"), "MODIFIED", started)
    # The Job controller's pods, then Kueue's topologyUngater: the gate off, the host's label
    # copied into the nodeSelector, by completion index (the first 5 on b1-r1-1).
    for pod in tas_pods_of(job, 10):
        index = int(pod["metadata"]["labels"][INDEX])
        host = "b1-r1-1" if index < 5 else "b1-r1-2"
        pod["spec"] = copy.deepcopy(pod["spec"])
        pod["spec"]["schedulingGates"] = []
        pod["spec"]["nodeSelector"] = {**pod["spec"]["nodeSelector"], HOSTNAME: host}
        pod["spec"]["nodeName"] = host
        pod["metadata"]["namespace"] = NS
        pod["status"] = {"phase": "Running"}
        left.commit("pods", pod)
    pods = {p["metadata"]["name"]: copy.deepcopy(p) for p in cluster.api.list("pods", NS)}

    proc = controller_process(cluster)
    try:
        eventually(
            lambda: (
                ((cluster.get("clusterqueues", "tas-cluster-queue") or {}).get("status") or {})
                .get("admittedWorkloads") == 1
            ),
            20,
            "Tower to count Kueue's TAS Workload",
        )  # fmt: skip
        second = copy.deepcopy(required)
        second["metadata"] = {"name": "tas-next", "labels": required["metadata"]["labels"]}
        made = cluster.admin.create(r.JOBS, second, NS)
        started_next = eventually(lambda: tas_started(cluster, made), 20, "the next TAS Job")
        next_wl = cluster.workload_of(started_next)
        (psa,) = next_wl["status"]["admission"]["podSetAssignments"]
        [slice_] = psa["topologyAssignment"]["slices"]
        prefix = slice_["valuesPerLevel"][0]["individual"]["prefix"]
        assert prefix != "b1-r1-", "placed on the hosts Kueue's Workload runs on"
        now = cluster.get("workloads", name, NS)
        assert now["status"]["admission"] == wl["status"]["admission"]
        touched = [n for n, p in pods.items() if cluster.get("pods", n, NS) != p]
        assert touched == [], touched
        assert cluster.get("jobs", "tas-kueue", NS)["spec"]["suspend"] is False
        # A pod of Kueue's Job lost and replaced by the Job controller (gated by its
        # template): Tower's ungater lets it through to its host in Kueue's assignment.
        cluster.admin.delete(r.PODS, "tas-kueue-7", NS)
        replacement = tas_pods_of(job, 10)[7]
        replacement["metadata"]["namespace"] = NS
        cluster.admin.create(r.PODS, replacement, NS)
        [host] = eventually(lambda: let_through(cluster, ["tas-kueue-7"]), 20, "the new pod")
        assert host == "b1-r1-2"
        print(f"adoption (double): TAS: Kueue's assignment kept unchanged, 10 of 10 pods "
              f"untouched, the next Job placed in rack {prefix.rstrip('-')}; a replaced pod "
              f"let through to its host in Kueue's assignment")  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=20)


MK_CHECK = "sample-multikueue"
WORKER = "multikueue-test-worker1"


def mk_admitted(at: float, *, check: bool) -> dict[str, Any]:
    """SetQuotaReservation in cluster-queue; on the manager also the MultiKueue check's Ready,
    as the workload reconciler of Kueue's multikueue package writes it once a worker admitted
    the copy (with status.clusterName), then SyncAdmittedCondition."""
    status: dict[str, Any] = {
        "admission": {"clusterQueue": "cluster-queue", "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": "default-flavor", "memory": "default-flavor"},
            "resourceUsage": {"cpu": "1", "memory": "1Gi"}, "count": 1}]},
        "conditions": [
            condition("QuotaReserved", "True", "QuotaReserved",
                      "Quota reserved in ClusterQueue cluster-queue", stamp(at)),
            condition("Admitted", "True", "Admitted", "The workload is admitted", stamp(at + 1)),
        ],
    }  # fmt: skip
    if check:
        status["admissionChecks"] = [{
            "name": MK_CHECK, "state": "Ready", "lastTransitionTime": stamp(at + 1),
            "message": f'The workload was admitted on "{WORKER}"'}]  # fmt: skip
        status["clusterName"] = WORKER
    return status


def test_a_multikueue_dispatch_kueue_made_carries_over(cluster, webhook, tmp_path):
    """A Job dispatched by Kueue's MultiKueue and admitted on the worker (the manager's Job
    handed to MultiKueue and started, its Workload Ready with clusterName; on the worker the
    copies Kueue made, with the origin label and the prebuilt-workload annotation): after
    takeover of both clusters no second copy is made and nothing is dispatched again; the
    Job finishes on the worker and the manager's Workload with it."""
    with worker_cluster(tmp_path / "worker", webhook) as worker:
        for doc in tas_example("../single-clusterqueue-setup.yaml"):
            worker.apply(doc)
        name_worker(cluster, worker, WORKER, "worker1-secret")
        for doc in tas_example("../multikueue/multikueue-setup.yaml"):
            if doc["kind"] != "MultiKueueCluster":
                cluster.apply(doc)
        cluster.admin.patch(r.ADMISSION_CHECKS, MK_CHECK, {"status": {"conditions": [
            condition("Active", "True", "Active", "The admission check is active", stamp(0))
        ]}}, subresource="status")  # fmt: skip
        manager, remote = KueueLeft(cluster), KueueLeft(worker)

        # The manager's Job: JobWebhook.Default hands it to MultiKueue (spec.managedBy), and
        # startJob unsuspends it once the check is Ready; its status copied from the worker's.
        body = {"metadata": {"name": "mk-job", "namespace": NS,
                             "labels": {QUEUE_LABEL: "user-queue"}},
                "spec": {"suspend": False, "managedBy": "kueue.x-k8s.io/multikueue",
                         "parallelism": 1, "completions": 1, "backoffLimit": 0,
                         "template": pod_template()},
                "status": {"active": 1, "ready": 1, "startTime": stamp(3)}}  # fmt: skip
        body["spec"]["template"]["metadata"] = {"labels": {PODSET_LABEL: "main"}}
        job = manager.commit("jobs", body)
        uid = job["metadata"]["uid"]
        key = workload_name("Job", "batch", "mk-job", uid)
        spec = {"queueName": "user-queue", "priority": 0, "active": True,
                "podSets": [{"name": "main", "count": 1, "template": pod_template(),
                             "topologyRequest": {"podIndexLabel": INDEX_LABEL}}]}  # fmt: skip
        wl = manager.commit("workloads", {
            "metadata": {"name": key, "namespace": NS, "labels": {JOB_UID_LABEL: uid},
                         "finalizers": [FINALIZER],
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": "mk-job", "uid": uid, "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": spec, "status": mk_admitted(1, check=True),
        })  # fmt: skip
        # On the worker: cloneForCreate's Workload (job-uid label dropped, the origin label),
        # then the job adapter's SyncJob copy (SetMultiKueueMeta: origin label, prebuilt
        # workload annotation; managedBy and selector cleared); the worker's Kueue admitted
        # it, adopted the prebuilt Workload (its owner) and started the Job.
        copy_job = remote.commit("jobs", {
            "metadata": {"name": "mk-job", "namespace": NS,
                         "labels": {QUEUE_LABEL: "user-queue",
                                    "kueue.x-k8s.io/multikueue-origin": "multikueue"},
                         "annotations": {"kueue.x-k8s.io/prebuilt-workload-name": key,
                                         "tower.dev/sim-duration": "8s"}},
            "spec": {"suspend": False, "parallelism": 1, "completions": 1, "backoffLimit": 0,
                     "template": body["spec"]["template"]},
        })  # fmt: skip
        remote.commit("workloads", {
            "metadata": {"name": key, "namespace": NS,
                         "labels": {"kueue.x-k8s.io/multikueue-origin": "multikueue"},
                         "finalizers": [FINALIZER],
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": "mk-job",
                                              "uid": copy_job["metadata"]["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": spec, "status": mk_admitted(2, check=False),
        })  # fmt: skip
        with manager.lock, remote.lock:
            manager.log.clear()
            remote.log.clear()

        running = [
            Running(cluster.controller_client(), Settings(status_interval=0.05)),
            Running(worker.controller_client(), Settings(status_interval=0.05)),
        ]
        try:
            eventually(
                lambda: ((cluster.get("multikueueclusters", WORKER) or {}).get("status") or {})
                .get("conditions", [{}])[0].get("status") == "True",
                what="the worker connected",
            )  # fmt: skip
            finished = eventually(
                lambda: conditions_of(cluster.get("workloads", key, NS)).get("Finished") == "True"
                and cluster.get("workloads", key, NS),
                timeout=30,
                what="the manager's Workload finished with the worker's Job",
            )  # fmt: skip
        finally:
            for item in running:
                item.halt()
        assert finished["metadata"]["uid"] == wl["metadata"]["uid"]
        assert finished["status"]["clusterName"] == WORKER
        assert finished["status"]["admission"] == wl["status"]["admission"]
        with manager.lock:
            states = [
                [c.get("state") for c in (o.get("status") or {}).get("admissionChecks") or []]
                for e, p, o in manager.log if p == "workloads" and e != "DELETED"
            ]  # fmt: skip
            suspended = [o for e, p, o in manager.log if p == "jobs" and o["spec"].get("suspend")]
        assert all(s == ["Ready"] for s in states), states  # never dispatched again
        assert suspended == []
        with remote.lock:
            made = [o["metadata"]["uid"] for e, p, o in remote.log
                    if e == "ADDED" and p in ("jobs", "workloads")]  # fmt: skip
        assert made == [], "a second copy was made on the worker"
        print(
            "adoption (double): MultiKueue: the dispatch kept (clusterName, check Ready), 0 "
            "copies made again, 0 re-dispatches; finished on the worker, then on the manager"
        )

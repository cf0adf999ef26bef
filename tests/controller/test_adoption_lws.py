"""Tower adopts LeaderWorkerSets and a waiting StatefulSet as Kueue v0.19.2 leaves them, on
the API double: each group's Workload, its StatefulSets and its pods written as Kueue's
leaderworkerset and statefulset integrations and its pod webhook write them (named by the
Kueue function that writes each field), then Tower's controller started. An admitted set is
kept as it is; the gated pods of a group that waits are let through only once Tower admits
that group, and never before."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from extender.core.jobframework.adapter import workload_name
from extender.core.jobframework.groups import role_hash
from extender.kube.api import resources as r
from tests.controller.conftest import eventually
from tests.controller.test_adoption import (
    FINALIZER,
    FLAVOR,
    NODE_LABELS,
    NS,
    QUEUE_LABEL,
    KueueLeft,
    admitted,
    conditions_of,
    pending,
)
from tests.controller.test_adoption_states import admitted_sets, cpu_template, kueue_started
from tests.controller.test_pod_groups import lws_crd, statefulset_pod
from tests.controller.test_pods import ungated
from tests.controller.test_preemption import cluster_queue, flavor, local_queue, priority
from tests.controller.test_seed import complete_job

__all__ = ["lws_crd"]  # the fixture, used by name

LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
LWS_GVK = "leaderworkerset.x-k8s.io/v1, Kind=LeaderWorkerSet"
PREFIX = "leaderworkerset.sigs.k8s.io/"
SET_NAME, GROUP_INDEX, WORKER_INDEX = (
    PREFIX + "name",
    PREFIX + "group-index",
    PREFIX + "worker-index",
)
ADMISSION_GATE = {"name": "kueue.x-k8s.io/admission"}
TOPOLOGY_GATE = {"name": "kueue.x-k8s.io/topology"}
SUSPENDING = "kueue.x-k8s.io/pod-suspending-parent"
GROUP_NAME = "kueue.x-k8s.io/pod-group-name"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ROLE = "kueue.x-k8s.io/role-hash"
PODSET_LABEL = "kueue.x-k8s.io/podset"
MANAGED = "kueue.x-k8s.io/managed"
SIZE = 3  # a leader and two workers, 250m each: 750m a group


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def kueue_lws(left: KueueLeft, name: str, replicas: int) -> dict[str, Any]:
    """A LeaderWorkerSet as Kueue's webhook (Webhook.Default, podTemplateSpecDefault) leaves
    it: each template labelled with the queue name and annotated with the suspending parent
    and serving; with TopologyAwareScheduling on (the default) and a leader, the workers'
    template ranked from an offset of 1. restartPolicy None: LWS remakes one lost pod alone."""
    templates = {}
    for which, container in (("leaderTemplate", "leader"), ("workerTemplate", "worker")):
        template = cpu_template("250m", container)
        annotations = {SUSPENDING: LWS_FRAMEWORK, "kueue.x-k8s.io/pod-group-serving": "true"}
        if which == "workerTemplate":
            annotations["kueue.x-k8s.io/pod-index-offset"] = "1"
        template["metadata"] = {"labels": {QUEUE_LABEL: "lq"}, "annotations": annotations}
        templates[which] = template
    return left.commit("leaderworkersets", {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: "lq"}},
        "spec": {"replicas": replicas, "startupPolicy": "LeaderCreated",
                 "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                     "maxUnavailable": 1, "maxSurge": 0}},
                 "leaderWorkerTemplate": {"size": SIZE, "restartPolicy": "None", **templates}},
        "status": {"replicas": replicas, "updatedReplicas": replicas},
    })  # fmt: skip


def group_name(lws: dict[str, Any], index: int) -> str:
    """GetWorkloadName: the set's name and group index, hashed with its uid."""
    meta = lws["metadata"]
    return workload_name("LeaderWorkerSet", "leaderworkerset.x-k8s.io",
                         f"{meta['name']}-{index}", meta["uid"])  # fmt: skip


def group_workload(
    left: KueueLeft, lws: dict[str, Any], index: int, status: dict[str, Any]
) -> dict[str, Any]:
    """constructWorkload: NewGroupWorkload (the resource-in-use finalizer, is-group-workload),
    the job-uid label, the owner's gvk, name and the group's index, SetOwnerReference (not a
    controller); podSets leader × 1 and worker × size-1 (newPodSet: LWS's own keys dropped
    but its name; with TAS on, the workers' request ranked by their worker index)."""
    meta = lws["metadata"]
    spec = lws["spec"]["leaderWorkerTemplate"]

    def pod_set(name: str, count: int, template: dict[str, Any]) -> dict[str, Any]:
        out = {"name": name, "count": count, "template": copy.deepcopy(template)}
        if name == "worker":
            out["topologyRequest"] = {"podIndexLabel": WORKER_INDEX}
        return out

    return left.commit("workloads", {
        "metadata": {
            "name": group_name(lws, index), "namespace": NS,
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
            "annotations": {"kueue.x-k8s.io/is-group-workload": "true",
                            "kueue.x-k8s.io/job-owner-gvk": LWS_GVK,
                            "kueue.x-k8s.io/job-owner-name": meta["name"],
                            "kueue.x-k8s.io/component-workload-index": str(index)},
            "finalizers": [FINALIZER],
            "ownerReferences": [{"apiVersion": "leaderworkerset.x-k8s.io/v1",
                                 "kind": "LeaderWorkerSet", "name": meta["name"],
                                 "uid": meta["uid"]}],
        },
        "spec": {"queueName": "lq", "priority": 0, "active": True, "podSets": [
            pod_set("leader", 1, spec["leaderTemplate"]),
            pod_set("worker", SIZE - 1, spec["workerTemplate"])]},
        "status": status,
    })  # fmt: skip


def group_admitted(at: float) -> dict[str, Any]:
    return admitted_sets("cq", [("leader", 1, "250m"), ("worker", SIZE - 1, "250m")], at)


def lws_statefulsets(left: KueueLeft, lws: dict[str, Any], leaders: dict[int, str]) -> None:
    """The LWS controller's StatefulSets: the leaders' (`<name>`, owned by the set) and each
    group's workers' (`<name>-<i>`, owned by its leader pod, ordinals from 1), their
    templates the set's (Kueue's statefulset webhook leaves them: another framework's)."""
    meta, spec = lws["metadata"], lws["spec"]["leaderWorkerTemplate"]
    owner = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
             "name": meta["name"], "uid": meta["uid"], "controller": True,
             "blockOwnerDeletion": True}  # fmt: skip
    sets = [(meta["name"], lws["spec"]["replicas"], spec["leaderTemplate"], owner, {})]
    for index, leader_uid in leaders.items():
        leader = {"apiVersion": "v1", "kind": "Pod", "name": f"{meta['name']}-{index}",
                  "uid": leader_uid, "controller": True, "blockOwnerDeletion": True}  # fmt: skip
        sets.append((f"{meta['name']}-{index}", SIZE - 1, spec["workerTemplate"], leader,
                     {GROUP_INDEX: str(index)}))  # fmt: skip
    for name, replicas, template, by, extra in sets:
        template = copy.deepcopy(template)
        template["metadata"]["labels"] |= {SET_NAME: meta["name"], **extra}
        left.commit("statefulsets", {
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NS, "ownerReferences": [by],
                         "labels": {SET_NAME: meta["name"], **extra}},
            "spec": {"replicas": replicas, "serviceName": meta["name"],
                     "selector": {"matchLabels": {SET_NAME: meta["name"], **extra}},
                     "template": template},
            "status": {"replicas": replicas, "currentRevision": f"{name}-rev",
                       "updateRevision": f"{name}-rev"},
        })  # fmt: skip


def lws_pod(
    lws: dict[str, Any], index: int, worker: int, *, running: bool, kueue: bool = True
) -> dict[str, Any]:
    """A pod of group `index` as LWS makes it through its StatefulSets (LWS's labels and
    size annotation, a worker's leader name, the StatefulSet's labels and owner); with
    `kueue`, then as Kueue's PodWebhook.Default (suspended by its parent: the admission and
    topology gates, the role hash of its spec) and the LWS reconciler's setDefault (managed,
    the group's name, prebuilt Workload, total count, role leader or worker) leave it; and,
    `running`, the pod reconciler's Run (prepare: podset.Merge of getPodSetsInfoFromStatus,
    both gates off), bound and running."""
    set_name = lws["metadata"]["name"]
    which = "workerTemplate" if worker else "leaderTemplate"
    template = copy.deepcopy(lws["spec"]["leaderWorkerTemplate"][which])
    name = f"{set_name}-{index}" + (f"-{worker}" if worker else "")
    owner = f"{set_name}-{index}" if worker else set_name
    labels, annotations = template["metadata"]["labels"], template["metadata"]["annotations"]
    labels |= {
        SET_NAME: set_name, GROUP_INDEX: str(index), WORKER_INDEX: str(worker),
        PREFIX + "group-key": _hash(f"{NS}/{set_name}-{index}"),
        PREFIX + "template-revision-hash": _hash(set_name),
        "controller-revision-hash": f"{owner}-rev", "statefulset.kubernetes.io/pod-name": name,
        "apps.kubernetes.io/pod-index": str(worker or index),
    }  # fmt: skip
    annotations[PREFIX + "size"] = str(SIZE)
    if worker:
        annotations[PREFIX + "leader-name"] = f"{set_name}-{index}"
    spec = template["spec"]
    if kueue:
        spec["schedulingGates"] = [dict(ADMISSION_GATE), dict(TOPOLOGY_GATE)]
        annotations[ROLE] = role_hash(spec)
        labels[MANAGED] = "true"
        wl = group_name(lws, index)
        role = "worker" if worker else "leader"
        annotations |= {GROUP_NAME: wl, PREBUILT: wl, TOTAL: str(SIZE), ROLE: role}
        if running:
            kueue_started(template, role, wl)
            spec["schedulingGates"] = []
            spec["nodeName"] = "node-1"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels,
                     "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                          "name": owner, "uid": f"sts-{owner}",
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": spec,
        "status": {"phase": "Running" if running else "Pending"},
    }  # fmt: skip


def group_pods(left: KueueLeft, lws: dict[str, Any], index: int, *, running: bool) -> list[str]:
    made = [left.commit("pods", lws_pod(lws, index, w, running=running)) for w in range(SIZE)]
    return [pod["metadata"]["name"] for pod in made]


def lws_log(left: KueueLeft) -> None:
    """Record the LeaderWorkerSets' and StatefulSets' writes too."""

    def seen(event: str, kind: Any, obj: dict[str, Any]) -> None:
        if kind.plural in ("leaderworkersets", "statefulsets"):
            with left.lock:
                left.log.append((event, kind.plural, copy.deepcopy(obj)))

    left.api.hooks.append(seen)


def spec_writes(left: KueueLeft, plural: str) -> list[str]:
    """Objects of `plural` whose metadata or spec was written after Tower started."""
    seen: dict[str, Any] = {}
    changed: list[str] = []
    with left.lock:
        for event, kind, obj in left.log:
            if kind != plural or event == "DELETED":
                continue
            name = obj["metadata"]["name"]
            now = (obj["metadata"].get("labels"), obj["metadata"].get("annotations"),
                   obj["metadata"].get("finalizers"), obj.get("spec"))  # fmt: skip
            if name in seen and seen[name] != now and name not in changed:
                changed.append(name)
            seen[name] = copy.deepcopy(now)
    return changed


def let_through_after_admission(left: KueueLeft, wl_name: str, pods: list[str]) -> dict[str, str]:
    """For each pod, where its admission gate came off against where Tower admitted its
    Workload, in the order the API server wrote them: "after", "before" or "never"."""
    admitted_at: int | None = None
    out = dict.fromkeys(pods, "never")
    with left.lock:
        for i, (event, kind, obj) in enumerate(left.log):
            name = obj["metadata"]["name"]
            if kind == "workloads" and name == wl_name and admitted_at is None:
                holds = bool((obj.get("status") or {}).get("admission"))
                if holds and conditions_of(obj).get("Admitted") == "True":
                    admitted_at = i
                continue
            if kind != "pods" or name not in pods or out[name] != "never" or event == "DELETED":
                continue
            if ADMISSION_GATE not in (obj["spec"].get("schedulingGates") or []):
                out[name] = "after" if admitted_at is not None else "before"
    return out


def counted(cluster, admitted_count: int, pending_count: int) -> bool:
    status = (cluster.get("clusterqueues", "cq") or {}).get("status") or {}
    return (status.get("admittedWorkloads"), status.get("pendingWorkloads")) == (
        admitted_count,
        pending_count,
    )


def setup(cluster, cpu: str) -> KueueLeft:
    cluster.apply(flavor(FLAVOR, NODE_LABELS), cluster_queue("cq", cpu), local_queue("lq", "cq"),
                  priority("low", 10))  # fmt: skip
    left = KueueLeft(cluster)
    lws_log(left)
    return left


def test_tower_adopts_an_admitted_leaderworkerset_as_kueue_left_it(
    cluster, start_controller, lws_crd
):
    """Both groups of a LeaderWorkerSet admitted and running under Kueue: each group's
    Workload kept admitted (same uid, admission, finalizer), no Workload made again, the set,
    its StatefulSets and its six pods untouched; a pod LWS makes again is let through under
    Kueue's admission of its group."""
    left = setup(cluster, "4")
    lws = kueue_lws(left, "lws", 2)
    workloads = [group_workload(left, lws, i, group_admitted(i + 1)) for i in (0, 1)]
    pods = [n for i in (0, 1) for n in group_pods(left, lws, i, running=True)]
    leaders = {i: cluster.get("pods", f"lws-{i}", NS)["metadata"]["uid"] for i in (0, 1)}
    lws_statefulsets(left, lws, leaders)
    before = {p: copy.deepcopy(cluster.get("pods", p, NS)) for p in pods}
    with left.lock:
        left.log.clear()

    start_controller()
    eventually(lambda: counted(cluster, 2, 0), what="Tower to count Kueue's two groups")
    # Another reconcile of each group and each pod: a write would show by now.
    cluster.admin.patch(r.CLUSTER_QUEUES, "cq", {"metadata": {"labels": {"poke": "1"}}})
    eventually(lambda: counted(cluster, 2, 0), what="counted again")

    kept = 0
    for wl in workloads:
        now = cluster.get("workloads", wl["metadata"]["name"], NS)
        assert now["metadata"]["uid"] == wl["metadata"]["uid"]
        assert now["status"]["admission"] == wl["status"]["admission"]
        assert conditions_of(now)["Admitted"] == "True"
        assert now["metadata"]["finalizers"] == [FINALIZER]
        assert now["spec"]["podSets"] == wl["spec"]["podSets"]
        kept += 1
    names = {w["metadata"]["name"] for w in cluster.api.list("workloads", NS)}
    assert names == {w["metadata"]["name"] for w in workloads}, "a Workload made again"
    touched = [p for p in pods if cluster.get("pods", p, NS) != before[p]]
    assert touched == [], touched
    assert spec_writes(left, "leaderworkersets") == []
    assert spec_writes(left, "statefulsets") == []

    # A worker lost (restartPolicy None: LWS makes it alone again), through Tower's webhook:
    # gated, told its group, let through under Kueue's admission; no Workload made.
    cluster.admin.delete(r.PODS, "lws-1-2", NS)
    made = cluster.admin.create(r.PODS, lws_pod(lws, 1, 2, running=False, kueue=False), NS)
    assert ADMISSION_GATE in made["spec"]["schedulingGates"], "made ungated"
    through = eventually(lambda: ungated(cluster, made), what="the new lws-1-2 let through")
    assert through["metadata"]["annotations"][GROUP_NAME] == workloads[1]["metadata"]["name"]
    assert through["metadata"]["labels"][PODSET_LABEL] == "worker"
    assert through["spec"]["nodeSelector"] == NODE_LABELS
    assert TOPOLOGY_GATE not in (through["spec"].get("schedulingGates") or [])
    assert {w["metadata"]["name"] for w in cluster.api.list("workloads", NS)} == names
    now = cluster.get("workloads", workloads[1]["metadata"]["name"], NS)
    assert now["status"]["admission"] == workloads[1]["status"]["admission"]
    print(f"adoption (double): LeaderWorkerSet: {kept} of 2 group Workloads kept admitted, "
          f"{len(pods) - len(touched)} of {len(pods)} pods untouched, 0 Workloads made again, "
          f"0 writes to the set or its 3 StatefulSets; a worker made again let through under "
          f"Kueue's admission")  # fmt: skip


def test_a_waiting_leaderworkerset_group_is_let_through_only_once_tower_admits_it(
    cluster, start_controller, lws_crd
):
    """Group 0 admitted and running under Kueue, group 1 waiting (its Workload pending, its
    pods gated and stamped), a Kueue-admitted Job holding the rest of the quota: group 1's
    pods stay gated; once the Job ends Tower admits group 1, and only then are the same
    pods let through, with its placement."""
    left = setup(cluster, "2")  # 750m + 1 cpu of the Job: the second 750m does not fit
    lws = kueue_lws(left, "lws", 2)
    first = group_workload(left, lws, 0, group_admitted(1))
    second = group_workload(left, lws, 1, pending(2))
    running = group_pods(left, lws, 0, running=True)
    waiting = group_pods(left, lws, 1, running=False)
    leaders = {i: cluster.get("pods", f"lws-{i}", NS)["metadata"]["uid"] for i in (0, 1)}
    lws_statefulsets(left, lws, leaders)
    job = left.job("holder", "lq", "low", 3, running=True)
    left.workload(job, "low", 3, admitted("cq", 3.5))
    left.pod(job, 0)
    uids = {p: cluster.get("pods", p, NS)["metadata"]["uid"] for p in running + waiting}
    before = {p: copy.deepcopy(cluster.get("pods", p, NS)) for p in running}
    with left.lock:
        left.log.clear()

    start_controller()
    eventually(lambda: counted(cluster, 2, 1), what="Tower to count 2 admitted, 1 pending")
    cluster.admin.patch(r.CLUSTER_QUEUES, "cq", {"metadata": {"labels": {"poke": "1"}}})
    eventually(lambda: counted(cluster, 2, 1), what="counted again")
    for pod in waiting:
        now = cluster.get("pods", pod, NS)
        assert ADMISSION_GATE in (now["spec"].get("schedulingGates") or []), f"{pod} let through"
    assert "admission" not in (cluster.get("workloads", second["metadata"]["name"], NS)["status"])
    kept_gated = len(waiting)

    complete_job(cluster, "holder")
    for pod in waiting:
        eventually(lambda pod=pod: ungated(cluster, {"metadata": {"name": pod}}),
                   what=f"{pod} let through once its group is admitted")  # fmt: skip
    now = cluster.get("workloads", second["metadata"]["name"], NS)
    assert now["metadata"]["uid"] == second["metadata"]["uid"]
    assert now["status"]["admission"]["clusterQueue"] == "cq"
    order = let_through_after_admission(left, second["metadata"]["name"], waiting)
    assert set(order.values()) == {"after"}, order
    for pod in waiting:
        now_pod = cluster.get("pods", pod, NS)
        assert now_pod["metadata"]["uid"] == uids[pod]
        assert now_pod["spec"]["nodeSelector"] == NODE_LABELS
        role = "worker" if pod.count("-") == 2 else "leader"
        assert now_pod["metadata"]["labels"][PODSET_LABEL] == role
        assert not now_pod["spec"].get("schedulingGates"), "the topology gate left on"
    kept = cluster.get("workloads", first["metadata"]["name"], NS)
    assert kept["status"]["admission"] == first["status"]["admission"]
    assert [p for p in running if cluster.get("pods", p, NS) != before[p]] == []
    names = {w["metadata"]["name"] for w in cluster.api.list("workloads", NS)}
    assert len(names) == 3, names  # the two groups' and the Job's, none made again
    assert spec_writes(left, "leaderworkersets") == []
    print(f"adoption (double): LeaderWorkerSet waiting group: {kept_gated} of {kept_gated} "
          f"gated pods kept gated while pending; admitted by Tower, then {len(order)} of "
          f"{len(order)} let through, each after its group's admission, 0 before; the running "
          f"group's {len(running)} pods untouched")  # fmt: skip


def test_a_waiting_statefulset_is_let_through_only_once_tower_admits_it(cluster, start_controller):
    """A StatefulSet of 2 × 500m waiting under Kueue (its Workload pending, its pods gated
    and stamped by the StatefulSet pod reconciler) behind a Kueue-admitted Job: its pods stay
    gated; once the Job ends Tower admits it, and only then are the same pods let through."""
    left = setup(cluster, "1500m")
    template = cpu_template("500m")
    template["metadata"] = {"labels": {QUEUE_LABEL: "lq", "app": "web"},
                            "annotations": {SUSPENDING: "statefulset"}}  # fmt: skip
    sts = left.commit("statefulsets", {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "web", "namespace": NS, "labels": {QUEUE_LABEL: "lq"}},
        "spec": {"replicas": 2, "serviceName": "web",
                 "selector": {"matchLabels": {"app": "web"}}, "template": template},
        "status": {"replicas": 2, "currentRevision": "web-rev", "updateRevision": "web-rev"},
    })  # fmt: skip
    name = workload_name("StatefulSet", "apps", "web", sts["metadata"]["uid"])
    # The statefulset reconciler's constructWorkload: NewGroupWorkload, the job-uid label,
    # the owner's gvk and name, SetOwnerReference; podSet main × replicas (TAS on: ranked by
    # the pod index); pending, as the scheduler's requeueAndUpdate leaves it.
    wl = left.commit("workloads", {
        "metadata": {
            "name": name, "namespace": NS,
            "labels": {"kueue.x-k8s.io/job-uid": sts["metadata"]["uid"]},
            "annotations": {"kueue.x-k8s.io/is-group-workload": "true",
                            "kueue.x-k8s.io/job-owner-gvk": "apps/v1, Kind=StatefulSet",
                            "kueue.x-k8s.io/job-owner-name": "web"},
            "finalizers": [FINALIZER],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web",
                                 "uid": sts["metadata"]["uid"]}],
        },
        "spec": {"queueName": "lq", "priority": 0, "active": True, "podSets": [
            {"name": "main", "count": 2, "template": {"spec": copy.deepcopy(template["spec"])},
             "topologyRequest": {"podIndexLabel": "apps.kubernetes.io/pod-index"}}]},
        "status": pending(2),
    })  # fmt: skip
    waiting = []
    for i in range(2):
        # The StatefulSet controller's pod; PodWebhook.Default (suspended by its parent: the
        # admission and topology gates, the role hash); the StatefulSet pod reconciler's
        # setDefault (managed, queue, the group's name and prebuilt Workload as annotations,
        # total count, fast admission, serving, the pod-index label, role main).
        pod = statefulset_pod(sts, i)
        meta = pod["metadata"]
        meta["namespace"] = NS
        meta["labels"] |= {"apps.kubernetes.io/pod-index": str(i), MANAGED: "true",
                           "statefulset.kubernetes.io/pod-name": f"web-{i}",
                           "controller-revision-hash": "web-rev"}  # fmt: skip
        pod["spec"]["schedulingGates"] = [dict(ADMISSION_GATE), dict(TOPOLOGY_GATE)]
        meta["annotations"] |= {
            ROLE: role_hash(pod["spec"]), GROUP_NAME: name, PREBUILT: name, TOTAL: "2",
            "kueue.x-k8s.io/pod-group-fast-admission": "true",
            "kueue.x-k8s.io/pod-group-serving": "true",
            "kueue.x-k8s.io/pod-group-pod-index-label": "apps.kubernetes.io/pod-index",
        }  # fmt: skip
        meta["annotations"][ROLE] = "main"
        pod["status"] = {"phase": "Pending"}
        waiting.append(left.commit("pods", pod)["metadata"]["name"])
    job = left.job("holder", "lq", "low", 3, running=True)
    left.workload(job, "low", 3, admitted("cq", 3.5))
    left.pod(job, 0)
    uids = {p: cluster.get("pods", p, NS)["metadata"]["uid"] for p in waiting}
    with left.lock:
        left.log.clear()

    start_controller()
    eventually(lambda: counted(cluster, 1, 1), what="Tower to count the Job and the waiting set")
    cluster.admin.patch(r.CLUSTER_QUEUES, "cq", {"metadata": {"labels": {"poke": "1"}}})
    eventually(lambda: counted(cluster, 1, 1), what="counted again")
    for pod in waiting:
        gates = cluster.get("pods", pod, NS)["spec"].get("schedulingGates") or []
        assert ADMISSION_GATE in gates, f"{pod} let through while its Workload is pending"
    kept_gated = len(waiting)

    complete_job(cluster, "holder")
    for pod in waiting:
        eventually(lambda pod=pod: ungated(cluster, {"metadata": {"name": pod}}),
                   what=f"{pod} let through once the StatefulSet is admitted")  # fmt: skip
    now = cluster.get("workloads", name, NS)
    assert now["metadata"]["uid"] == wl["metadata"]["uid"]
    assert now["status"]["admission"]["clusterQueue"] == "cq"
    order = let_through_after_admission(left, name, waiting)
    assert set(order.values()) == {"after"}, order
    for pod in waiting:
        now_pod = cluster.get("pods", pod, NS)
        assert now_pod["metadata"]["uid"] == uids[pod]
        assert now_pod["spec"]["nodeSelector"] == NODE_LABELS
        assert not now_pod["spec"].get("schedulingGates"), "the topology gate left on"
    assert len(cluster.api.list("workloads", NS)) == 2  # the set's and the Job's
    assert spec_writes(left, "statefulsets") == []
    print(f"adoption (double): StatefulSet waiting: {kept_gated} of {kept_gated} gated pods "
          f"kept gated while pending; admitted by Tower, then {len(order)} of {len(order)} let "
          f"through after its admission, 0 before, 0 Workloads made again")  # fmt: skip

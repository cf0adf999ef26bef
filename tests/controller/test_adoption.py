"""Tower adopts a cluster as Kueue v0.19.2 left it, on the API double: Workloads, Jobs and pods
written as Kueue's controllers write them (each field named by the Kueue function that writes
it), then Tower's controller started, and every guarantee of a live switch checked on the
objects: admitted jobs run on untouched, pending ones keep their place and backoff, evicted
and finished ones stay so, a burst of new Jobs is admitted in order, and pod groups are let
through only under their admission."""

from __future__ import annotations

import copy
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from extender.core.jobframework.adapter import workload_name
from extender.core.jobframework.groups import role_hash
from tests.controller.conftest import eventually
from tests.controller.test_preemption import cluster_queue, flavor, local_queue, priority
from tests.controller.test_seed import complete_job

NS = "default"
FLAVOR = "pool-a"
NODE_LABELS = {"instance-type": "pool-a"}
FINALIZER = "kueue.x-k8s.io/resource-in-use"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
INDEX_LABEL = "batch.kubernetes.io/job-completion-index"
START = datetime.now(UTC) - timedelta(hours=1)
PRIORITIES = {"low": 10, "high": 100, "urgent": 1000}


def stamp(minutes: float) -> str:
    """A time `minutes` after the cluster's story starts (an hour ago)."""
    return (START + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, status: str, reason: str, message: str, at: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "observedGeneration": 1, "lastTransitionTime": at}  # fmt: skip


def pod_template() -> dict[str, Any]:
    return {
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "worker",
                    "image": "busybox:1.36",
                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        }
    }


class KueueLeft:
    """Kueue v0.19.2's controllers, played: each object committed straight to the store, as it
    was before Tower's webhook existed, and every later change to it recorded."""

    def __init__(self, cluster) -> None:
        self.cluster = cluster
        self.api = cluster.api
        self.log: list[tuple[str, str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.story: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        self.admitted_uids: set[str] = set()
        self.api.hooks.append(self._seen)

    def _seen(self, event: str, kind: Any, obj: dict[str, Any]) -> None:
        if kind.plural in ("jobs", "workloads", "pods"):
            with self.lock:
                self.log.append((event, kind.plural, copy.deepcopy(obj)))

    def commit(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        kind = self.api.kind(plural)
        obj.setdefault("apiVersion", kind.api_version(kind.storage))
        obj.setdefault("kind", kind.kind)
        with self.api.store.lock:
            return self.api._commit(kind, "ADDED", obj)

    def job(
        self, name: str, queue: str, level: str, created: float, *, running: bool
    ) -> dict[str, Any]:
        """A Job as Kueue's job webhook (JobWebhook.Default: suspend) and, when admitted,
        JobReconciler.startJob (RunWithPodSetsInfo: suspend false, the flavor's nodeLabels
        merged into the template by podset.Merge) leave it."""
        template = pod_template()
        if running:
            template["spec"]["nodeSelector"] = dict(NODE_LABELS)
        job = {
            "metadata": {"name": name, "namespace": NS, "creationTimestamp": stamp(created),
                         "labels": {QUEUE_LABEL: queue, PRIORITY_LABEL: level}},
            "spec": {"suspend": not running, "parallelism": 1, "completions": 1,
                     "backoffLimit": 0, "template": template},
        }  # fmt: skip
        if running:  # the Job controller's, once it started the pod
            job["status"] = {"active": 1, "ready": 1, "startTime": stamp(created + 1)}
        else:
            job["status"] = {"conditions": [
                condition("Suspended", "True", "JobSuspended", "Job suspended", stamp(created))
            ]}  # fmt: skip
        return self.commit("jobs", job)

    def workload(
        self,
        job: dict[str, Any],
        level: str,
        created: float,
        status: dict[str, Any],
        *,
        finalizer: bool = True,
    ) -> dict[str, Any]:
        """The Workload ConstructWorkload makes: named by GetWorkloadNameForOwnerWithGVK, the
        job-uid label, NewWorkload's finalizer, SetControllerReference's owner; the priority
        of PrepareWorkloadPriority (ExtractPriority: the WorkloadPriorityClass)."""
        meta = job["metadata"]
        body = {
            "metadata": {
                "name": workload_name("Job", "batch", meta["name"], meta["uid"]),
                "namespace": NS,
                "creationTimestamp": stamp(created),
                "labels": {JOB_UID_LABEL: meta["uid"]},
                "finalizers": [FINALIZER] if finalizer else [],
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                     "name": meta["name"], "uid": meta["uid"],
                                     "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {
                "queueName": meta["labels"][QUEUE_LABEL],
                "priority": PRIORITIES[level],
                "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                     "name": level},
                # Job.PodSets with TopologyAwareScheduling on (Kueue's default): an implicit
                # topology request, ranked by the completion index.
                "podSets": [{"name": "main", "count": 1, "template": pod_template(),
                             "topologyRequest": {"podIndexLabel": INDEX_LABEL}}],
                "active": True,
            },
            "status": status,
        }  # fmt: skip
        return self.commit("workloads", body)

    def pod(self, job: dict[str, Any], index: int) -> dict[str, Any]:
        """The running pod the Job controller made from the template Kueue let through."""
        meta = job["metadata"]
        body = {
            "metadata": {
                "name": f"{meta['name']}-{index}",
                "namespace": NS,
                "labels": {"batch.kubernetes.io/job-name": meta["name"],
                           "batch.kubernetes.io/controller-uid": meta["uid"]},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                     "name": meta["name"], "uid": meta["uid"],
                                     "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": copy.deepcopy(job["spec"]["template"]["spec"]) | {"nodeName": "node-1"},
            "status": {"phase": "Running"},
        }  # fmt: skip
        return self.commit("pods", body)


def admitted(cq: str, at: float) -> dict[str, Any]:
    """Status of an admitted Workload: the scheduler's SetQuotaReservation (admission with its
    podSetAssignments, QuotaReserved), then SyncAdmittedCondition (Admitted, no checks)."""
    return {
        "admission": {"clusterQueue": cq, "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": FLAVOR, "memory": FLAVOR},
            "resourceUsage": {"cpu": "1", "memory": "1Gi"}, "count": 1}]},
        "conditions": [
            condition("QuotaReserved", "True", "QuotaReserved",
                      f"Quota reserved in ClusterQueue {cq}", stamp(at)),
            condition("Admitted", "True", "Admitted", "The workload is admitted", stamp(at)),
        ],
    }  # fmt: skip


def pending(at: float) -> dict[str, Any]:
    """The scheduler's requeueAndUpdate: UnsetQuotaReservationWithCondition("Pending", the
    flavor assigner's message)."""
    message = ("couldn't assign flavors to pod set main: insufficient unused quota for cpu "
               f"in flavor {FLAVOR}, 1 more needed")  # fmt: skip
    return {"conditions": [condition("QuotaReserved", "False", "Pending", message, stamp(at))]}


def evicted_backing_off(name: str, at: float, requeue_at: datetime) -> dict[str, Any]:
    """The workload controller's PodsReady timeout: workload.SetEvictedCondition
    (PodsReadyTimeout), UpdateRequeueState (count 1, requeueAt), then, once the job stopped,
    UnsetQuotaReservationWithCondition (admission cleared, QuotaReserved and Admitted False),
    Requeued False for the backoff, and the eviction counted in schedulingStats."""
    timeout = f"Exceeded the PodsReady timeout {NS}/{name}"
    return {
        "conditions": [
            condition("QuotaReserved", "False", "Pending", timeout, stamp(at)),
            condition("Admitted", "False", "NoReservation", "The workload has no reservation",
                      stamp(at)),
            condition("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded",
                      stamp(at - 5)),
            condition("Evicted", "True", "PodsReadyTimeout", timeout, stamp(at)),
            condition("Requeued", "False", "PodsReadyTimeout", timeout, stamp(at)),
        ],
        "requeueState": {"count": 1,
                         "requeueAt": requeue_at.strftime("%Y-%m-%dT%H:%M:%SZ")},
        "schedulingStats": {"evictions": [{"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 1}]},
        "accumulatedPastExecutionTimeSeconds": 300,
    }  # fmt: skip


def finished(cq: str, at: float) -> dict[str, Any]:
    """A Workload whose Job succeeded: the reconciler's FinishWorkload (Finished True,
    "Job finished successfully") over its admission; Kueue then dropped its finalizer."""
    status = admitted(cq, at - 10)
    status["conditions"].append(
        condition("Finished", "True", "Succeeded", "Job finished successfully", stamp(at))
    )
    return status


def conditions_of(wl: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (wl.get("status") or {}).get("conditions") or []}


@pytest.fixture
def kueue_left(cluster):
    """Two ClusterQueues of 1 cpu, each full under an admitted Job, with Workloads waiting in
    each queue under two priorities, one evicted and backing off, one finished."""
    cluster.apply(
        flavor(FLAVOR, NODE_LABELS),
        *(priority(level, value) for level, value in PRIORITIES.items()),
        cluster_queue("cq-a", 1), cluster_queue("cq-b", 1),
        local_queue("lq-a", "cq-a"), local_queue("lq-b", "cq-b"),
    )  # fmt: skip
    left = KueueLeft(cluster)
    story = {}
    for name, queue, level, created, cq in (("run-a", "lq-a", "low", 0, "cq-a"),
                                            ("run-b", "lq-b", "high", 1, "cq-b")):  # fmt: skip
        job = left.job(name, queue, level, created, running=True)
        story[name] = (job, left.workload(job, level, created, admitted(cq, created + 0.5)))
        left.pod(job, 0)
    # Waiting: in lq-a the high one last in time comes first, then the two low ones by age.
    for name, queue, level, created in (("a-low-old", "lq-a", "low", 10),
                                        ("b-low", "lq-b", "low", 12),
                                        ("a-low-new", "lq-a", "low", 20),
                                        ("b-high", "lq-b", "high", 25),
                                        ("a-high", "lq-a", "high", 30)):  # fmt: skip
        job = left.job(name, queue, level, created, running=False)
        story[name] = (job, left.workload(job, level, created, pending(created + 0.1)))
    job = left.job("a-backoff", "lq-a", "urgent", 5, running=False)
    requeue_at = datetime.now(UTC) + timedelta(hours=1)
    story["a-backoff"] = (job, left.workload(
        job, "urgent", 5, evicted_backing_off(job["metadata"]["name"], 40, requeue_at)))  # fmt: skip
    job = left.job("a-done", "lq-a", "low", 2, running=True)
    job = left.api.update_status("jobs", NS, "a-done", finish_job)
    story["a-done"] = (job, left.workload(job, "low", 2, finished("cq-a", 8), finalizer=False))
    left.story = story
    left.admitted_uids = {
        wl["metadata"]["uid"] for wl in (story["run-a"][1], story["run-b"][1], story["a-done"][1])
    }
    return left


def finish_job(status: dict[str, Any]) -> None:
    status.pop("active", None)
    status["succeeded"] = 1
    status["completionTime"] = stamp(8)
    status["conditions"] = [
        condition(kind, "True", "CompletionsReached", "Reached expected number of succeeded pods",
                  stamp(8))
        for kind in ("SuccessCriteriaMet", "Complete")
    ]  # fmt: skip


def counted_pending_in(cluster, cq: str, count: int) -> bool:
    status = (cluster.get("clusterqueues", cq) or {}).get("status") or {}
    return status.get("pendingWorkloads") == count


def admissions(left: KueueLeft) -> list[str]:
    """Job names whose Workload went from no admission to one, each time, in the order
    written: a name twice is a double admission."""
    order: list[str] = []
    holding: dict[str, bool] = {}
    with left.lock:
        for event, plural, obj in left.log:
            if plural != "workloads" or event == "DELETED":
                continue
            uid = obj["metadata"]["uid"]
            status = obj.get("status") or {}
            now = (
                bool(status.get("admission")) and conditions_of(obj).get("QuotaReserved") == "True"
            )
            if now and not holding.get(uid, uid in left.admitted_uids):
                order.append((obj["metadata"].get("ownerReferences") or [{}])[0].get("name", ""))
            holding[uid] = now
    return order


def suspensions(left: KueueLeft) -> list[str]:
    """Jobs Kueue left running (or that Tower started) that were suspended again."""
    ran: set[str] = set()
    stopped: list[str] = []
    with left.lock:
        for event, plural, obj in left.log:
            if plural != "jobs" or event == "DELETED":
                continue
            name = obj["metadata"]["name"]
            if not obj["spec"].get("suspend"):
                ran.add(name)
            elif name in ran or name in ("run-a", "run-b", "a-done"):
                stopped.append(name)
    return stopped


def test_tower_adopts_every_state_kueue_left(cluster, start_controller, kueue_left):
    left = kueue_left
    story = left.story
    before = {name: copy.deepcopy(wl) for name, (_, wl) in story.items()}
    pods = {p["metadata"]["uid"] for p in cluster.api.list("pods", NS)}
    workloads_before = {w["metadata"]["uid"] for w in cluster.api.list("workloads", NS)}
    with left.lock:
        left.log.clear()

    start_controller()

    def counted(cq: str) -> bool:
        # cq-a's backing-off Workload is counted, as Kueue counts it (among the inadmissible).
        status = (cluster.get("clusterqueues", cq) or {}).get("status") or {}
        return status.get("admittedWorkloads") == 1 and status.get("pendingWorkloads") == (
            4 if cq == "cq-a" else 2
        )

    eventually(lambda: counted("cq-a") and counted("cq-b"), what="Tower to count Kueue's queues")

    # Admitted: same uid, admission, finalizer and owner; the Job runs on, its pod kept.
    for name in ("run-a", "run-b"):
        now = cluster.get("workloads", before[name]["metadata"]["name"], NS)
        assert now["metadata"]["uid"] == before[name]["metadata"]["uid"]
        assert now["status"]["admission"] == before[name]["status"]["admission"]
        assert now["metadata"]["finalizers"] == [FINALIZER]
        assert now["metadata"]["ownerReferences"] == before[name]["metadata"]["ownerReferences"]
        assert cluster.get("jobs", name, NS)["spec"]["suspend"] is False
    assert {p["metadata"]["uid"] for p in cluster.api.list("pods", NS)} == pods
    # Evicted and backing off: still waiting, its backoff as Kueue wrote it.
    backoff = cluster.get("workloads", before["a-backoff"]["metadata"]["name"], NS)
    assert backoff["status"]["requeueState"] == before["a-backoff"]["status"]["requeueState"]
    assert conditions_of(backoff)["Evicted"] == "True"
    # Finished stays finished; its Job is not touched.
    done = cluster.get("workloads", before["a-done"]["metadata"]["name"], NS)
    assert conditions_of(done)["Finished"] == "True"
    assert done["status"]["admission"] == before["a-done"]["status"]["admission"]
    # No Workload made again for a job that has one.
    assert {w["metadata"]["uid"] for w in cluster.api.list("workloads", NS)} == workloads_before
    assert suspensions(left) == []
    assert admissions(left) == []

    # Quota frees job by job: Tower admits in Kueue's order (priority, then age), and never
    # the one backing off.
    expected = {"cq-a": ["a-high", "a-low-old", "a-low-new"], "cq-b": ["b-high", "b-low"]}
    for cq, first in (("cq-a", "run-a"), ("cq-b", "run-b")):
        last = first
        for name in expected[cq]:
            complete_job(cluster, last)
            eventually(
                lambda name=name: cluster.get("jobs", name, NS)["spec"]["suspend"] is False,
                what=f"{name} to be admitted after {last}",
            )
            last = name
    order = admissions(left)
    assert [n for n in order if n.startswith("a-")] == expected["cq-a"]
    assert [n for n in order if n.startswith("b-")] == expected["cq-b"]
    backoff = cluster.get("workloads", before["a-backoff"]["metadata"]["name"], NS)
    assert "admission" not in backoff["status"]
    assert backoff["status"]["requeueState"] == before["a-backoff"]["status"]["requeueState"]
    assert cluster.get("jobs", "a-backoff", NS)["spec"]["suspend"] is True
    assert suspensions(left) == []
    assert {w["metadata"]["uid"] for w in cluster.api.list("workloads", NS)} == workloads_before

    # A burst of new Jobs in cq-b, created through Tower's webhook: admitted by priority.
    for name, level in (("n-low", "low"), ("n-urgent", "urgent"), ("n-high", "high")):
        cluster.job(name, "1", queue="lq-b", labels={PRIORITY_LABEL: level})
    eventually(lambda: counted_pending_in(cluster, "cq-b", 3), what="the burst's Workloads")
    last = "b-low"
    for name in ("n-urgent", "n-high", "n-low"):
        if last is not None:
            complete_job(cluster, last)
        eventually(lambda name=name: cluster.get("jobs", name, NS)["spec"]["suspend"] is False,
                   what=f"{name} admitted")  # fmt: skip
        last = name
    order = admissions(left)
    assert [n for n in order if n.startswith("n-")] == ["n-urgent", "n-high", "n-low"]
    assert len(order) == len(set(order)) == 8  # none admitted twice, none of Kueue's again
    assert suspensions(left) == []


def test_a_workload_backing_off_counts_as_pending_as_kueue_counts_it(
    cluster, start_controller, kueue_left
):
    start_controller()
    eventually(
        lambda: (
            ((cluster.get("clusterqueues", "cq-a") or {}).get("status") or {}).get(
                "pendingWorkloads"
            )
            == 4
        ),
        timeout=3,
        what="cq-a to count its 3 waiting Workloads and the one backing off",
    )


GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GATE = {"name": "kueue.x-k8s.io/admission"}


def group_pod(group: str, index: int, cpu: str, *, running: bool) -> dict[str, Any]:
    """A pod group's member as Kueue's pod webhook (PodWebhook.Default: the admission gate,
    the managed label and finalizer, the role-hash annotation) and, once admitted, the pod
    reconciler's Run (prepare: podset.Merge of the flavor's nodeLabels, Ungate) leave it."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "worker", "image": "busybox:1.36",
                        "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }  # fmt: skip
    hashed = role_hash(spec)
    spec["schedulingGates"] = [] if running else [dict(POD_GATE)]
    if running:
        spec["nodeSelector"] = dict(NODE_LABELS)
        spec["nodeName"] = "node-1"
    return {
        "metadata": {
            "name": f"{group}-{index}", "namespace": NS,
            "labels": {QUEUE_LABEL: "lq-g", GROUP_LABEL: group, "kueue.x-k8s.io/managed": "true"},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2",
                            "kueue.x-k8s.io/role-hash": hashed},
            "finalizers": ["kueue.x-k8s.io/managed"],
        },
        "spec": spec,
        "status": {"phase": "Running" if running else "Pending"},
    }  # fmt: skip


def group_workload(
    left: KueueLeft, group: str, pods: list[dict[str, Any]], status: dict[str, Any]
) -> dict[str, Any]:
    """ConstructComposableWorkload for a group: named by the group, NewGroupWorkload's
    is-group-workload annotation, one podSet per role hash (constructGroupPodSets: the pod's
    spec as it was made, gate included), SetOwnerReference to every member."""
    first = pods[0]
    template = {
        "spec": {k: v for k, v in first["spec"].items() if k not in ("nodeName", "nodeSelector")}
    }
    template["spec"]["schedulingGates"] = [dict(POD_GATE)]
    body = {
        "metadata": {
            "name": group, "namespace": NS,
            "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
            "finalizers": [FINALIZER],
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"],
                                 "uid": p["metadata"]["uid"]} for p in pods],
        },
        "spec": {"queueName": "lq-g", "priority": 0, "active": True,
                 "podSets": [{"name": first["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"],
                              "count": 2, "template": template}]},
        "status": status,
    }  # fmt: skip
    return left.commit("workloads", body)


def test_tower_adopts_pod_groups_as_kueue_left_them(cluster, start_controller):
    """One group admitted and running (its pods ungated under its admission), one waiting with
    its pods gated: the running one is kept, the waiting one is let through only once Tower
    admits it, the same pods."""
    cluster.apply(flavor(FLAVOR, NODE_LABELS), cluster_queue("cq-g", 2),
                  local_queue("lq-g", "cq-g"))  # fmt: skip
    left = KueueLeft(cluster)
    running = [left.commit("pods", group_pod("g-run", i, "500m", running=True)) for i in (0, 1)]
    status = admitted("cq-g", 1)
    status["admission"]["podSetAssignments"][0].update(
        name=running[0]["metadata"]["annotations"]["kueue.x-k8s.io/role-hash"], count=2
    )
    run_wl = group_workload(left, "g-run", running, status)
    waiting = [left.commit("pods", group_pod("g-wait", i, "1", running=False)) for i in (0, 1)]
    wait_wl = group_workload(left, "g-wait", waiting, pending(2))
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in running + waiting}

    start_controller()
    eventually(
        lambda: (
            ((cluster.get("clusterqueues", "cq-g") or {}).get("status") or {}).get(
                "admittedWorkloads"
            )
            == 1
        ),
        what="Tower to count the running group",
    )
    kept = cluster.get("workloads", "g-run", NS)
    assert kept["metadata"]["uid"] == run_wl["metadata"]["uid"]
    assert kept["status"]["admission"] == run_wl["status"]["admission"]
    for pod in waiting:
        now = cluster.get("pods", pod["metadata"]["name"], NS)
        assert POD_GATE in now["spec"]["schedulingGates"], "a waiting member let through"
    for pod in running:
        now = cluster.get("pods", pod["metadata"]["name"], NS)
        assert now["metadata"]["uid"] == pod["metadata"]["uid"]
        assert not now["spec"].get("schedulingGates")
    assert cluster.get("workloads", "g-wait", NS)["metadata"]["uid"] == wait_wl["metadata"]["uid"]

    # The running group ends: the waiting one is admitted, and only then its pods let through.
    for pod in running:
        cluster.api.update_status("pods", NS, pod["metadata"]["name"],
                                  lambda st: st.update(phase="Succeeded"))  # fmt: skip
    eventually(
        lambda: all(
            not (cluster.get("pods", p["metadata"]["name"], NS)["spec"].get("schedulingGates"))
            for p in waiting
        ),
        what="the waiting group's pods let through",
    )
    admitted_now = cluster.get("workloads", "g-wait", NS)
    assert admitted_now["status"]["admission"]["clusterQueue"] == "cq-g"
    for pod in waiting:
        now = cluster.get("pods", pod["metadata"]["name"], NS)
        assert now["metadata"]["uid"] == uids[pod["metadata"]["name"]]
        assert now["spec"]["nodeSelector"] == NODE_LABELS
    assert {w["metadata"]["name"] for w in cluster.api.list("workloads", NS)} == {"g-run", "g-wait"}

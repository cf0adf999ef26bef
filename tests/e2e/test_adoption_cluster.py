"""Tower adopts the real control plane as Kueue v0.19.2 left it: Jobs, Workloads and pods put
in the states Kueue's controllers leave them (the same shapes as tests/controller/
test_adoption.py, each named there by the Kueue function that writes it), Kueue's own
manifests stopped beside them, then `kubectl tower takeover --from kueue --yes` and Tower's
controller started. Counted per state and per guarantee: jobs restarted, double admissions,
order changes."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from extender.core.jobframework.adapter import workload_name
from extender.core.jobframework.groups import role_hash
from tests.e2e.conftest import (
    WEBHOOK_URL,
    controller_process,
    job_manifest,
    kubectl,
    measured,
    serve_webhook,
    wait,
    webhook_host_port,
)
from tests.e2e.test_takeover_cluster import (
    CONVERTED,
    KUEUE_NS,
    KUEUE_WEBHOOKS,
    apply,
    conversion,
    documents,
    tower,
)

pytestmark = pytest.mark.e2e
SUFFIX = uuid.uuid4().hex[:6]
NS = f"adopt-{SUFFIX}"
FLAVOR = f"on-demand-{SUFFIX}"
NODE_LABELS = {"instance-type": "on-demand"}  # the real node's
FINALIZER = "kueue.x-k8s.io/resource-in-use"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
PRIORITIES = {"low": 10, "high": 100, "urgent": 1000}
CPU, MEMORY = "250m", "64Mi"


def level(name: str) -> str:
    return f"{name}-{SUFFIX}"


def setup_objects() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
         "metadata": {"name": FLAVOR}, "spec": {"nodeLabels": NODE_LABELS}},
    ]  # fmt: skip
    for name, value in PRIORITIES.items():
        objs.append({"apiVersion": f"{GROUP}/{VERSION}", "kind": "WorkloadPriorityClass",
                     "metadata": {"name": level(name)}, "value": value})  # fmt: skip
    for cq in ("a", "b"):
        objs.append({"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue",
                     "metadata": {"name": f"cq-{cq}-{SUFFIX}"},
                     "spec": {"namespaceSelector": {}, "resourceGroups": [{
                         "coveredResources": ["cpu", "memory"],
                         "flavors": [{"name": FLAVOR, "resources": [
                             {"name": "cpu", "nominalQuota": CPU},
                             {"name": "memory", "nominalQuota": MEMORY}]}]}]}})  # fmt: skip
        objs.append({"apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
                     "metadata": {"name": f"lq-{cq}", "namespace": NS},
                     "spec": {"clusterQueue": f"cq-{cq}-{SUFFIX}"}})  # fmt: skip
    return objs


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "observedGeneration": 1, "lastTransitionTime": now()}  # fmt: skip


class Kueue:
    """Kueue's controllers, played through the API server in the order they write."""

    def __init__(self, api: client.ApiClient) -> None:
        self.batch = client.BatchV1Api(api)
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.workloads: dict[str, str] = {}  # job name -> Workload name

    def job(self, name: str, queue: str, prio: str, seconds: float) -> Any:
        """Created suspended, as JobWebhook.Default leaves it."""
        labels = {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/priority-class": level(prio)}
        body = job_manifest(labels, name=name, cpu=CPU, memory=MEMORY, seconds=seconds,
                            suspend=True)  # fmt: skip
        return self.batch.create_namespaced_job(NS, body)

    def workload(self, job: Any, prio: str, status: dict[str, Any], finalizer: bool = True) -> None:
        """ConstructWorkload's Workload (GetWorkloadNameForOwnerWithGVK, job-uid label,
        NewWorkload's finalizer, SetControllerReference), then its status as written."""
        name = workload_name("Job", "batch", job.metadata.name, job.metadata.uid)
        template = client.ApiClient().sanitize_for_serialization(job.spec.template)
        template.get("metadata", {}).pop("creationTimestamp", None)
        # Job.PodSets: cleanLabels keeps only the Job controller's job-name label; with
        # TopologyAwareScheduling on (Kueue's default) an implicit topology request.
        for label in ("controller-uid", "job-name", "batch.kubernetes.io/controller-uid"):
            (template.get("metadata", {}).get("labels") or {}).pop(label, None)
        body = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload",
            "metadata": {"name": name, "namespace": NS,
                         "labels": {"kueue.x-k8s.io/job-uid": job.metadata.uid},
                         "finalizers": [FINALIZER],
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                              "name": job.metadata.name, "uid": job.metadata.uid,
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"queueName": job.metadata.labels["kueue.x-k8s.io/queue-name"],
                     "priority": PRIORITIES[prio],
                     "priorityClassRef": {"group": GROUP, "kind": "WorkloadPriorityClass",
                                          "name": level(prio)},
                     "podSets": [{"name": "main", "count": 1, "template": template,
                                  "topologyRequest": {
                                      "podIndexLabel": "batch.kubernetes.io/job-completion-index"}}]},
        }  # fmt: skip
        self.custom.create_namespaced_custom_object(GROUP, VERSION, NS, "workloads", body)
        self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, "workloads", name, {"status": status}
        )
        if not finalizer:
            self.custom.patch_namespaced_custom_object(
                GROUP, VERSION, NS, "workloads", name, {"metadata": {"finalizers": None}}
            )
        self.workloads[job.metadata.name] = name

    def start(self, name: str) -> None:
        """JobReconciler.startJob: RunWithPodSetsInfo (suspend false, podset.Merge of the
        flavor's nodeLabels)."""
        patch = {"spec": {"suspend": False,
                          "template": {"spec": {"nodeSelector": NODE_LABELS}}}}  # fmt: skip
        self.batch.patch_namespaced_job(name, NS, patch)

    def get(self, job: str) -> dict[str, Any]:
        return self.custom.get_namespaced_custom_object(
            GROUP, VERSION, NS, "workloads", self.workloads[job]
        )


def admitted(cq: str) -> dict[str, Any]:
    """SetQuotaReservation, then SyncAdmittedCondition."""
    return {
        "admission": {"clusterQueue": cq, "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": FLAVOR, "memory": FLAVOR},
            "resourceUsage": {"cpu": CPU, "memory": MEMORY}, "count": 1}]},
        "conditions": [
            condition("QuotaReserved", "True", "QuotaReserved",
                      f"Quota reserved in ClusterQueue {cq}"),
            condition("Admitted", "True", "Admitted", "The workload is admitted"),
        ],
    }  # fmt: skip


def pending() -> dict[str, Any]:
    """The scheduler's UnsetQuotaReservationWithCondition("Pending", ...)."""
    message = (f"couldn't assign flavors to pod set main: insufficient unused quota for cpu in "
               f"flavor {FLAVOR}, 250m more needed")  # fmt: skip
    return {"conditions": [condition("QuotaReserved", "False", "Pending", message)]}


def evicted_backing_off(name: str) -> dict[str, Any]:
    """PodsReady timeout: SetEvictedCondition, UpdateRequeueState, quota unset, Requeued
    False, the eviction in schedulingStats."""
    timeout = f"Exceeded the PodsReady timeout {NS}/{name}"
    at = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "conditions": [
            condition("QuotaReserved", "False", "Pending", timeout),
            condition("Admitted", "False", "NoReservation", "The workload has no reservation"),
            condition("Evicted", "True", "PodsReadyTimeout", timeout),
            condition("Requeued", "False", "PodsReadyTimeout", timeout),
        ],
        "requeueState": {"count": 1, "requeueAt": at},
        "schedulingStats": {"evictions": [{"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 1}]},
        "accumulatedPastExecutionTimeSeconds": 300,
    }  # fmt: skip


class Starts:
    """When each Job was first seen running (spec.suspend false), polled, and any Job seen
    suspended again after running."""

    def __init__(self, batch: client.BatchV1Api) -> None:
        self.batch = batch
        self.order: list[str] = []
        self.ran: set[str] = set()
        self.stopped: list[str] = []
        self.halt = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.halt.wait(0.3):
            for job in self.batch.list_namespaced_job(NS).items:
                name = job.metadata.name
                if job.spec.suspend is False and name not in self.ran:
                    self.ran.add(name)
                    self.order.append(name)
                elif job.spec.suspend and name in self.ran and name not in self.stopped:
                    self.stopped.append(name)


def kueues_plumbing() -> None:
    """Kueue's install, stopped (tests/data/kueue-install/): its webhooks fail closed."""
    apply(*documents("rbac.yaml"))
    manager = documents("manager.yaml")
    for obj in manager:
        if obj["kind"] == "Deployment":
            obj["spec"]["replicas"] = 0
    apply(*manager)
    apply(*documents("webhooks.yaml"))
    for stanza in documents("crd-conversion.yaml"):
        patch = json.dumps({"spec": {"conversion": stanza["conversion"]}})
        kubectl("patch", "crd", stanza["name"], "--type", "merge", "-p", patch)


@pytest.fixture
def kueue_left(api_client, tmp_path):
    webhook_host_port()
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    before = {name: conversion(name) for name in CONVERTED}
    apply(*setup_objects())
    yield tmp_path
    for kind, name in KUEUE_WEBHOOKS:
        kubectl("delete", kind, name, "--ignore-not-found", check=False)
    for name, stanza in before.items():
        patch = json.dumps([{"op": "replace", "path": "/spec/conversion", "value": stanza}])
        kubectl(
            "patch", "crd", f"{name}.kueue.x-k8s.io", "--type", "json", "-p", patch, check=False
        )
    # Kueue's finalizers (pods', Workloads'), with no controller left to take them off.
    patch = json.dumps({"metadata": {"finalizers": None}})
    for plural in ("pods", "workloads.kueue.x-k8s.io"):
        names = kubectl("get", plural, "-n", NS, "-o", "jsonpath={.items[*].metadata.name}")
        for name in names.split():
            kubectl("patch", plural, name, "-n", NS, "--type", "merge", "-p", patch, check=False)
    kubectl("delete", "ns", NS, KUEUE_NS, "--wait=false", check=False)
    kubectl("wait", "--for=delete", f"namespace/{NS}", "--timeout=120s", check=False)
    for obj in setup_objects()[1:]:
        if obj["kind"] in ("ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue"):
            kind = obj["kind"].lower()
            kubectl("delete", kind, obj["metadata"]["name"], "--wait=false", check=False)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


def test_tower_adopts_the_plane_as_kueue_left_it(api_client, kueue_left, real_node):
    tmp = kueue_left
    kueue = Kueue(api_client)
    batch, core = kueue.batch, kueue.core
    cq_a, cq_b = f"cq-a-{SUFFIX}", f"cq-b-{SUFFIX}"
    # Admitted and running, one per ClusterQueue (each full).
    for name, queue, prio, cq in (("run-a", "lq-a", "low", cq_a), ("run-b", "lq-b", "high", cq_b)):
        job = kueue.job(name, queue, prio, 40)
        kueue.workload(job, prio, admitted(cq))
        kueue.start(name)
    # Finished: ran and succeeded under Kueue, its finalizer dropped.
    done = kueue.job("a-done", "lq-a", "low", 0)
    kueue.workload(done, "low", admitted(cq_a))
    kueue.start("a-done")
    wait(lambda: (batch.read_namespaced_job_status("a-done", NS).status.succeeded or 0) >= 1,
         120, "a-done to succeed")  # fmt: skip
    finished = admitted(cq_a)
    finished["conditions"].append(
        condition("Finished", "True", "Succeeded", "Job finished successfully")
    )
    kueue.custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, NS, "workloads", kueue.workloads["a-done"], {"status": finished}
    )
    kueue.custom.patch_namespaced_custom_object(
        GROUP, VERSION, NS, "workloads", kueue.workloads["a-done"],
        {"metadata": {"finalizers": None}},
    )  # fmt: skip
    # Waiting, by age (a second apart: creationTimestamp has seconds).
    for name, queue, prio in (("a-low-old", "lq-a", "low"), ("b-low", "lq-b", "low"),
                              ("a-low-new", "lq-a", "low"), ("b-high", "lq-b", "high"),
                              ("a-high", "lq-a", "high")):  # fmt: skip
        kueue.workload(kueue.job(name, queue, prio, 4), prio, pending())
        time.sleep(1.1)
    backoff = kueue.job("a-backoff", "lq-a", "urgent", 4)
    kueue.workload(backoff, "urgent", evicted_backing_off("a-backoff"))
    wait(lambda: all(
        p.status.phase == "Running"
        for p in core.list_namespaced_pod(NS, label_selector="batch.kubernetes.io/job-name in "
                                          "(run-a,run-b)").items) and len(
        core.list_namespaced_pod(NS, label_selector="batch.kubernetes.io/job-name in "
                                 "(run-a,run-b)").items) == 2, 120, "Kueue's two Jobs to run")  # fmt: skip
    pods = {p.metadata.uid: p.metadata.labels["batch.kubernetes.io/job-name"]
            for p in core.list_namespaced_pod(NS).items}  # fmt: skip
    before = {job: kueue.get(job) for job in kueue.workloads}
    states = {"admitted and running": 2, "finished": 1, "pending": 5, "evicted, backing off": 1}
    measured(f"adoption: Kueue left {sum(states.values())} Workloads: {states}")

    kueues_plumbing()
    starts = Starts(batch)
    starts.order.extend(["run-a", "run-b", "a-done"])
    starts.ran.update(starts.order)
    starts.thread.start()
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    controller = None
    try:
        over = tower("takeover", "--from", "kueue", "--webhook-url", WEBHOOK_URL or "",
                     "--certs-dir", str(tmp), "--yes")  # fmt: skip
        assert over.returncode == 0, over.stderr + over.stdout
        controller = controller_process()
        time.sleep(5)
        # Admitted ones: same uid, admission, finalizer; their Jobs run on, pods kept.
        kept = 0
        for job in ("run-a", "run-b"):
            now_wl = kueue.get(job)
            assert now_wl["metadata"]["uid"] == before[job]["metadata"]["uid"]
            assert now_wl["status"]["admission"] == before[job]["status"]["admission"]
            assert now_wl["metadata"]["finalizers"] == [FINALIZER]
            assert (
                now_wl["metadata"]["ownerReferences"] == before[job]["metadata"]["ownerReferences"]
            )
            assert batch.read_namespaced_job(job, NS).spec.suspend is False
            kept += 1
        assert {p.metadata.uid for p in core.list_namespaced_pod(NS).items} == set(pods)
        measured(f"adoption: {kept} of 2 admitted Workloads kept (uid, admission, finalizer, "
                 f"owner), {len(pods)} of {len(pods)} pods kept (2 running, 1 succeeded)")  # fmt: skip
        done_now = kueue.get("a-done")
        assert {c["type"]: c["status"] for c in done_now["status"]["conditions"]}["Finished"] == (
            "True"
        )
        # Quota frees as Kueue's Jobs end: Tower admits in Kueue's order, never the one
        # backing off.
        wait(lambda: {"a-high", "a-low-old", "a-low-new", "b-high", "b-low"} <= starts.ran,
             240, "every waiting Job to be admitted in turn")  # fmt: skip
        order = starts.order
        a_order = [n for n in order if n.startswith("a-") and n != "a-done"]
        b_order = [n for n in order if n.startswith("b-")]
        changes = int(a_order != ["a-high", "a-low-old", "a-low-new"]) + int(
            b_order != ["b-high", "b-low"]
        )
        measured(f"adoption: admitted after takeover in order {a_order} and {b_order}: "
                 f"{changes} order changes")  # fmt: skip
        back = kueue.get("a-backoff")
        assert "admission" not in back["status"]
        assert back["status"]["requeueState"] == before["a-backoff"]["status"]["requeueState"]
        assert batch.read_namespaced_job("a-backoff", NS).spec.suspend is True
        workloads = kueue.custom.list_namespaced_custom_object(
            GROUP, VERSION, NS, "workloads")["items"]  # fmt: skip
        per_job: dict[str, int] = {}
        for wl in workloads:
            owner = wl["metadata"]["ownerReferences"][0]["name"]
            per_job[owner] = per_job.get(owner, 0) + 1
        doubles = sum(count - 1 for count in per_job.values())
        restarted = len(starts.stopped)
        # Kueue's Jobs' pods: never replaced (one pod each, the same one).
        for uid, job in pods.items():
            [pod] = core.list_namespaced_pod(
                NS, label_selector=f"batch.kubernetes.io/job-name={job}").items  # fmt: skip
            assert pod.metadata.uid == uid
        measured(f"adoption: {restarted} jobs restarted, {doubles} double admissions (Workloads "
                 f"per job {sorted(set(per_job.values()))}), backing-off Workload kept its "
                 f"requeueState and waits")  # fmt: skip
        assert (restarted, doubles, changes) == (0, 0, 0)
        assert order.count("a-high") == 1

        # A burst of new Jobs through Tower's webhook, in cq-b behind one that holds it:
        # admitted by priority.
        labels = {"kueue.x-k8s.io/queue-name": "lq-b",
                  "kueue.x-k8s.io/priority-class": level("low")}  # fmt: skip
        batch.create_namespaced_job(NS, job_manifest(labels, name="n-hold", cpu=CPU,
                                                     memory=MEMORY, seconds=15))  # fmt: skip
        wait(lambda: "n-hold" in starts.ran, 60, "the holding Job admitted")
        for name, prio in (("n-low", "low"), ("n-urgent", "urgent"), ("n-high", "high")):
            labels = {"kueue.x-k8s.io/queue-name": "lq-b",
                      "kueue.x-k8s.io/priority-class": level(prio)}  # fmt: skip
            batch.create_namespaced_job(NS, job_manifest(labels, name=name, cpu=CPU,
                                                         memory=MEMORY, seconds=4))  # fmt: skip
        wait(lambda: {"n-low", "n-urgent", "n-high"} <= starts.ran, 180, "the burst admitted")
        burst = [n for n in starts.order if n.startswith("n-") and n != "n-hold"]
        measured(f"adoption: a burst of 3 new Jobs admitted in order {burst}")
        assert burst == ["n-urgent", "n-high", "n-low"]
        assert starts.stopped == []
    finally:
        starts.halt.set()
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=30)
        webhook.terminate()
        webhook.wait(timeout=20)


POD_GATE = "kueue.x-k8s.io/admission"


def group_pod(group: str, index: int, seconds: float, *, running: bool) -> dict[str, Any]:
    """A member as PodWebhook.Default (gate, managed label and finalizer, role hash) and, once
    admitted, the pod reconciler's Run (node selector merged, ungated) leave it."""
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "worker", "image": "busybox:1.36",
                        "command": ["sh", "-c", f"sleep {seconds:g}"],
                        "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}}}],
    }  # fmt: skip
    hashed = role_hash(spec)
    if running:
        spec["nodeSelector"] = dict(NODE_LABELS)
    else:
        spec["schedulingGates"] = [{"name": POD_GATE}]
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"{group}-{index}", "namespace": NS,
            "labels": {"kueue.x-k8s.io/queue-name": "lq-a", "kueue.x-k8s.io/pod-group-name": group,
                       "kueue.x-k8s.io/managed": "true"},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2",
                            "kueue.x-k8s.io/role-hash": hashed},
            "finalizers": ["kueue.x-k8s.io/managed"],
        },
        "spec": spec,
    }  # fmt: skip


def test_tower_adopts_kueues_pod_groups_on_the_plane(api_client, kueue_left, real_node):
    """A group admitted and running (2 pods of 100m in cq-a, 250m) and one waiting, gated (2
    of 100m): the running one kept, the waiting one let through only once the first ends."""
    tmp = kueue_left
    kueue = Kueue(api_client)
    core, custom = kueue.core, kueue.custom
    cq_a = f"cq-a-{SUFFIX}"
    made: dict[str, list[Any]] = {}
    for group, running in (("g-run", True), ("g-wait", False)):
        made[group] = [core.create_namespaced_pod(NS, group_pod(group, i, 20 if running else 3,
                                                                running=running))
                       for i in (0, 1)]  # fmt: skip
        first = made[group][0]
        template = client.ApiClient().sanitize_for_serialization(first.spec)
        for key in ("nodeName", "nodeSelector"):
            template.pop(key, None)
        template["schedulingGates"] = [{"name": POD_GATE}]
        hashed = first.metadata.annotations["kueue.x-k8s.io/role-hash"]
        body = {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload",
            "metadata": {"name": group, "namespace": NS,
                         "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
                         "finalizers": [FINALIZER],
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                              "name": p.metadata.name, "uid": p.metadata.uid}
                                             for p in made[group]]},
            "spec": {"queueName": "lq-a", "priority": 0,
                     "podSets": [{"name": hashed, "count": 2, "template": {"spec": template}}]},
        }  # fmt: skip
        custom.create_namespaced_custom_object(GROUP, VERSION, NS, "workloads", body)
        if running:
            status = admitted(cq_a)
            status["admission"]["podSetAssignments"][0].update(
                name=hashed, count=2, resourceUsage={"cpu": "200m", "memory": "64Mi"}
            )
        else:
            status = pending()
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, NS, "workloads", group, {"status": status}
        )
    wait(lambda: all(core.read_namespaced_pod(p.metadata.name, NS).status.phase == "Running"
                     for p in made["g-run"]), 120, "the admitted group to run")  # fmt: skip
    uids = {p.metadata.name: p.metadata.uid for group in made.values() for p in group}
    before = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "workloads", "g-run")
    kueues_plumbing()
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    controller = None
    try:
        over = tower("takeover", "--from", "kueue", "--webhook-url", WEBHOOK_URL or "",
                     "--certs-dir", str(tmp), "--yes")  # fmt: skip
        assert over.returncode == 0, over.stderr + over.stdout
        controller = controller_process()
        time.sleep(5)
        kept = custom.get_namespaced_custom_object(GROUP, VERSION, NS, "workloads", "g-run")
        assert kept["metadata"]["uid"] == before["metadata"]["uid"]
        assert kept["status"]["admission"] == before["status"]["admission"]
        gated_early = sum(
            not core.read_namespaced_pod(p.metadata.name, NS).spec.scheduling_gates
            for p in made["g-wait"]
        )
        assert gated_early == 0, "a waiting member was let through before its admission"
        wait(lambda: all(not core.read_namespaced_pod(p.metadata.name, NS).spec.scheduling_gates
                         for p in made["g-wait"]), 120, "the waiting group let through")  # fmt: skip
        ended = {p.metadata.name: core.read_namespaced_pod(p.metadata.name, NS).status.phase
                 for p in made["g-run"]}  # fmt: skip
        assert set(ended.values()) == {"Succeeded"}, ended
        now = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(NS).items}
        assert now == uids
        measured(f"adoption: pod groups: 1 running kept (uid, admission), its {len(ended)} pods "
                 f"ran to the end; 1 waiting let through only after it ended, the same "
                 f"{len(made['g-wait'])} pods; 0 replaced")  # fmt: skip
    finally:
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=30)
        webhook.terminate()
        webhook.wait(timeout=20)

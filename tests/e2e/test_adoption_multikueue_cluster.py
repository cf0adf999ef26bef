"""Tower adopts a MultiKueue dispatch Kueue v0.19.2 made, on two real control planes: the
manager's Job handed to MultiKueue and started, its Workload Ready with `clusterName`; on the
worker (TOWER_E2E_WORKER_KUBECONFIG) the copies Kueue made, admitted there, the Job's pod bound
(the shapes of tests/controller/test_adoption_states.py, each named there by the Kueue
function that writes it). Then Tower on both: no second copy, no re-dispatch; the pod
finishes on the worker and the manager's Workload finishes with it."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from extender.core.jobframework.adapter import workload_name
from tests.e2e.conftest import KUBECONFIG, ROOT, controller_process, kubectl, measured, wait
from tests.e2e.conftest import serve_webhook as serve_manager_webhook
from tests.e2e.test_multikueue_cluster import condition, get, node, serve_worker_webhook

WORKER = os.environ.get("TOWER_E2E_WORKER_KUBECONFIG")
SUFFIX = uuid.uuid4().hex[:6]
NS = f"adopt-mk-{SUFFIX}"
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
CLUSTER, CHECK, SECRET = f"worker-{SUFFIX}", f"mk-{SUFFIX}", f"worker-{SUFFIX}-secret"
FLAVOR, CQ = f"flavor-{SUFFIX}", f"cq-{SUFFIX}"
FINALIZER = "kueue.x-k8s.io/resource-in-use"
ORIGIN = "kueue.x-k8s.io/multikueue-origin"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not WORKER, reason="no worker cluster: set TOWER_E2E_WORKER_KUBECONFIG"),
]


def on_worker(*args: str, input: str | None = None, check: bool = True) -> str:
    return kubectl(*args, input=input, check=check, kubeconfig=WORKER)


def apply(where: Any, *objs: dict[str, Any]) -> None:
    where("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                 "items": list(objs)}))  # fmt: skip


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(kind: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "observedGeneration": 1, "lastTransitionTime": now()}  # fmt: skip


def queues(check: bool) -> list[dict[str, Any]]:
    cq_spec: dict[str, Any] = {"namespaceSelector": {}, "resourceGroups": [{
        "coveredResources": ["cpu", "memory"], "flavors": [{"name": FLAVOR, "resources": [
            {"name": "cpu", "nominalQuota": "2"}, {"name": "memory", "nominalQuota": "2Gi"}]}]}]}  # fmt: skip
    if check:
        cq_spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": CHECK}]}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
         "metadata": {"name": FLAVOR}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue", "metadata": {"name": CQ},
         "spec": cq_spec},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue",
         "metadata": {"name": "user-queue", "namespace": NS}, "spec": {"clusterQueue": CQ}},
    ]  # fmt: skip


def multikueue() -> list[dict[str, Any]]:
    """Kueue's multikueue-setup.yaml, named for this test."""
    return [
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "AdmissionCheck", "metadata": {"name": CHECK},
         "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                  "parameters": {"apiGroup": GROUP, "kind": "MultiKueueConfig", "name": CHECK}}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MultiKueueConfig",
         "metadata": {"name": CHECK}, "spec": {"clusters": [CLUSTER]}},
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MultiKueueCluster",
         "metadata": {"name": CLUSTER},
         "spec": {"clusterSource": {"kubeConfig": {"locationType": "Secret",
                                                   "location": SECRET}}}},
    ]  # fmt: skip


def admitted(*, on_manager: bool) -> dict[str, Any]:
    """SetQuotaReservation and SyncAdmittedCondition; on the manager also the MultiKueue
    check Ready with status.clusterName, as Kueue's multikueue workload reconciler writes it
    once the worker admitted the copy."""
    status: dict[str, Any] = {
        "admission": {"clusterQueue": CQ, "podSetAssignments": [{
            "name": "main", "flavors": {"cpu": FLAVOR, "memory": FLAVOR},
            "resourceUsage": {"cpu": "100m", "memory": "16Mi"}, "count": 1}]},
        "conditions": [
            cond("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {CQ}"),
            cond("Admitted", "True", "Admitted", "The workload is admitted"),
        ],
    }  # fmt: skip
    if on_manager:
        status["admissionChecks"] = [{"name": CHECK, "state": "Ready", "lastTransitionTime": now(),
                                      "message": f'The workload was admitted on "{CLUSTER}"'}]  # fmt: skip
        status["clusterName"] = CLUSTER
    return status


def job_body(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "mk-job", "namespace": NS, **meta},
        "spec": {"suspend": True, "parallelism": 1, "completions": 1, "backoffLimit": 0,
                 "template": {"spec": {"restartPolicy": "Never", "containers": [{
                     "name": "c", "image": "busybox:1.36", "command": ["sleep", "5"],
                     "resources": {"requests": {"cpu": "100m", "memory": "16Mi"}}}]}}},
    }  # fmt: skip


def workload_body(name: str, job: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    template = job["spec"]["template"]
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Workload",
        "metadata": {"name": name, "namespace": NS, "labels": labels, "finalizers": [FINALIZER],
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
                                          "name": "mk-job", "uid": job["metadata"]["uid"],
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"queueName": "user-queue", "priority": 0,
                 "podSets": [{"name": "main", "count": 1, "template": template}]},
    }  # fmt: skip


def status_patch(where: Any, kind: str, name: str, status: dict[str, Any]) -> None:
    where("patch", kind, name, "-n", NS, "--subresource=status", "--type=merge", "-p",
          json.dumps({"status": status}))  # fmt: skip


@pytest.fixture
def planes(tmp_path):
    for where in (kubectl, on_worker):
        where("apply", "-f", str(Path(ROOT) / "deploy" / "crds"))
        where("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        where("create", "namespace", "tower-system", check=False)
    on_worker("apply", "-f", "-", input=node("worker-node-1"))
    ready = {"status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                        "conditions": [{"type": "Ready", "status": "True",
                                        "reason": "KubeletReady", "message": "e2e"}]}}  # fmt: skip
    on_worker("patch", "node", "worker-node-1", "--subresource=status", "--type=merge", "-p",
              json.dumps(ready))  # fmt: skip
    on_worker("taint", "node", "worker-node-1", "node.kubernetes.io/not-ready-", check=False)
    apply(on_worker, *queues(check=False))
    apply(kubectl, *queues(check=True))
    flat = on_worker("config", "view", "--raw", "--flatten", "--minify")
    kubectl("create", "secret", "generic", SECRET, "-n", "tower-system",
            f"--from-literal=kubeconfig={flat}", check=False)  # fmt: skip
    apply(kubectl, *multikueue())
    yield tmp_path
    patch = json.dumps({"metadata": {"finalizers": None}})
    for where in (kubectl, on_worker):
        for plural in ("pods", "workloads.kueue.x-k8s.io"):
            names = where("get", plural, "-n", NS, "-o", "jsonpath={.items[*].metadata.name}",
                          check=False)  # fmt: skip
            for name in names.split():
                where("patch", plural, name, "-n", NS, "--type", "merge", "-p", patch,
                      check=False)  # fmt: skip
        where("delete", "ns", NS, "--wait=false", check=False)
        where("delete", "clusterqueue", CQ, "--wait=false", check=False)
        where("delete", "resourceflavor", FLAVOR, "--wait=false", check=False)
        where("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
        where("delete", "validatingwebhookconfiguration", "tower-validating-webhook",
              check=False)  # fmt: skip
    for obj in multikueue():
        kubectl("delete", obj["kind"].lower(), obj["metadata"]["name"], "--wait=false",
                check=False)  # fmt: skip
    kubectl("delete", "secret", SECRET, "-n", "tower-system", check=False)


def test_tower_adopts_a_multikueue_dispatch_kueue_made(planes):
    tmp = planes
    # The manager's Job: JobWebhook.Default hands it to MultiKueue (spec.managedBy); the
    # kube-controller-manager leaves it to MultiKueue.
    body = job_body(labels={"kueue.x-k8s.io/queue-name": "user-queue"})
    body["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    kubectl("create", "-f", "-", input=json.dumps(body))
    job = get(kubectl, "job", "mk-job", "-n", NS)
    assert job is not None
    name = workload_name("Job", "batch", "mk-job", job["metadata"]["uid"])
    kubectl("create", "-f", "-", input=json.dumps(
        workload_body(name, job, {"kueue.x-k8s.io/job-uid": job["metadata"]["uid"]})))  # fmt: skip
    # On the worker: cloneForCreate's Workload (job-uid label dropped, origin label), then
    # the job adapter's SyncJob copy (SetMultiKueueMeta: origin label, prebuilt-workload
    # annotation; managedBy cleared); the worker's Kueue adopted the prebuilt Workload (its
    # owner), admitted it and started the Job, whose pod its scheduler bound.
    remote = job_body(labels={"kueue.x-k8s.io/queue-name": "user-queue", ORIGIN: "multikueue"},
                      annotations={PREBUILT: name})  # fmt: skip
    on_worker("create", "-f", "-", input=json.dumps(remote))
    remote_job = get(on_worker, "job", "mk-job", "-n", NS)
    assert remote_job is not None
    on_worker("create", "-f", "-", input=json.dumps(
        workload_body(name, remote_job, {ORIGIN: "multikueue"})))  # fmt: skip
    status_patch(on_worker, "workloads.kueue.x-k8s.io", name, admitted(on_manager=False))
    on_worker("patch", "job", "mk-job", "-n", NS, "--type=merge", "-p",
              json.dumps({"spec": {"suspend": False}}))  # fmt: skip
    # The manager: the check Ready with clusterName, then startJob, and the worker's Job
    # status copied over (the adapter's SyncJob).
    status_patch(kubectl, "workloads.kueue.x-k8s.io", name, admitted(on_manager=True))
    kubectl("patch", "job", "mk-job", "-n", NS, "--type=merge", "-p",
            json.dumps({"spec": {"suspend": False}}))  # fmt: skip
    bound = wait(
        lambda: [p for p in (get(on_worker, "pods", "-n", NS) or {}).get("items") or []
                 if p["spec"].get("nodeName")],
        60,
        "the worker's pod bound",
    )  # fmt: skip
    remote_job = wait(lambda: (j := get(on_worker, "job", "mk-job", "-n", NS))
                      and (j.get("status") or {}).get("active") == 1 and j, 60,
                      "the worker's Job active")  # fmt: skip
    status_patch(kubectl, "job", "mk-job", {"startTime": remote_job["status"]["startTime"],
                                            "active": 1, "ready": 0})  # fmt: skip
    before = get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", NS)
    assert before is not None
    copies = {
        plural: {o["metadata"]["uid"] for o in (get(on_worker, plural, "-n", NS) or {})["items"]}
        for plural in ("jobs", "workloads.kueue.x-k8s.io", "pods")
    }
    measured(f"adoption (MultiKueue): Kueue left 1 Workload dispatched to {CLUSTER} (check "
             f"Ready, clusterName), its 2 copies and {len(bound)} pod on the worker")  # fmt: skip

    webhook = serve_manager_webhook(
        tmp / "certs",
        ["--kubeconfig", KUBECONFIG or "", "--controller-username", "kubernetes-admin"],
    )
    worker_webhook = serve_worker_webhook(tmp / "worker-certs")
    manager = controller_process("--physical-resources", "none")
    worker = controller_process("--physical-resources", "none", "--kubeconfig", WORKER or "")
    try:
        wait(lambda: condition(get(kubectl, "multikueuecluster", CLUSTER), "Active").get("status")
             == "True", 60, "the worker connected")  # fmt: skip
        checks_seen: list[Any] = []

        def sample() -> None:
            wl = get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", NS) or {}
            status = wl.get("status") or {}
            checks_seen.append(([c.get("state") for c in status.get("admissionChecks") or []],
                                status.get("clusterName")))  # fmt: skip

        for _ in range(10):  # 10 s with both Towers running
            sample()
            time.sleep(1)
        now_copies = {
            plural: {
                o["metadata"]["uid"] for o in (get(on_worker, plural, "-n", NS) or {})["items"]
            }
            for plural in ("jobs", "workloads.kueue.x-k8s.io", "pods")
        }
        kept = get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", NS)
        assert kept is not None
        assert kept["metadata"]["uid"] == before["metadata"]["uid"]
        assert kept["status"]["admission"] == before["status"]["admission"]
        made_again = sum(len(now_copies[p] - copies[p]) for p in copies)
        redispatched = sum(1 for states, where in checks_seen
                           if states != ["Ready"] or where != CLUSTER)  # fmt: skip
        suspended = (get(kubectl, "job", "mk-job", "-n", NS) or {})["spec"].get("suspend")
        # The worker's kubelet's part (no kubelet on the worker): the pod succeeds.
        for pod in bound:
            status_patch(on_worker, "pod", pod["metadata"]["name"], {"phase": "Succeeded"})
        finished = wait(
            lambda: (c := condition(get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", NS),
                                    "Finished")).get("status") == "True" and c,
            120,
            "the manager's Workload finished with the worker's Job",
        )  # fmt: skip
        wait(lambda: get(on_worker, "job", "mk-job", "-n", NS) is None
             and get(on_worker, "workloads.kueue.x-k8s.io", name, "-n", NS) is None,
             120, "the worker's copies removed")  # fmt: skip
        measured(f"adoption (MultiKueue): dispatch kept (check Ready, clusterName {CLUSTER}) "
                 f"in {len(checks_seen) - redispatched} of {len(checks_seen)} samples, "
                 f"{made_again} copies made again, manager's Job suspended: {bool(suspended)}; "
                 f"finished on the worker ({finished['reason']}), then the copies removed")  # fmt: skip
        assert (made_again, redispatched, bool(suspended)) == (0, 0, False)
    finally:
        for proc in (manager, worker, webhook, worker_webhook):
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)

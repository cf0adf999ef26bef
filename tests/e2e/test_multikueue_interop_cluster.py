"""MultiKueue between Tower and Kueue, both ways, on two real v1.32 control planes.

Kueue cannot run here, so each test plays the Kueue side as Kueue v0.19.2's source does it,
each step named by the Kueue function that does it:

- a Tower manager dispatching to a worker driven only by Kueue's contract: the test is the
  worker's Kueue (its scheduler admits the copy, its job reconciler takes the prebuilt
  Workload, starts the Job and finishes the Workload);
- a Kueue manager dispatching to a Tower worker: the test is the manager's Kueue
  (`cloneForCreate`, the Job adapter's `SyncJob`, `bestMatchByCondition`,
  `isRemoteSpecOutOfSync`, `RemoveRemoteObjects`).

The worker's pods are bound by its kube-scheduler to a stand-in node and finished by the test,
as a kubelet would report (see test_multikueue_cluster.py).
"""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import KUBECONFIG, ROOT, controller_process, kubectl, serve_webhook, wait
from tests.e2e.test_multikueue_cluster import (
    EXAMPLES,
    MULTIKUEUE,
    WORKER,
    condition,
    finish_pods,
    get,
    node,
    on_worker,
    sample_job,
    serve_worker_webhook,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not WORKER,
        reason="no worker cluster: set TOWER_E2E_WORKER_KUBECONFIG to a second cluster's "
        "kubeconfig (shared/realk8s/up.sh with REALK8S_PORT_OFFSET=100)",
    ),
]

ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
IN_USE = "kueue.x-k8s.io/resource-in-use"
WORKLOADS = "workloads.kueue.x-k8s.io"
# Kueue's Configuration default for multiKueue.origin.
KUEUE_ORIGIN = "multikueue"


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def worker_ready_node() -> None:
    """A Ready node on the worker for its kube-scheduler to bind the Job's pods to."""
    on_worker("apply", "-f", "-", input=node("worker-node-1"))
    status = {"status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                         "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                         "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                         "message": "e2e"}]}}  # fmt: skip
    on_worker("patch", "node", "worker-node-1", "--subresource=status", "--type=merge", "-p",
              json.dumps(status))  # fmt: skip
    on_worker("taint", "node", "worker-node-1", "node.kubernetes.io/not-ready-", check=False)


def install_crds(where: Any) -> None:
    """Tower's CRDs (Kueue's API) where missing; kept as they are where present, since
    another test may point their conversion elsewhere while it runs."""
    where("create", "-f", str(Path(ROOT) / "deploy" / "crds"), check=False)


def clean_up(where: Any) -> None:
    where("delete", "jobs", "--all", "-n", "default", "--wait=false", check=False)
    where("delete", "pods", "--all", "-n", "default", "--force", "--grace-period=0", check=False)
    for wl in (get(where, WORKLOADS, "-n", "default") or {}).get("items") or []:
        name = wl["metadata"]["name"]
        where("patch", WORKLOADS, name, "-n", "default", "--type=merge", "-p",
              '{"metadata":{"finalizers":null}}', check=False)  # fmt: skip
        where("delete", WORKLOADS, name, "-n", "default", "--wait=false", check=False)


def unregister_webhooks(where: Any) -> None:
    where("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    where("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


def stop(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


# ----- a Tower manager, a worker driven by Kueue's contract --------------------------------


@pytest.fixture
def tower_manager_kueue_worker(tmp_path: Path) -> Iterator[None]:
    """Tower (webhook and controller) on the manager; on the worker, no Tower at all: its
    Kueue is the test. Kueue's CRDs there are the same API Tower's deploy/crds serve."""
    for where in (kubectl, on_worker):
        install_crds(where)
        where("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        where("create", "namespace", "tower-system", check=False)
    unregister_webhooks(on_worker)  # left by another test: nothing of Tower's on this worker
    clean_up(on_worker)
    worker_ready_node()
    on_worker("apply", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"))
    webhook = serve_webhook(
        tmp_path / "certs",
        ["--kubeconfig", KUBECONFIG or "", "--controller-username", "kubernetes-admin"],
    )
    flat = on_worker("config", "view", "--raw", "--flatten", "--minify")
    kubectl("create", "secret", "generic", "worker1-secret", "-n", "tower-system",
            f"--from-literal=kubeconfig={flat}", check=False)  # fmt: skip
    kubectl("apply", "-f", str(EXAMPLES / "multikueue" / "multikueue-setup.yaml"))
    manager = controller_process(
        "--physical-resources", "none", "--multikueue-admission-timeout", "0"
    )
    yield
    stop(manager, webhook)
    clean_up(kubectl)
    clean_up(on_worker)
    kubectl("delete", "-f", str(EXAMPLES / "multikueue" / "multikueue-setup.yaml"), check=False)
    unregister_webhooks(kubectl)
    kubectl("delete", "secret", "worker1-secret", "-n", "tower-system", check=False)
    on_worker("delete", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"), check=False)
    on_worker("delete", "node", "worker-node-1", "--wait=false", check=False)  # no kubelet runs it


def kueue_worker_admits(name: str) -> None:
    """The worker's scheduler admits the copy (workload.SetQuotaReservation, then Admitted
    once no check is left); its Job is not there yet: the manager creates it only once a
    worker has admitted the Workload (the Job adapter's SyncJob, step 6b of reconcileGroup)."""
    wl = get(on_worker, WORKLOADS, name, "-n", "default")
    assert wl is not None
    [pod_set] = wl["spec"]["podSets"]
    requests = pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]
    admission = {
        "clusterQueue": "cluster-queue",
        "podSetAssignments": [{
            "name": pod_set["name"],
            "flavors": {resource: "default-flavor" for resource in requests},
            "resourceUsage": dict(requests),
            "count": pod_set["count"],
        }],
    }  # fmt: skip
    at = now()
    conditions = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": "Quota reserved in ClusterQueue cluster-queue", "lastTransitionTime": at},
        {"type": "Admitted", "status": "True", "reason": "Admitted",
         "message": "The workload is admitted", "lastTransitionTime": at},
    ]  # fmt: skip
    on_worker("patch", WORKLOADS, name, "-n", "default", "--subresource=status",
              "--type=merge", "-p",
              json.dumps({"status": {"admission": admission, "conditions": conditions}}))  # fmt: skip


def kueue_worker_starts(name: str, job: dict[str, Any]) -> None:
    """The worker's job reconciler finds the Job with its prebuilt Workload:
    EnsurePrebuiltWorkloadOwnership (controller reference to the Job, the job-uid label),
    then startJob, the Workload being admitted (the flavor has no node labels to add)."""
    wl = get(on_worker, WORKLOADS, name, "-n", "default")
    assert wl is not None
    meta = wl["metadata"]
    meta.setdefault("labels", {})[JOB_UID_LABEL] = job["metadata"]["uid"]
    meta["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                "name": job["metadata"]["name"], "uid": job["metadata"]["uid"],
                                "controller": True, "blockOwnerDeletion": True}]  # fmt: skip
    meta["finalizers"] = [IN_USE]
    on_worker("replace", "-f", "-", input=json.dumps(wl))
    on_worker("patch", "job", job["metadata"]["name"], "-n", "default", "--type=merge", "-p",
              '{"spec":{"suspend":false}}')  # fmt: skip


def kueue_worker_finishes(name: str, job: str) -> str:
    """The job reconciler sees the Job finished: workloadfinish.Finish with the reason and
    message of the Job adapter's Finished (the Job's Complete condition's message)."""
    complete = condition(get(on_worker, "job", job, "-n", "default"), "Complete")
    wl = get(on_worker, WORKLOADS, name, "-n", "default")
    if wl is None or not complete:  # the manager finished first and took its copies back
        return ""
    conditions = [c for c in wl["status"]["conditions"] if c["type"] != "Finished"]
    conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded",
                       "message": complete["message"],
                       "lastTransitionTime": now()})  # fmt: skip
    on_worker("patch", WORKLOADS, name, "-n", "default", "--subresource=status",
              "--type=merge", "-p", json.dumps({"status": {"conditions": conditions}}))  # fmt: skip
    return str(complete["message"])


def test_a_tower_manager_drives_a_worker_that_runs_kueue(tower_manager_kueue_worker: None) -> None:
    wait(lambda: condition(get(kubectl, "admissionchecks.kueue.x-k8s.io", "sample-multikueue"),
                           "Active").get("status") == "True",
         what="the AdmissionCheck Active")  # fmt: skip
    kubectl("create", "-f", "-", input=sample_job("interop-k"))
    local = wait(
        lambda: next((w for w in (get(kubectl, WORKLOADS, "-n", "default") or {}).get("items")
                      or [] if any(o.get("name") == "interop-k"
                                   for o in w["metadata"].get("ownerReferences") or [])), None),
        what="the manager's Workload",
    )  # fmt: skip
    name = local["metadata"]["name"]

    # What the worker's Kueue finds: a Workload as cloneForCreate makes it, and the Job as the
    # Job adapter's SyncJob makes it.
    remote = wait(lambda: get(on_worker, WORKLOADS, name, "-n", "default"), timeout=60,
                  what="the Workload's copy on the worker")  # fmt: skip
    assert remote["metadata"]["labels"][ORIGIN_LABEL] == KUEUE_ORIGIN
    assert JOB_UID_LABEL not in remote["metadata"]["labels"]
    assert "status" not in remote or not remote["status"].get("admission")
    local = get(kubectl, WORKLOADS, name, "-n", "default")
    assert local is not None
    assert remote["spec"] == local["spec"]
    assert get(on_worker, "job", "interop-k", "-n", "default") is None  # not before admission

    kueue_worker_admits(name)
    job = wait(lambda: get(on_worker, "job", "interop-k", "-n", "default"), timeout=60,
               what="the Job's copy on the worker")  # fmt: skip
    assert job["metadata"]["labels"][ORIGIN_LABEL] == KUEUE_ORIGIN
    prebuilt = (job["metadata"].get("annotations") or {}).get(PREBUILT) or job["metadata"][
        "labels"
    ].get(PREBUILT)
    assert prebuilt == name
    assert "managedBy" not in job["spec"]
    assert job["spec"]["suspend"] is True

    kueue_worker_starts(name, job)
    admitted = wait(
        lambda: (w := get(kubectl, WORKLOADS, name, "-n", "default"))
        and condition(w, "Admitted").get("status") == "True" and w,
        timeout=60,
        what="admitted on the manager",
    )  # fmt: skip
    assert admitted["status"]["clusterName"] == "multikueue-test-worker1"
    [check] = admitted["status"]["admissionChecks"]
    assert (check["state"], check["message"]) == (
        "Ready",
        'The workload was admitted on "multikueue-test-worker1"',
    )
    manager_job = get(kubectl, "job", "interop-k", "-n", "default")
    assert manager_job is not None
    assert manager_job["spec"]["managedBy"] == MULTIKUEUE
    wait(lambda: (get(kubectl, "job", "interop-k", "-n", "default") or {})["spec"]
         .get("suspend") is False, what="the manager's Job started")  # fmt: skip
    wait(lambda: ((get(kubectl, "job", "interop-k", "-n", "default") or {}).get("status")
                  or {}).get("active") == 1, timeout=60,
         what="the manager's Job mirroring the worker's")  # fmt: skip
    assert (get(kubectl, "pods", "-n", "default", "-l",
                "batch.kubernetes.io/job-name=interop-k") or {}).get("items") == []  # fmt: skip

    wait(lambda: any(p["spec"].get("nodeName") for p in (get(on_worker, "pods", "-n", "default",
         "-l", "batch.kubernetes.io/job-name=interop-k") or {}).get("items") or []),
         timeout=60, what="the worker's pod bound")  # fmt: skip
    finish_pods("interop-k")
    # The worker's Job completes; its status reaches the manager's Job, whose own Complete
    # finishes the manager's Workload (the job reconciler, as in Kueue), unless the worker's
    # Kueue says Finished first. Either way the worker's copies then go.
    wait(lambda: (j := get(on_worker, "job", "interop-k", "-n", "default")) is None
         or condition(j, "Complete").get("status") == "True", timeout=60,
         what="the worker's Job complete")  # fmt: skip
    if get(on_worker, WORKLOADS, name, "-n", "default") is not None:
        kueue_worker_finishes(name, "interop-k")
    finished = wait(
        lambda: (c := condition(get(kubectl, WORKLOADS, name, "-n", "default"), "Finished"))
        .get("status") == "True" and c,
        timeout=60,
        what="finished on the manager",
    )  # fmt: skip
    complete = condition(get(kubectl, "job", "interop-k", "-n", "default"), "Complete")
    assert complete.get("status") == "True"
    assert (finished["reason"], finished["message"]) == ("Succeeded", complete["message"])
    # RemoveRemoteObjects: the Job's copy, then the Workload's, its finalizer taken off.
    wait(lambda: get(on_worker, "job", "interop-k", "-n", "default") is None
         and get(on_worker, WORKLOADS, name, "-n", "default") is None,
         timeout=60, what="the worker's copies removed")  # fmt: skip


# ----- a Kueue manager, a worker that runs Tower ----------------------------------------------


@pytest.fixture
def tower_worker(tmp_path: Path) -> Iterator[None]:
    """Tower (webhook and controller) on the worker only; the manager's Kueue is the test."""
    install_crds(on_worker)
    on_worker("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    clean_up(on_worker)
    worker_ready_node()
    webhook = serve_worker_webhook(tmp_path / "worker-certs")
    on_worker("apply", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"))
    controller = subprocess.Popen(
        [sys.executable, "-m", "extender", "run", "--kubeconfig", WORKER or "",
         "--no-leader-elect", "--health-address", "127.0.0.1:0",
         "--metrics-address", "127.0.0.1:0", "--physical-resources", "none"],
        cwd=ROOT,
    )  # fmt: skip
    yield
    stop(controller, webhook)
    clean_up(on_worker)
    unregister_webhooks(on_worker)
    on_worker("delete", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"), check=False)
    on_worker("delete", "node", "worker-node-1", "--wait=false", check=False)  # no kubelet runs it


def kueue_managers_workload(job: dict[str, Any], name: str) -> dict[str, Any]:
    """The manager's Workload for Kueue's sample Job as jobframework's NewWorkload and the
    Job's PodSets make it (one podSet `main` of `parallelism` pods, the Job's template), then
    cloneForCreate: name, namespace, labels and annotations, the job-uid label dropped, the
    origin label added, the spec as is."""
    template = copy.deepcopy(job["spec"]["template"])
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "default",
                     "labels": {ORIGIN_LABEL: KUEUE_ORIGIN}},
        "spec": {
            "queueName": "user-queue",
            "priority": 0,
            "active": True,
            "podSets": [{"name": "main", "count": job["spec"]["parallelism"],
                         "template": template}],
        },
    }  # fmt: skip


def kueue_managers_job(job: dict[str, Any], name: str) -> dict[str, Any]:
    """The Job adapter's SyncJob: CloneObjectMetaForCreation, the spec as is without its
    selector and managedBy, SetMultiKueueMeta (the origin label; the prebuilt Workload's name
    in an annotation, WorkloadIdentifierAnnotations being on)."""
    remote = copy.deepcopy(job)
    remote["metadata"]["labels"][ORIGIN_LABEL] = KUEUE_ORIGIN
    remote["metadata"].setdefault("annotations", {})[PREBUILT] = name
    remote["spec"]["suspend"] = True
    remote["spec"].pop("selector", None)
    remote["spec"].pop("managedBy", None)
    return remote


def best_match(wl: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """bestMatchByCondition for one remote: its condition of that type, when True."""
    found = condition(wl, kind)
    return found if found.get("status") == "True" else None


def test_a_kueue_manager_drives_a_worker_that_runs_tower(tower_worker: None) -> None:
    job = json.loads(sample_job("interop-t"))
    name = "job-interop-t-6a1f0"
    # The manager's dispatch (nominateAndSynchronizeWorkers): the Workload only.
    on_worker("create", "-f", "-", input=json.dumps(kueue_managers_workload(job, name)))
    created = get(on_worker, WORKLOADS, name, "-n", "default")
    assert created is not None
    dispatched_spec = created["spec"]

    # What Kueue's manager reads: the remote Admitted condition (bestMatchByCondition), and
    # the remote spec, which the worker never changes (or isRemoteSpecOutOfSync would delete
    # the copy and dispatch again).
    admitted = wait(lambda: best_match(get(on_worker, WORKLOADS, name, "-n", "default"),
                                       "Admitted"), timeout=60,
                    what="the copy admitted by Tower")  # fmt: skip
    assert admitted["reason"] == "Admitted"
    # Admitted there: SyncJob creates the Job, which Tower starts under that admission.
    on_worker("create", "-f", "-", input=json.dumps(kueue_managers_job(job, name)))
    wait(lambda: (get(on_worker, WORKLOADS, name, "-n", "default") or {})["metadata"]
         .get("ownerReferences"), timeout=60, what="the copy owned by its Job")  # fmt: skip
    remote = get(on_worker, WORKLOADS, name, "-n", "default")
    assert remote is not None
    assert remote["spec"] == dispatched_spec
    assert best_match(remote, "QuotaReserved") is not None
    assert remote["status"]["admission"]["clusterQueue"] == "cluster-queue"
    owners = remote["metadata"].get("ownerReferences") or []
    assert [(o["kind"], o["name"], o.get("controller")) for o in owners] == [
        ("Job", "interop-t", True)
    ]
    # Tower made no Workload of its own for the Job: the prebuilt one is the Job's.
    listed = (get(on_worker, WORKLOADS, "-n", "default") or {}).get("items") or []
    assert [w["metadata"]["name"] for w in listed] == [name]
    remote_job = wait(
        lambda: (j := get(on_worker, "job", "interop-t", "-n", "default"))
        and j["spec"].get("suspend") is False and j,
        timeout=60,
        what="the worker's Job started",
    )  # fmt: skip
    assert remote_job["metadata"]["labels"][ORIGIN_LABEL] == KUEUE_ORIGIN  # ownership kept

    wait(lambda: any(p["spec"].get("nodeName") for p in (get(on_worker, "pods", "-n", "default",
         "-l", "batch.kubernetes.io/job-name=interop-t") or {}).get("items") or []),
         timeout=60, what="the worker's pod bound")  # fmt: skip
    finish_pods("interop-t")
    finished = wait(lambda: best_match(get(on_worker, WORKLOADS, name, "-n", "default"),
                                       "Finished"), timeout=60,
                    what="the copy finished by Tower")  # fmt: skip
    # workloadfinish.Finish on the manager copies these two: the Job adapter's Finished
    # gives the Job's Complete condition's message.
    complete = condition(get(on_worker, "job", "interop-t", "-n", "default"), "Complete")
    assert (finished["reason"], finished["message"]) == ("Succeeded", complete["message"])
    remote = get(on_worker, WORKLOADS, name, "-n", "default")
    assert remote is not None
    assert remote["spec"] == dispatched_spec
    assert best_match(remote, "Evicted") is None

    # RemoveRemoteObjects: the Job (background propagation), the Workload's resource-in-use
    # finalizer taken off by an update, then the Workload deleted.
    on_worker("delete", "job", "interop-t", "-n", "default", "--cascade=background",
              "--wait=false")  # fmt: skip
    remote = get(on_worker, WORKLOADS, name, "-n", "default")
    if remote is not None:
        remote["metadata"]["finalizers"] = [
            f for f in remote["metadata"].get("finalizers") or [] if f != IN_USE
        ]
        on_worker("replace", "-f", "-", input=json.dumps(remote), check=False)
        on_worker("delete", WORKLOADS, name, "-n", "default", "--wait=false", check=False)
    wait(lambda: get(on_worker, WORKLOADS, name, "-n", "default") is None
         and get(on_worker, "job", "interop-t", "-n", "default") is None,
         timeout=60, what="the copies gone from the worker")  # fmt: skip
    # And nothing made again in their place.
    listed = (get(on_worker, WORKLOADS, "-n", "default") or {}).get("items") or []
    assert listed == []

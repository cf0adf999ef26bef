"""MultiKueue on two real v1.32 control planes: a manager and a worker, each with its Tower.

`TOWER_E2E_KUBECONFIG` is the manager, `TOWER_E2E_WORKER_KUBECONFIG` the worker (the second
control plane of shared/realk8s, REALK8S_PORT_OFFSET=100); `TOWER_E2E_WORKER_RUN` (its
REALK8S_RUN) lets the last test kill the worker's kube-apiserver and start it again. The
manager's webhook runs at TOWER_E2E_WEBHOOK_URL and reads the manager's queues, so Kueue's
sample Job is handed to MultiKueue unchanged. There is no kubelet: the worker's pods are
bound by its kube-scheduler and the test finishes them, as a kubelet would report.

Then, as Kueue's e2e "Should run a job on worker if admitted" expects: the Job reserves quota
on the manager, runs on the worker only (its pods bound to the worker's node, none on the
manager), the manager's Job mirrors the worker's, its completion reaches the manager's Job
and Workload, and the copies on the worker are removed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests import yamlc
from tests.e2e.conftest import (
    KUBECONFIG,
    ROOT,
    controller_process,
    kubectl,
    listening,
    serve_webhook,
    wait,
)
from tests.servers import free_port

WORKER = os.environ.get("TOWER_E2E_WORKER_KUBECONFIG")
WORKER_RUN = os.environ.get("TOWER_E2E_WORKER_RUN")
EXAMPLES = Path(ROOT) / "tests" / "data" / "kueue-v0.19.2" / "examples"
MPIJOB_CRD = Path(ROOT) / "tests" / "data" / "kubeflow" / "kubeflow.org_mpijobs.v2beta1.yaml"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"

# A pod kept on the manager keeps both gates it was created behind, as in Kueue.
MANAGER_GATES = [{"name": "kueue.x-k8s.io/admission"}, {"name": "kueue.x-k8s.io/topology"}]
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not WORKER,
        reason="no worker cluster: set TOWER_E2E_WORKER_KUBECONFIG to a second cluster's "
        "kubeconfig (shared/realk8s/up.sh with REALK8S_PORT_OFFSET=100)",
    ),
]


def on_worker(*args: str, input: str | None = None, check: bool = True) -> str:
    return kubectl(*args, input=input, check=check, kubeconfig=WORKER)


def get(where: Any, *args: str) -> dict[str, Any] | None:
    out = where("get", *args, "-o", "json", check=False)
    try:
        return dict(json.loads(out))
    except json.JSONDecodeError:
        return None


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return dict(c)
    return {}


def node(name: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        }
    )


@pytest.fixture
def clusters(tmp_path):
    """Tower's CRDs on both; a Ready node on the worker; Kueue's setups; both Towers."""
    for where in (kubectl, on_worker):
        where("apply", "-f", str(Path(ROOT) / "deploy" / "crds"))
        # mpi-operator's CRD on both (its operator would run on the worker only).
        where("apply", "--server-side", "-f", str(MPIJOB_CRD))
        where("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        where("create", "namespace", "tower-system", check=False)
    # The manager's webhook first: Kueue's objects are validated by it.
    webhook = serve_webhook(
        tmp_path / "certs",
        ["--kubeconfig", KUBECONFIG or "", "--controller-username", "kubernetes-admin"],
    )
    # The worker's own webhook (it queues what the manager copies there, pods included).
    worker_webhook = serve_worker_webhook(tmp_path / "worker-certs")
    on_worker("apply", "-f", "-", input=node("worker-node-1"))
    status = {"status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                         "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                         "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                         "message": "e2e"}]}}  # fmt: skip
    on_worker("patch", "node", "worker-node-1", "--subresource=status", "--type=merge", "-p",
              json.dumps(status))  # fmt: skip
    on_worker("taint", "node", "worker-node-1", "node.kubernetes.io/not-ready-", check=False)
    on_worker("apply", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"))
    # The worker's kubeconfig in a Secret of Tower's namespace on the manager (Kueue's guide
    # puts it in kueue-system; Tower reads its own namespace).
    flat = on_worker("config", "view", "--raw", "--flatten", "--minify")
    kubectl("create", "secret", "generic", "worker1-secret", "-n", "tower-system",
            f"--from-literal=kubeconfig={flat}", check=False)  # fmt: skip
    kubectl("apply", "-f", str(EXAMPLES / "multikueue" / "multikueue-setup.yaml"))
    manager = controller_process(
        "--physical-resources", "none", "--multikueue-admission-timeout", "0"
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "extender", "run", "--kubeconfig", WORKER or "",
         "--no-leader-elect", "--health-address", "127.0.0.1:0",
         "--metrics-address", "127.0.0.1:0",
         "--physical-resources", "none"],
        cwd=ROOT,
    )  # fmt: skip
    yield
    for proc in (manager, worker, webhook, worker_webhook):
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    for where in (kubectl, on_worker):
        where("delete", "jobs,statefulsets,mpijobs", "--all", "-n", "default", "--wait=false",
              check=False)  # fmt: skip
        where("delete", "pods", "--all", "-n", "default", "--force", "--grace-period=0",
              check=False)  # fmt: skip
        where("delete", "workloads.kueue.x-k8s.io", "--all", "-n", "default", "--wait=false",
              check=False)  # fmt: skip
    kubectl("delete", "-f", str(EXAMPLES / "multikueue" / "multikueue-setup.yaml"), check=False)
    # Its webhook is gone: its registration goes too, or the next create of a Kueue object
    # would be refused (the validating hooks fail closed).
    for where in (kubectl, on_worker):
        where("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
        where("delete", "validatingwebhookconfiguration", "tower-validating-webhook",
              check=False)  # fmt: skip
    kubectl("delete", "secret", "worker1-secret", "-n", "tower-system", check=False)
    on_worker("delete", "-f", str(EXAMPLES / "single-clusterqueue-setup.yaml"), check=False)
    # The hand-made Node goes too: another suite's pods would be bound to it, with no kubelet.
    on_worker("delete", "node", "worker-node-1", "--wait=false", check=False)


def serve_worker_webhook(tmp: Path) -> subprocess.Popen[bytes]:
    """Tower's webhook for the worker, on this machine at another port, registered there."""
    port = free_port()
    python = [sys.executable, "-m"]
    subprocess.run([*python, "certs", "generate", "--out", str(tmp), "--ip-address",
                    "127.0.0.1"], check=True, cwd=ROOT)  # fmt: skip
    server = subprocess.Popen(
        [*python, "webhook", "--port", str(port), "--bind-address", "127.0.0.1",
         "--tls-cert-file", str(tmp / "tls.crt"), "--tls-private-key-file", str(tmp / "tls.key"),
         "--controller-username", "kubernetes-admin"],
        cwd=ROOT,
    )  # fmt: skip
    wait(lambda: listening("127.0.0.1", port), what="the worker's webhook to listen")
    subprocess.run([*python, "certs", "install", "--kubeconfig", WORKER or "", "--url",
                    f"https://127.0.0.1:{port}", "--certs-dir", str(tmp)], check=True,
                   cwd=ROOT)  # fmt: skip
    return server


def sample_job(name: str) -> str:
    """Kueue's sample Job, with a name of the test's and one pod (no kubelet runs them)."""
    [job] = yamlc.safe_load_all((EXAMPLES / "jobs" / "sample-job.yaml").read_text())
    del job["metadata"]["generateName"]
    job["metadata"]["name"] = name
    job["spec"]["parallelism"] = job["spec"]["completions"] = 1
    return json.dumps(job)


def active_check(where: Any, name: str) -> dict[str, Any]:
    return condition(get(where, "admissionchecks.kueue.x-k8s.io", name), "Active")


def workload_of(job: str) -> dict[str, Any] | None:
    listed = get(kubectl, "workloads.kueue.x-k8s.io", "-n", "default") or {"items": []}
    for wl in listed["items"]:
        if any(o.get("name") == job for o in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


def finish_pods(job: str) -> None:
    pods = get(on_worker, "pods", "-n", "default", "-l", f"batch.kubernetes.io/job-name={job}")
    for pod in (pods or {}).get("items") or []:
        on_worker("patch", "pod", pod["metadata"]["name"], "-n", "default",
                  "--subresource=status", "--type=merge", "-p",
                  json.dumps({"status": {"phase": "Succeeded"}}))  # fmt: skip


def test_a_job_runs_on_the_worker_that_admits_it(clusters):
    # Kueue's "verify" step.
    mkc = wait(
        lambda: (c := condition(get(kubectl, "multikueuecluster", "multikueue-test-worker1"),
                                "Active")).get("status") == "True" and c,
        what="the MultiKueueCluster connected",
    )  # fmt: skip
    assert (mkc["reason"], mkc["message"]) == ("Active", "Connected")
    wait(lambda: active_check(kubectl, "sample-multikueue").get("status") == "True",
         what="the AdmissionCheck Active")  # fmt: skip
    assert "Can admit new workloads" in kubectl(
        "get", "clusterqueues", "cluster-queue", "-o",
        "jsonpath={.status.conditions[?(@.type=='Active')].message}",
    )  # fmt: skip

    kubectl("create", "-f", "-", input=sample_job("sample-job-e2e"))
    job = get(kubectl, "job", "sample-job-e2e", "-n", "default")
    assert job is not None
    assert job["spec"]["managedBy"] == MULTIKUEUE
    wl = wait(lambda: workload_of("sample-job-e2e"), what="the manager's Workload")
    name = wl["metadata"]["name"]

    def admitted() -> dict[str, Any] | None:
        w = get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", "default")
        return w if condition(w, "Admitted").get("status") == "True" else None

    wl = wait(admitted, timeout=60, what="admitted on the manager")
    [check] = wl["status"]["admissionChecks"]
    assert (check["state"], check["message"]) == (
        "Ready",
        'The workload was admitted on "multikueue-test-worker1"',
    )
    wait(lambda: (get(kubectl, "job", "sample-job-e2e", "-n", "default") or {})["spec"]
         .get("suspend") is False, what="the manager's Job started")  # fmt: skip
    # It runs on the worker: its pod bound there, on the worker's node; none on the manager.
    pod = wait(
        lambda: next(
            (p for p in (get(on_worker, "pods", "-n", "default", "-l",
                             "batch.kubernetes.io/job-name=sample-job-e2e") or {}).get("items")
             or [] if p["spec"].get("nodeName")),
            None,
        ),
        timeout=60,
        what="the worker's pod bound",
    )  # fmt: skip
    assert pod["spec"]["nodeName"] == "worker-node-1"
    remote = get(on_worker, "job", "sample-job-e2e", "-n", "default")
    assert remote is not None
    assert remote["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == name
    manager_pods = get(kubectl, "pods", "-n", "default", "-l",
                       "batch.kubernetes.io/job-name=sample-job-e2e") or {}  # fmt: skip
    assert manager_pods.get("items") == []
    # The manager's Job mirrors the worker's (Kueue's e2e: startTime, active 1).
    status = wait(
        lambda: (s := (get(kubectl, "job", "sample-job-e2e", "-n", "default") or {})
                 .get("status") or {}).get("active") == 1 and s,
        timeout=60,
        what="the manager's Job mirroring the worker's",
    )  # fmt: skip
    assert status["startTime"]
    assert "completionTime" not in status

    finish_pods("sample-job-e2e")
    finished = wait(
        lambda: (c := condition(get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", "default"),
                                "Finished")).get("status") == "True" and c,
        timeout=90,
        what="the manager's Workload finished",
    )  # fmt: skip
    assert finished["reason"] == "Succeeded"
    assert condition(get(kubectl, "job", "sample-job-e2e", "-n", "default"),
                     "Complete").get("status") == "True"  # fmt: skip
    wait(lambda: get(on_worker, "job", "sample-job-e2e", "-n", "default") is None
         and get(on_worker, "workloads.kueue.x-k8s.io", name, "-n", "default") is None,
         timeout=90, what="the worker's copies removed")  # fmt: skip


def test_deleting_the_job_on_the_manager_removes_the_copies(clusters):
    wait(lambda: active_check(kubectl, "sample-multikueue").get("status") == "True",
         what="the AdmissionCheck Active")  # fmt: skip
    kubectl("create", "-f", "-", input=sample_job("deleted-e2e"))
    wait(lambda: get(on_worker, "job", "deleted-e2e", "-n", "default"), timeout=60,
         what="the worker's Job")  # fmt: skip
    kubectl("delete", "job", "deleted-e2e", "-n", "default", "--wait=false")
    wait(lambda: get(on_worker, "job", "deleted-e2e", "-n", "default") is None, timeout=90,
         what="the worker's Job removed")  # fmt: skip


@pytest.mark.skipif(not WORKER_RUN, reason="TOWER_E2E_WORKER_RUN (the worker's REALK8S_RUN) is "
                    "not set: the worker's kube-apiserver cannot be restarted")  # fmt: skip
def test_the_workers_api_server_killed_mid_flight(clusters):
    """The cluster goes inactive on the manager; nothing is admitted twice; once the worker
    is back, the Job completes as before."""
    wait(lambda: active_check(kubectl, "sample-multikueue").get("status") == "True",
         what="the AdmissionCheck Active")  # fmt: skip
    kubectl("create", "-f", "-", input=sample_job("outage-e2e"))
    wl = wait(lambda: workload_of("outage-e2e"), what="the manager's Workload")
    name = wl["metadata"]["name"]
    admitted = wait(
        lambda: (c := condition(get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", "default"),
                                "Admitted")).get("status") == "True" and c,
        timeout=60,
        what="admitted",
    )  # fmt: skip
    pids = Path(WORKER_RUN or "") / "pids"
    # The last one started (an earlier run of this test appends the one it restarts).
    line = [p for p in pids.read_text().splitlines() if p.endswith(" kube-apiserver")][-1]
    pid = int(line.split()[0])
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    os.kill(pid, signal.SIGKILL)
    lost = wait(
        lambda: (c := condition(get(kubectl, "multikueuecluster", "multikueue-test-worker1"),
                                "Active")).get("status") == "False" and c,
        timeout=60,
        what="the worker inactive on the manager",
    )  # fmt: skip
    assert lost["reason"] == "ClientConnectionFailed"
    assert active_check(kubectl, "sample-multikueue")["reason"] == "NoUsableClusters"
    # Within workerLostTimeout (15 minutes) the admission holds: still admitted once.
    time.sleep(5)
    wl = get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", "default")
    assert condition(wl, "Admitted").get("status") == "True"
    assert wl["status"]["clusterName"] == "multikueue-test-worker1"
    with open(Path(WORKER_RUN or "") / "logs" / "kube-apiserver.log", "ab") as log:
        restarted = subprocess.Popen([c.decode() for c in command], stdout=log, stderr=log,
                                     start_new_session=True)  # fmt: skip
    with open(pids, "a") as out:
        out.write(f"{restarted.pid} kube-apiserver\n")
    wait(lambda: condition(get(kubectl, "multikueuecluster", "multikueue-test-worker1"),
                           "Active").get("status") == "True", timeout=120,
         what="the worker connected again")  # fmt: skip
    wait(lambda: get(on_worker, "job", "outage-e2e", "-n", "default"), timeout=60,
         what="the worker's Job")  # fmt: skip
    wait(lambda: any(p["spec"].get("nodeName") for p in (get(on_worker, "pods", "-n", "default",
         "-l", "batch.kubernetes.io/job-name=outage-e2e") or {}).get("items") or []),
         timeout=60, what="its pod bound")  # fmt: skip
    finish_pods("outage-e2e")
    wait(lambda: condition(get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", "default"),
                           "Finished").get("status") == "True", timeout=90,
         what="finished on the manager")  # fmt: skip
    # Admitted once: never evicted, its admission the same one throughout.
    wl = get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", "default")
    assert condition(wl, "Evicted").get("status") != "True"
    assert condition(wl, "Admitted")["lastTransitionTime"] == admitted["lastTransitionTime"]


def admitted_on_worker(name: str) -> dict[str, Any]:
    def admitted() -> dict[str, Any] | None:
        w = get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", "default")
        return w if condition(w, "Admitted").get("status") == "True" else None

    wl = wait(admitted, timeout=90, what=f"{name} admitted on the manager")
    [check] = wl["status"]["admissionChecks"]
    assert (check["state"], check["message"]) == (
        "Ready",
        'The workload was admitted on "multikueue-test-worker1"',
    )
    return wl


def test_kueues_mpijob_sample_runs_on_the_worker(clusters):
    """Kueue's MPIJob sample, unchanged, with mpi-operator's CRD: handed to MultiKueue in its
    runPolicy, run on the worker only, finished there as mpi-operator would say."""
    wait(lambda: active_check(kubectl, "sample-multikueue").get("status") == "True",
         what="the AdmissionCheck Active")  # fmt: skip
    # As created (the webhook's answer): a read afterwards may already find it started.
    job = json.loads(
        kubectl("create", "-f", str(EXAMPLES / "jobs" / "sample-mpijob.yaml"), "-o", "json")
    )
    assert job["spec"]["runPolicy"]["managedBy"] == MULTIKUEUE
    assert job["spec"]["runPolicy"]["suspend"] is True
    wl = wait(lambda: workload_of("pi"), what="the manager's Workload")
    name = wl["metadata"]["name"]
    admitted_on_worker(name)
    remote = wait(
        lambda: (j := get(on_worker, "mpijob", "pi", "-n", "default"))
        and j["spec"]["runPolicy"].get("suspend") is False
        and j,
        timeout=60,
        what="the worker's MPIJob started",
    )  # fmt: skip
    assert "managedBy" not in remote["spec"]["runPolicy"]
    assert remote["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == name
    succeeded = {"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded",
                 "message": "MPIJob default/pi successfully completed.",
                 "lastTransitionTime": "2026-12-01T00:00:00Z",
                 "lastUpdateTime": "2026-12-01T00:00:00Z"}  # fmt: skip
    on_worker("patch", "mpijob", "pi", "-n", "default", "--subresource=status", "--type=merge",
              "-p", json.dumps({"status": {"conditions": [succeeded]}}))  # fmt: skip
    finished = wait(
        lambda: (c := condition(get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", "default"),
                                "Finished")).get("status") == "True" and c,
        timeout=90,
        what="the manager's Workload finished",
    )  # fmt: skip
    assert (finished["reason"], finished["message"]) == ("Succeeded", succeeded["message"])
    assert condition(get(kubectl, "mpijob", "pi", "-n", "default"), "Succeeded")["status"] == "True"
    wait(lambda: get(on_worker, "mpijob", "pi", "-n", "default") is None
         and get(on_worker, "workloads.kueue.x-k8s.io", name, "-n", "default") is None,
         timeout=90, what="the worker's copies removed")  # fmt: skip


def test_kueues_statefulset_sample_runs_on_the_worker(clusters):
    """Kueue's StatefulSet sample, unchanged, with both clusters' StatefulSet controllers:
    the manager's pods stay gated; the worker's copy makes its pods there, which the worker's
    Tower lets through and kube-scheduler binds; deleted on the manager, the copy goes."""
    wait(lambda: active_check(kubectl, "sample-multikueue").get("status") == "True",
         what="the AdmissionCheck Active")  # fmt: skip
    sts = json.loads(
        kubectl("create", "-f", str(EXAMPLES / "serving" / "sample-statefulset.yaml"), "-n",
                "default", "-o", "json")
    )  # fmt: skip
    wl = wait(
        lambda: next(
            (w for w in (get(kubectl, "workloads.kueue.x-k8s.io", "-n", "default") or {})
             .get("items") or []
             if w["metadata"].get("annotations", {}).get("kueue.x-k8s.io/job-owner-name")
             == "nginx-statefulset"),
            None,
        ),
        what="the StatefulSet's Workload",
    )  # fmt: skip
    name = wl["metadata"]["name"]
    admitted_on_worker(name)
    remote = wait(lambda: get(on_worker, "statefulset", "nginx-statefulset", "-n", "default"),
                  timeout=60, what="the worker's StatefulSet")  # fmt: skip
    assert (
        remote["metadata"]["annotations"]["kueue.x-k8s.io/multikueue-origin-uid"]
        == (sts["metadata"]["uid"])
    )
    # The worker's StatefulSet controller makes its first pod; the worker's Tower lets it
    # through under the manager's Workload's name, and kube-scheduler binds it.
    pod = wait(
        lambda: (p := get(on_worker, "pod", "nginx-statefulset-0", "-n", "default"))
        and p["spec"].get("nodeName")
        and p,
        timeout=90,
        what="the worker's pod let through and bound",
    )  # fmt: skip
    assert pod["spec"]["nodeName"] == "worker-node-1"
    copy = get(on_worker, "workloads.kueue.x-k8s.io", name, "-n", "default")
    assert condition(copy, "Admitted").get("status") == "True"
    # The manager's controller makes its pod too: gated, it never runs there.
    here = wait(lambda: get(kubectl, "pod", "nginx-statefulset-0", "-n", "default"),
                timeout=60, what="the manager's pod")  # fmt: skip
    time.sleep(3)
    here = get(kubectl, "pod", "nginx-statefulset-0", "-n", "default") or here
    assert here["spec"].get("schedulingGates") == MANAGER_GATES
    assert not here["spec"].get("nodeName")
    kubectl("delete", "statefulset", "nginx-statefulset", "-n", "default", "--wait=false")
    wait(lambda: get(on_worker, "statefulset", "nginx-statefulset", "-n", "default") is None
         and get(on_worker, "workloads.kueue.x-k8s.io", name, "-n", "default") is None,
         timeout=90, what="the worker's copies removed")  # fmt: skip


def test_kueues_pod_sample_runs_on_the_worker(clusters):
    """Kueue's plain-pod sample, unchanged: gated on the manager for good, copied to the
    worker, let through and bound there; its status (as the worker's kubelet would report it)
    is the manager's pod's too, and its end finishes the manager's Workload."""
    wait(lambda: active_check(kubectl, "sample-multikueue").get("status") == "True",
         what="the AdmissionCheck Active")  # fmt: skip
    made = json.loads(
        kubectl("create", "-f", str(EXAMPLES / "pods" / "kueue-pod.yaml"), "-n", "default",
                "-o", "json")
    )  # fmt: skip
    pod_name = made["metadata"]["name"]
    wl = wait(lambda: workload_of(pod_name), what="the pod's Workload")
    name = wl["metadata"]["name"]
    admitted_on_worker(name)
    remote = wait(
        lambda: (p := get(on_worker, "pod", pod_name, "-n", "default"))
        and p["spec"].get("nodeName")
        and p,
        timeout=90,
        what="the worker's pod let through and bound",
    )  # fmt: skip
    assert remote["metadata"]["annotations"]["kueue.x-k8s.io/prebuilt-workload-name"] == name
    here = get(kubectl, "pod", pod_name, "-n", "default")
    assert here is not None
    assert here["spec"].get("schedulingGates") == MANAGER_GATES
    # The worker's kubelet would say it runs, then that it succeeded: the manager's shows it.
    on_worker("patch", "pod", pod_name, "-n", "default", "--subresource=status", "--type=merge",
              "-p", json.dumps({"status": {"phase": "Running"}}))  # fmt: skip
    wait(lambda: ((get(kubectl, "pod", pod_name, "-n", "default") or {}).get("status") or {})
         .get("phase") == "Running", timeout=60, what="the manager's pod Running")  # fmt: skip
    on_worker("patch", "pod", pod_name, "-n", "default", "--subresource=status", "--type=merge",
              "-p", json.dumps({"status": {"phase": "Succeeded"}}))  # fmt: skip
    finished = wait(
        lambda: (c := condition(get(kubectl, "workloads.kueue.x-k8s.io", name, "-n", "default"),
                                "Finished")).get("status") == "True" and c,
        timeout=90,
        what="the manager's Workload finished",
    )  # fmt: skip
    assert finished["reason"] == "Succeeded"
    wait(lambda: get(on_worker, "workloads.kueue.x-k8s.io", name, "-n", "default") is None,
         timeout=90, what="the worker's copy removed")  # fmt: skip


def test_kueues_pod_group_sample_runs_on_the_worker(clusters):
    """Kueue's pod-group sample, unchanged: one Workload for both pods, admitted on the worker,
    both let through and bound there; their end finishes the manager's Workload, and the
    worker's pods and Workload are removed. (The worker's Tower must take Kueue's finalizer off
    pods the manager deletes, even once their Workload is gone: none may stay Terminating.)"""
    wait(lambda: active_check(kubectl, "sample-multikueue").get("status") == "True",
         what="the AdmissionCheck Active")  # fmt: skip
    # kubectl prints one JSON document per object it created.
    out = kubectl("create", "-f", str(EXAMPLES / "pods" / "kueue-pod-group.yaml"), "-n",
                  "default", "-o", "json").strip()  # fmt: skip
    names, decoder, at = [], json.JSONDecoder(), 0
    while at < len(out):
        made, at = decoder.raw_decode(out, at)
        names.append(made["metadata"]["name"])
        while at < len(out) and out[at].isspace():
            at += 1
    assert len(names) == 2
    admitted_on_worker("sample-group")
    for pod_name in names:
        wait(lambda n=pod_name: (p := get(on_worker, "pod", n, "-n", "default"))
             and p["spec"].get("nodeName"), timeout=90,
             what=f"the worker's pod {pod_name} let through and bound")  # fmt: skip
        here = get(kubectl, "pod", pod_name, "-n", "default")
        assert here is not None
        assert here["spec"].get("schedulingGates") == MANAGER_GATES
    for phase in ("Running", "Succeeded"):
        for pod_name in names:
            on_worker("patch", "pod", pod_name, "-n", "default", "--subresource=status",
                      "--type=merge", "-p", json.dumps({"status": {"phase": phase}}))  # fmt: skip
    finished = wait(
        lambda: (c := condition(get(kubectl, "workloads.kueue.x-k8s.io", "sample-group", "-n",
                                    "default"), "Finished")).get("status") == "True" and c,
        timeout=90,
        what="the manager's Workload finished",
    )  # fmt: skip
    assert finished["reason"] == "Succeeded"
    wait(lambda: get(on_worker, "workloads.kueue.x-k8s.io", "sample-group", "-n", "default") is None
         and all(get(on_worker, "pod", n, "-n", "default") is None for n in names),
         timeout=90, what="the worker's Workload and pods removed")  # fmt: skip

"""Pods that really run on the real node, under Tower installed in the cluster (kustomize).

Its Configuration turns WaitForPodsReady on with short times (a 20 s timeout, backoff from
2 s, one requeue). Then, with real containers, real probes and a real kubelet:
- a Job whose pod never becomes Ready (its readiness probe fails) is evicted after the
  timeout, requeued, and deactivated past the limit, with Kueue's reasons; its pods stop;
- in a pod group, a pod that exits 1 is replaced by its user, and the replacement runs under
  the group's admission: the same Workload, never evicted, Finished once the group is done;
- the node's kubelet stopped while a Job runs on it, then started again: the Job keeps its
  admission and completes (this control plane runs no node lifecycle controller, so the Node
  never turns NotReady: see docs/operations.md, "A node that fails");
- kube-scheduler, configured with Tower's extender at the controller Service's ClusterIP,
  calls the extender in Tower's pods to place a GPU pod (the node's GPUs are advertised as
  an extended resource, as a device plugin would).
Nodes without a kubelet are cordoned meanwhile.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import subprocess
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import KUBECONFIG, kubectl, measured, only_real_nodes, wait

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
NS = "tower-system"
TEST_NS = f"tower-real-{uuid.uuid4().hex[:5]}"
WAIT_FOR_PODS_READY = {
    "timeout": "20s",
    "recoveryTimeout": "20s",
    "requeuingStrategy": {
        "timestamp": "Eviction",
        "backoffBaseSeconds": 2,
        "backoffMaxSeconds": 4,
        "backoffLimitCount": 1,
    },
}
GPU = "nvidia.com/gpu"


def get(*args: str) -> Any:
    done = subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG or "", "get", *args, "-o", "json"],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, f"kubectl get {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def apply(*docs: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))


def install_manifests() -> list[dict[str, Any]]:
    """deploy/default as kustomize renders it, its Configuration with WaitForPodsReady on."""
    rendered = kubectl("kustomize", str(ROOT / "deploy" / "default"))
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    for doc in docs:
        if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "tower-manager-config":
            key = "controller_manager_config.yaml"
            config = yaml.safe_load(doc["data"][key])
            config["waitForPodsReady"] = WAIT_FOR_PODS_READY
            doc["data"][key] = yaml.safe_dump(config)
    return docs


def queues() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": "real-node"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": "real-pods"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", GPU],
             "flavors": [{"name": "real-node", "resources": [
                 {"name": "cpu", "nominalQuota": "1"}, {"name": GPU, "nominalQuota": "4"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "real-pods", "namespace": TEST_NS},
         "spec": {"clusterQueue": "real-pods"}},
    ]  # fmt: skip


def container(command: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "c",
        "image": "busybox:1.36",
        "command": ["sh", "-c", command],
        "resources": {"requests": {"cpu": "100m"}},
        **extra,
    }


def job(name: str, node: str, spec: dict[str, Any], backoff: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": TEST_NS,
                     "labels": {"kueue.x-k8s.io/queue-name": "real-pods"}},
        "spec": {"backoffLimit": backoff, "template": {"spec": {
            "restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 1, "containers": [spec]}}},
    }  # fmt: skip


def workload_of(kind: str, name: str) -> dict[str, Any] | None:
    for wl in get("workloads.kueue.x-k8s.io", "-n", TEST_NS)["items"]:
        if any(o.get("name") == name and o.get("kind") == kind
               for o in wl["metadata"].get("ownerReferences", [])):  # fmt: skip
            return wl
    return None


def condition(wl: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    for c in ((wl or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return {}


def pods_of(selector: str) -> list[dict[str, Any]]:
    return get("pods", "-n", TEST_NS, "-l", selector)["items"]


@pytest.fixture(scope="module")
def installed(api_client, real_node):
    with only_real_nodes(api_client):
        kubectl("apply", "-f", "-", input=yaml.safe_dump_all(install_manifests()))
        for name in ("tower-webhook", "tower-controller"):
            kubectl("rollout", "status", f"deployment/{name}", "-n", NS, "--timeout=300s")
        kubectl("create", "namespace", TEST_NS)
        apply(*queues())
        try:
            yield real_node
        finally:
            kubectl("delete", "namespace", TEST_NS, "--wait=true", "--timeout=120s", check=False)
            kubectl("delete", "-f", "-", input=yaml.safe_dump_all(queues()[:2]), check=False)
            kubectl("delete", "-k", str(ROOT / "deploy" / "default"), "--wait=true",
                    "--timeout=180s", check=False)  # fmt: skip


def test_a_pod_that_never_becomes_ready_is_evicted_requeued_then_deactivated(installed):
    node = installed
    probe = {"exec": {"command": ["false"]}, "periodSeconds": 1}
    apply(job("never-ready", node, container("sleep 600", readinessProbe=probe)))

    def running_not_ready() -> bool:
        for pod in pods_of("job-name=never-ready"):
            statuses = pod.get("status", {}).get("containerStatuses", [])
            if statuses and statuses[0].get("started") and not statuses[0].get("ready"):
                return True
        return False

    wait(running_not_ready, 90, "the kubelet to run the container and find it not Ready")
    started = time.monotonic()
    first = wait(lambda: (workload_of("Job", "never-ready") or {}).get("status", {})
                 .get("requeueState"), 90, "the first PodsReadyTimeout")  # fmt: skip
    measured(f"WaitForPodsReady: a never-ready pod evicted {time.monotonic() - started:.0f} s "
             "after the kubelet ran it (timeout 20 s)")  # fmt: skip
    assert first.get("count") == 1
    wait(lambda: (workload_of("Job", "never-ready") or {}).get("spec", {}).get("active") is False,
         150, "the Workload deactivated past backoffLimitCount 1")  # fmt: skip
    wl = workload_of("Job", "never-ready")
    assert condition(wl, "Evicted").get("reason") == "DeactivatedDueToRequeuingLimitExceeded", wl
    assert condition(wl, "PodsReady").get("status") == "False"
    wait(lambda: get("job", "never-ready", "-n", TEST_NS)["spec"].get("suspend") is True, 60,
         "the deactivated Job to be stopped")  # fmt: skip
    wait(lambda: pods_of("job-name=never-ready") == [], 90, "its pods to be stopped by the kubelet")


def group_pod(name: str, group: str, node: str, command: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": TEST_NS, "labels": {
            "kueue.x-k8s.io/queue-name": "real-pods", "kueue.x-k8s.io/pod-group-name": group},
            "annotations": {"kueue.x-k8s.io/pod-group-total-count": "2"}},
        "spec": {"restartPolicy": "Never", "nodeSelector": {"kubernetes.io/hostname": node},
                 "terminationGracePeriodSeconds": 1, "containers": [container(command)]},
    }  # fmt: skip


def test_a_failed_pod_of_a_group_is_replaced_under_the_groups_admission(installed):
    node = installed
    apply(group_pod("member-a", "group", node, "sleep 2; exit 1"),
          group_pod("member-b", "group", node, "sleep 20"))  # fmt: skip
    wait(lambda: condition(workload_of("Pod", "member-a"), "Admitted").get("status") == "True",
         90, "the group's Workload admitted")  # fmt: skip
    admitted = workload_of("Pod", "member-a")
    wait(lambda: get("pod", "member-a", "-n", TEST_NS)["status"].get("phase") == "Failed", 90,
         "member-a to exit 1 on the node")  # fmt: skip
    apply(group_pod("member-a-again", "group", node, "sleep 2"))
    wait(lambda: get("pod", "member-a-again", "-n", TEST_NS)["status"].get("phase") == "Succeeded",
         90, "the replacement to be let through and run")  # fmt: skip
    replacement = get("pod", "member-a-again", "-n", TEST_NS)
    assert not replacement["spec"].get("schedulingGates")
    wait(lambda: condition(workload_of("Pod", "member-b"), "Finished").get("status") == "True",
         120, "the group to finish")  # fmt: skip
    finished = workload_of("Pod", "member-b")
    assert finished["metadata"]["uid"] == admitted["metadata"]["uid"]  # one Workload throughout
    assert condition(finished, "Evicted").get("status") != "True", finished
    assert len(get("workloads.kueue.x-k8s.io", "-n", TEST_NS)["items"]) == 1 + int(
        workload_of("Job", "never-ready") is not None
    )


def kubelet_command() -> tuple[list[str], Path]:
    node_run = Path(os.environ.get("NODE_RUN", ""))
    pid = int((node_run / "kubelet.pid").read_text())
    return Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1], node_run


def test_the_kubelet_stopped_while_a_job_runs_then_back(installed):
    node = installed
    if not os.environ.get("NODE_RUN"):
        pytest.skip("NODE_RUN (shared/realk8s/node's run folder) is not set: make e2e sets it")
    apply(job("through-a-restart", node, container("sleep 30")))
    wait(lambda: any(p["status"].get("phase") == "Running"
                     for p in pods_of("job-name=through-a-restart")), 90, "the Job's pod to run")  # fmt: skip
    admitted = workload_of("Job", "through-a-restart")
    command, node_run = kubelet_command()
    os.kill(int((node_run / "kubelet.pid").read_text()), signal.SIGTERM)
    time.sleep(15)  # the container runs on under containerd; the Node's status stays as it was
    wl = workload_of("Job", "through-a-restart")
    assert condition(wl, "Admitted").get("status") == "True"
    assert condition(wl, "Evicted").get("status") != "True"
    with open(node_run / "logs" / "kubelet.log", "ab") as log:
        restarted = subprocess.Popen(["setsid", *command], stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)  # fmt: skip
    (node_run / "kubelet.pid").write_text(str(restarted.pid))
    kubectl("wait", "--for=condition=Complete", "job/through-a-restart", "-n", TEST_NS,
            "--timeout=180s")  # fmt: skip
    wait(lambda: condition(workload_of("Job", "through-a-restart"), "Finished").get("status")
         == "True", 60, "the Workload Finished")  # fmt: skip
    finished = workload_of("Job", "through-a-restart")
    assert finished["metadata"]["uid"] == admitted["metadata"]["uid"]
    assert condition(finished, "Evicted").get("status") != "True"


def extender_calls() -> float:
    """Filter and prioritize calls Tower's replicas answered, from their /metrics (HTTPS on
    8443, read as the kubeconfig's admin: its client certificate, from the cluster's CA)."""
    total = 0.0
    context = admin_tls()
    for pod in get("pods", "-n", NS, "-l", "app.kubernetes.io/name=tower-controller")["items"]:
        ip = pod["status"].get("podIP")
        if not ip:
            continue
        url = f"https://{ip}:8443/metrics"
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            for line in response.read().decode().splitlines():
                if line.startswith("tower_scheduler_extender_request_duration_seconds_count"):
                    total += float(line.split()[-1])
    return total


def admin_tls() -> ssl.SSLContext:
    """A client context with the kubeconfig user's certificate; the controller's own
    certificate is self-signed, so it is not verified (as Kueue's ServiceMonitor does not)."""
    config = yaml.safe_load(Path(KUBECONFIG or "").read_text())
    user = config["users"][0]["user"]
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"tower-e2e-admin-{os.getpid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    for key, name in (("client-certificate-data", "tls.crt"), ("client-key-data", "tls.key")):
        (folder / name).write_bytes(base64.b64decode(user[key]))
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(folder / "tls.crt", folder / "tls.key")
    return context


def stopped(pid: int) -> bool:
    """The process is gone (reaped here when this test started it)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split(") ")[-1].startswith("Z")


def restart_scheduler(config: Path) -> None:
    """kube-scheduler started again with another configuration (as an admin edits the static
    pod's file): its pid and command line are in the control plane's run folder."""
    run = Path(os.environ["TOWER_E2E_MANAGER_RUN"])
    pids = (run / "pids").read_text().split("\n")
    pid = next(int(line.split()[0]) for line in pids if line.endswith(" kube-scheduler"))
    command = Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1]
    os.kill(pid, signal.SIGTERM)
    wait(lambda: stopped(pid), 30, "kube-scheduler to stop")
    command = [c if not c.startswith("--config=") else f"--config={config}" for c in command]
    with open(run / "logs" / "kube-scheduler.log", "ab") as log:
        started = subprocess.Popen(["setsid", *command], stdout=log, stderr=log,
                                   stdin=subprocess.DEVNULL)  # fmt: skip
    kept = [line for line in pids if line and not line.endswith(" kube-scheduler")]
    (run / "pids").write_text("\n".join([*kept, f"{started.pid} kube-scheduler"]) + "\n")


def test_kube_scheduler_calls_the_extender_in_towers_pods_through_its_service(installed, tmp_path):
    node = installed
    if not os.environ.get("TOWER_E2E_MANAGER_RUN"):
        pytest.skip("TOWER_E2E_MANAGER_RUN (the control plane's run folder) is not set")
    ip = get("service", "tower-controller", "-n", NS)["spec"]["clusterIP"]
    config = yaml.safe_load(
        (ROOT / "deploy" / "scheduler" / "kube-scheduler-config.yaml").read_text()
    )
    run = Path(os.environ["TOWER_E2E_MANAGER_RUN"])
    config["clientConnection"]["kubeconfig"] = str(run / "scheduler.kubeconfig")
    config["leaderElection"] = {"leaderElect": False}
    config["extenders"][0]["urlPrefix"] = f"http://{ip}:8082/scheduler"
    path = tmp_path / "scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    original = next(c for c in Path(f"/proc/{_scheduler_pid(run)}/cmdline").read_text().split("\0")
                    if c.startswith("--config="))[len("--config="):]  # fmt: skip
    capacity = {"status": {"capacity": {GPU: "4"}, "allocatable": {GPU: "4"}}}
    kubectl(
        "patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(capacity)
    )
    restart_scheduler(path)
    try:
        before = extender_calls()
        gpu = container("sleep 3")
        gpu["resources"] = {"requests": {"cpu": "100m", GPU: "1"}, "limits": {GPU: "1"}}
        apply(job("one-gpu", node, gpu))
        kubectl("wait", "--for=condition=Complete", "job/one-gpu", "-n", TEST_NS, "--timeout=180s")
        calls = extender_calls() - before
        assert calls >= 1, "kube-scheduler never called Tower's extender"
        measured(f"scheduler extender: {calls:.0f} calls from kube-scheduler through the "
                 f"Service {ip}:8082 to place one GPU pod")  # fmt: skip
    finally:
        restart_scheduler(Path(original))
        gone = {"status": {"capacity": {GPU: None}, "allocatable": {GPU: None}}}
        kubectl(
            "patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps(gone)
        )


def _scheduler_pid(run: Path) -> int:
    lines = (run / "pids").read_text().split("\n")
    return next(int(line.split()[0]) for line in lines if line.endswith(" kube-scheduler"))

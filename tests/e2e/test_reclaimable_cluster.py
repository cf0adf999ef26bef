"""Reclaimable pods on a real control plane, with real pods: a running Job's finished pods give
their quota back (status.reclaimablePods), and a waiting Job is admitted into it.

A ClusterQueue of 200m cpu is full with an Indexed Job of 100m pods, parallelism 2 and
completions 4, whose pods sleep different times (index 1 for 40 s, the others 2-4 s). A
100m Job waits. Once two pods succeeded the two completions left still fill both slots:
nothing is reclaimable (Kueue's rule). Once a third succeeded, one slot is free for good:
`reclaimablePods: [{name: main, count: 1}]`, and the waiting Job is admitted while the first
still runs its last pod. Measured: from the third success (as the Job's status says) to the
second Job's start. Pods run on the real node where there is one (the stand-in otherwise).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import (
    KUBECONFIG,
    controller_process,
    kubectl,
    measured,
    serve_webhook,
    wait,
    webhook_host_port,
)
from tests.e2e.kubelet import real_nodes

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
NS = f"tower-reclaim-{uuid.uuid4().hex[:5]}"


def queues() -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: reclaim-flavor}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: reclaim-cq}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: reclaim-flavor, resources: [{{name: cpu, nominalQuota: "200m"}}]}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: reclaim-queue, namespace: {NS}}}
spec: {{clusterQueue: reclaim-cq}}
"""


def get(*args: str) -> Any:
    done = subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG or "", "get", *args, "-o", "json"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def job(name: str, parallelism: int, completions: int, sleep: str, nodes: list[str]) -> str:
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sh", "-c", sleep],
                        "resources": {"requests": {"cpu": "100m"}}}],
    }  # fmt: skip
    if nodes:
        pod["nodeSelector"] = {"kubernetes.io/hostname": nodes[0]}
    return json.dumps({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"kueue.x-k8s.io/queue-name": "reclaim-queue"}},
        "spec": {"parallelism": parallelism, "completions": completions,
                 "completionMode": "Indexed", "backoffLimit": 0, "template": {"spec": pod}},
    })  # fmt: skip


def workload_of(job_name: str) -> dict[str, Any] | None:
    for wl in get("workloads.kueue.x-k8s.io", "-n", NS)["items"]:
        if any(o.get("name") == job_name for o in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def started(name: str) -> bool:
    return get("job", name, "-n", NS)["spec"].get("suspend") is False


@pytest.fixture(scope="module")
def controller(api_client, kubelet_namespaces, tmp_path_factory):
    webhook_host_port()  # skips, with the reason, where no URL reaches this machine
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    kubectl("create", "namespace", NS)
    kubelet_namespaces.add(NS)
    kubectl("apply", "-f", "-", input=queues())
    webhook = serve_webhook(
        tmp_path_factory.mktemp("reclaim"), ["--controller-username", "kubernetes-admin"]
    )
    proc = controller_process()
    yield real_nodes(api_client)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    webhook.terminate()
    webhook.wait(timeout=20)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)
    kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)
    kubectl("delete", "-f", "-", input=queues(), check=False)


def test_finished_pods_give_their_quota_to_a_waiting_job(controller):
    nodes = controller
    # Index 1 runs long; 0, 2 and 3 end after 2, 3 and 4 s, one after the other.
    sleep = (
        'if [ "$JOB_COMPLETION_INDEX" = 1 ]; then sleep 40; '
        "else sleep $((JOB_COMPLETION_INDEX + 2)); fi"
    )
    kubectl("create", "-f", "-", input=job("first", 2, 4, sleep, nodes))
    wait(lambda: started("first"), 60, "the first Job admitted")
    kubectl("create", "-f", "-", input=job("second", 1, 1, "sleep 5", nodes))
    wait(lambda: workload_of("second"), 60, "the second Job's Workload")

    seen_two = False
    third_at = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        status = get("job", "first", "-n", NS).get("status") or {}
        succeeded = int(status.get("succeeded") or 0)
        if succeeded == 2 and not seen_two:
            seen_two = True
            # Two completions left for two slots: nothing reclaimable, the second Job waits.
            wl = workload_of("first") or {}
            assert not (wl.get("status") or {}).get("reclaimablePods"), wl.get("status")
            assert not started("second")
        if succeeded >= 3:
            third_at = time.monotonic()
            break
        time.sleep(0.2)
    assert third_at is not None, "the first Job's third pod never succeeded"
    wait(lambda: started("second"), 60, "the second Job admitted into the freed quota")
    admitted_after = time.monotonic() - third_at
    wl = workload_of("first")
    assert wl is not None
    assert wl["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
    first = get("job", "first", "-n", NS)
    assert first["spec"].get("suspend") is False, "the first Job runs on"
    assert int((first.get("status") or {}).get("active") or 0) == 1, first.get("status")
    assert seen_two or int(first["status"].get("succeeded") or 0) >= 3
    measured(
        f"reclaimable pods: a Job's third of 4 pods succeeded with one left to run; the waiting "
        f"Job started {admitted_after:.1f} s later, in the freed 100m "
        f"(on {'a real node' if nodes else 'the stand-in'})"
    )
    assert admitted_after < 10, admitted_after

"""Kueue's sample-scalable-job.yaml, applied unchanged on a real control plane, scaled down and
then up on a busy queue: what the slices do and how long the scale-up waits.

A ClusterQueue of 1 cpu (and memory) behind the sample's LocalQueue `user-queue` in `default`.
The elastic Job (3 pods of 100m) is admitted as its first slice; scaled down to 2, its
Workload is updated in place and the 100m it let go admits a filler Job of 750m (which did not
fit beside 3 pods). Scaled up to 5 on that busy queue, a new slice is made that waits saying
why, while the old slice keeps its quota and the Job's two new pods stay behind the elastic
scheduling gate; `kubectl tower why` shows the new slice's reason. The filler is deleted: the
new slice is admitted, the old one finished (WorkloadSliceReplaced), and the pods let through.
The test polls every 0.1 s and asserts the old slice held its quota until the new one was
admitted, and reports how long the slice waited after the room appeared.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

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

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SAMPLE = (
    ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples" / "jobs" / "sample-scalable-job.yaml"
)
NS, JOB = "default", "sample-elastic-job"
GATE = "kueue.x-k8s.io/elastic-job"


def queues() -> str:
    return """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: elastic-flavor}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: elastic-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: elastic-flavor
      resources: [{name: cpu, nominalQuota: "1"}, {name: memory, nominalQuota: 4Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: user-queue, namespace: default}
spec: {clusterQueue: elastic-cq}
"""


def filler() -> dict:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "elastic-filler", "namespace": NS,
                     "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"],
                            "resources": {"requests": {"cpu": "750m", "memory": "10Mi"}}}]}}},
    }  # fmt: skip


def get(*args: str) -> dict:
    done = subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG or "", "get", *args, "-o", "json"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    return json.loads(done.stdout) if done.returncode == 0 else {}


def condition(wl: dict, kind: str) -> dict:
    return next((c for c in wl.get("status", {}).get("conditions", []) if c["type"] == kind), {})


def slices() -> list[dict]:
    """The elastic Job's Workloads, oldest first."""
    uid = get("job", JOB, "-n", NS).get("metadata", {}).get("uid")
    items = [
        w for w in get("workloads.kueue.x-k8s.io", "-n", NS).get("items", [])
        if (w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") == uid
    ]  # fmt: skip
    replaces = "kueue.x-k8s.io/workload-slice-replacement-for"
    return sorted(items, key=lambda w: (w["metadata"]["creationTimestamp"],
                                        replaces in (w["metadata"].get("annotations") or {})))  # fmt: skip


def pods() -> tuple[int, int]:
    """The Job's pods that may run: (let through, still gated)."""
    items = get("pods", "-n", NS, "-l", f"job-name={JOB}").get("items", [])
    live = [p for p in items if p["status"].get("phase") not in ("Succeeded", "Failed")
            and not p["metadata"].get("deletionTimestamp")]  # fmt: skip
    gated = sum(
        1 for p in live if any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or [])
    )
    return len(live) - gated, gated


def reserved_milli_cpu() -> int:
    cq = get("clusterqueue", "elastic-cq")
    total = 0
    for flavor in cq.get("status", {}).get("flavorsReservation", []):
        for r in flavor["resources"]:
            if r["name"] == "cpu":
                text = str(r["total"])
                total += int(text[:-1]) if text.endswith("m") else int(float(text) * 1000)
    return total


def tower(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "extender.kube.plugin.cli", "--kubeconfig", KUBECONFIG or ""]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def controller(kubelet_namespaces, tmp_path_factory):
    webhook_host_port()  # skips, with the reason, where no URL reaches this machine
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    kubectl("delete", "job", JOB, "elastic-filler", "-n", NS, "--ignore-not-found", check=False)
    kubectl("delete", "localqueue", "user-queue", "-n", NS, "--ignore-not-found", check=False)
    kubelet_namespaces.add(NS)
    kubectl("apply", "-f", "-", input=queues())
    webhook = serve_webhook(
        tmp_path_factory.mktemp("elastic"), ["--controller-username", "kubernetes-admin"]
    )
    proc = controller_process()
    yield
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    webhook.terminate()
    webhook.wait(timeout=20)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)
    for name in (JOB, "elastic-filler"):
        kubectl("delete", "job", name, "-n", NS, "--ignore-not-found", "--cascade=foreground",
                "--wait=true", "--timeout=120s", check=False)  # fmt: skip
    kubectl("delete", "-f", "-", input=queues(), check=False)
    kubelet_namespaces.discard(NS)


def test_kueues_scalable_job_scales_down_in_place_and_up_through_a_slice(controller):
    answer = kubectl("apply", "-f", str(SAMPLE))
    assert "created" in answer, answer
    job = get("job", JOB, "-n", NS)
    assert {"name": GATE} in job["spec"]["template"]["spec"]["schedulingGates"]
    wait(lambda: pods() == (3, 0), 120, "the elastic Job admitted at 3 and its pods let through")
    [first] = slices()
    assert condition(first, "Admitted").get("status") == "True"
    name = first["metadata"]["name"]

    kubectl("patch", "job", JOB, "-n", NS, "--type=merge", "-p", '{"spec":{"parallelism":2}}')
    wait(lambda: [w["spec"]["podSets"][0]["count"] for w in slices()] == [2], 30,
         "the slice scaled down in place")  # fmt: skip
    [down] = slices()
    assert down["metadata"]["uid"] == first["metadata"]["uid"]
    wait(lambda: reserved_milli_cpu() == 200, 30, "the ClusterQueue reserving 2 x 100m")
    kubectl("create", "-f", "-", input=json.dumps(filler()))
    wait(lambda: get("job", "elastic-filler", "-n", NS)["spec"].get("suspend") is False, 60,
         "the filler admitted in the room the scale-down gave back")  # fmt: skip

    kubectl("patch", "job", JOB, "-n", NS, "--type=merge", "-p", '{"spec":{"parallelism":5}}')
    scaled = time.monotonic()

    def waiting() -> dict | None:
        found = slices()
        if len(found) == 2 and condition(found[1], "QuotaReserved").get("status") == "False":
            return found[1] if condition(found[1], "QuotaReserved").get("message") else None
        return None

    new = wait(waiting, 60, "a scale-up slice waiting for quota")
    made_after = time.monotonic() - scaled
    assert new["metadata"]["annotations"]["kueue.x-k8s.io/workload-slice-replacement-for"] == (
        f"{NS}/{name}"
    )
    message = condition(new, "QuotaReserved")["message"]
    assert f"counting the quota of {NS}/{name}, the slice it replaces" in message, message
    for asked in (new["metadata"]["name"], f"job/{JOB}"):  # the slice, and the Job itself
        why = tower("why", asked, "-n", NS, "-o", "json")
        assert "the slice it replaces" in why.stdout, (asked, why.stdout, why.stderr)

    # The queue stays busy for 5 s: the old slice keeps its quota, the new pods stay gated.
    most_through, lapses = 0, 0
    until = time.monotonic() + 5
    while time.monotonic() < until:
        old = get("workload.kueue.x-k8s.io", name, "-n", NS)
        lapses += condition(old, "QuotaReserved").get("status") != "True"
        most_through = max(most_through, pods()[0])
        time.sleep(0.1)
    assert lapses == 0, "the old slice's quota was released before the new one was admitted"
    assert most_through <= 2, f"{most_through} pods let through while 2 were admitted"

    kubectl("delete", "job", "elastic-filler", "-n", NS, "--wait=false")
    room = time.monotonic()
    old_lapsed = False
    while True:
        old = get("workload.kueue.x-k8s.io", name, "-n", NS)
        latest = get("workload.kueue.x-k8s.io", new["metadata"]["name"], "-n", NS)
        if condition(latest, "QuotaReserved").get("status") == "True":
            admitted_after = time.monotonic() - room
            break
        if condition(old, "QuotaReserved").get("status") != "True":
            old_lapsed = True
        assert time.monotonic() - room < 120, "the scale-up slice was never admitted"
        time.sleep(0.1)
    assert not old_lapsed, "the old slice's quota was released before the new one was admitted"
    wait(lambda: condition(get("workload.kueue.x-k8s.io", name, "-n", NS), "Finished")
         .get("reason") == "WorkloadSliceReplaced", 30, "the old slice replaced")  # fmt: skip
    wait(lambda: pods()[0] == 5, 60, "5 pods let through")
    assert get("job", JOB, "-n", NS)["spec"].get("suspend") is False
    measured(
        f"elastic sample-scalable-job scaled 2 -> 5 on a busy 1-cpu queue: its slice was made "
        f"{made_after:.1f} s after the patch and waited (old slice's quota held, 0 lapses, at "
        f"most {most_through} of 5 pods let through); admitted {admitted_after:.1f} s after "
        f"the filler's deletion was sent, the old slice then finished WorkloadSliceReplaced"
    )

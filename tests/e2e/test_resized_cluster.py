"""A running Job patched past its admission, on a real control plane: how many pods run, and
for how long, beyond what was admitted.

A ClusterQueue of 1 cpu admits a Job of 100m pods at parallelism 2 (of 10 completions); then
`kubectl patch job` sets parallelism 6, as in the measurement that found the hole (#51). Tower's
webhook suspends the Job in that very update, so the Job controller never sees parallelism 6
running; Tower's controller then queues it again as it now is (6 × 100m fits: it is admitted
again at 6). The test watches the Job's pods every 0.1 s from the patch on and reports the most
active at once and how long more than 2 were active. Pods run on the real node where there is
one (the stand-in kubelet's Node otherwise). A JobSet (no JobSet controller runs here) is
watched version by version: none is stored unsuspended with more replicas than admitted.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.controller.test_jobset import JOBSET_CRD, replicated
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
NS = f"tower-resize-{uuid.uuid4().hex[:5]}"


def queues() -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: resize-flavor}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: resize-cq}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{{name: resize-flavor, resources: [{{name: cpu, nominalQuota: "1"}}]}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: resize-queue, namespace: {NS}}}
spec: {{clusterQueue: resize-cq}}
"""


def get(*args: str) -> dict:
    done = subprocess.run(["kubectl", "--kubeconfig", KUBECONFIG or "", "get", *args, "-o", "json"],
                          capture_output=True, text=True, timeout=30)  # fmt: skip
    return json.loads(done.stdout)


def active_pods() -> int:
    """Pods whose containers may run: not ended (a terminating pod's still run)."""
    pods = get("pods", "-n", NS, "-l", "job-name=grows")["items"]
    return sum(1 for p in pods if p["status"].get("phase") not in ("Succeeded", "Failed"))


def workload_uid() -> str | None:
    items = get("workloads.kueue.x-k8s.io", "-n", NS)["items"]
    return items[0]["metadata"]["uid"] if items else None


@pytest.fixture(scope="module")
def controller(api_client, kubelet_namespaces, tmp_path_factory):
    webhook_host_port()  # skips, with the reason, where no URL reaches this machine
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("apply", "-f", "-", input=json.dumps(JOBSET_CRD))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    kubectl("create", "namespace", NS)
    kubelet_namespaces.add(NS)
    kubectl("apply", "-f", "-", input=queues())
    webhook = serve_webhook(
        tmp_path_factory.mktemp("resized"), ["--controller-username", "kubernetes-admin"]
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


def test_a_running_job_patched_past_its_admission_runs_no_extra_pods_for_long(controller):
    nodes = controller
    pod = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "30"],
                        "resources": {"requests": {"cpu": "100m"}}}],
    }  # fmt: skip
    if nodes:
        pod["nodeSelector"] = {"kubernetes.io/hostname": nodes[0]}
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "grows", "namespace": NS,
                     "labels": {"kueue.x-k8s.io/queue-name": "resize-queue"}},
        "spec": {"parallelism": 2, "completions": 10, "backoffLimit": 0,
                 "template": {"spec": pod}},
    }  # fmt: skip
    kubectl("create", "-f", "-", input=json.dumps(job))
    wait(lambda: active_pods() == 2, 120, "the Job admitted at 2 and its 2 pods running")
    admitted = workload_uid()
    answer = kubectl(
        "patch", "job", "grows", "-n", NS, "--type=merge", "-p", '{"spec":{"parallelism":6}}'
    )
    assert "it is stopped in this update (spec.suspend: true)" in answer, answer
    patched = time.monotonic()
    # Watched while the admission of 2 is the one in force (until its Workload is gone).
    most, beyond_since, beyond = 0, None, 0.0
    while time.monotonic() - patched < 60 and workload_uid() in (admitted, None):
        now = active_pods()
        most = max(most, now)
        if now > 2 and beyond_since is None:
            beyond_since = time.monotonic()
        elif now <= 2 and beyond_since is not None:
            beyond += time.monotonic() - beyond_since
            beyond_since = None
        time.sleep(0.1)
    if beyond_since is not None:
        beyond += time.monotonic() - beyond_since
    measured(
        f"a running Job patched from parallelism 2 to 6: at most {most} pods active, more "
        f"than the 2 admitted for {beyond:.1f} s (on {'a real node' if nodes else 'the stand-in'})"
    )
    assert most <= 2, f"{most} pods ran at once, {beyond:.1f} s beyond the 2 admitted"
    events = kubectl("get", "events", "-n", NS, "--field-selector", "reason=PodSetsChanged")
    assert "now has 6 pods, its admission 2" in events, events
    # Queued again as it now is: 6 × 100m fits in 1 cpu, so it is admitted at 6.
    wait(lambda: active_pods() == 6, 120, "the Job admitted again at its new size")
    kubectl("delete", "job", "grows", "-n", NS, "--cascade=foreground", "--wait=true")


def test_a_running_jobset_patched_past_its_admission_is_never_stored_running_at_the_new_size(
    controller,
):
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": "grows-set", "namespace": NS,
                     "labels": {"kueue.x-k8s.io/queue-name": "resize-queue"}},
        "spec": {"replicatedJobs": [replicated("workers", 1, "100m")]},
    }  # fmt: skip
    kubectl("create", "-f", "-", input=json.dumps(jobset))
    wait(
        lambda: get("jobset", "grows-set", "-n", NS)["spec"].get("suspend") is False,
        60,
        "the JobSet admitted at 1 replica and started",
    )
    watch = subprocess.Popen(
        ["kubectl", "--kubeconfig", KUBECONFIG or "", "get", "jobset", "grows-set", "-n", NS,
         "--watch", "--output-watch-events", "-o", "json"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1)
    answer = kubectl(
        "patch", "jobset", "grows-set", "-n", NS, "--type=json", "-p",
        '[{"op":"replace","path":"/spec/replicatedJobs/0/replicas","value":3}]',
    )  # fmt: skip
    assert "it is stopped in this update (spec.suspend: true)" in answer, answer
    # Queued again as it now is: 3 × 2 pods × 100m fits in 1 cpu, so it starts again at 3.
    wait(
        lambda: get("jobset", "grows-set", "-n", NS)["spec"].get("suspend") is False,
        60,
        "the JobSet admitted again at 3 replicas",
    )
    time.sleep(1)
    watch.terminate()
    out, _ = watch.communicate(timeout=10)
    decoder, seen, at = json.JSONDecoder(), [], 0
    while at < len(out.strip()):
        event, at = decoder.raw_decode(out, at)
        at = len(out) - len(out[at:].lstrip())
        spec = event["object"]["spec"]
        seen.append((spec["replicatedJobs"][0]["replicas"], spec.get("suspend")))
    running_grown = [v for v in seen if v == (3, False)]
    first_grown = next(i for i, v in enumerate(seen) if v[0] == 3)
    assert seen[first_grown] == (3, True), seen  # the patch itself stored it suspended
    measured(
        f"a running JobSet patched from 1 to 3 replicas: the patch stored it suspended; "
        f"{len(seen)} versions watched, running at 3 only once admitted again"
    )
    assert running_grown, seen  # and it runs at 3 once admitted again

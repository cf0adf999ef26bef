"""WaitForPodsReady on a real control plane: Kueue's Configuration file turns it on; a Job
whose pods never become ready is evicted after the timeout, requeued with backoff and
deactivated past the limit; a Job whose pods are ready is never evicted.

The pods land on a stand-in node with no kubelet: the test plays one for the ready Job's pods
(Running, Ready) and, for every pod, confirms a deletion as a kubelet does once its containers
stopped. A stopped Job's terminating pod holds its quota until then (docs/kueue.md), so without
that confirmation the evicted Job could never be requeued.
"""

from __future__ import annotations

import signal
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes import config as k8s_config

from tests.e2e.conftest import KUBECONFIG, controller_process, kubectl, wait

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e

CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
waitForPodsReady:
  timeout: 8s
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: 1
    backoffMaxSeconds: 2
    backoffLimitCount: 1
"""


def queues(namespace: str) -> str:
    return f"""\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {{name: ready-flavor}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: ready-cq}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: ready-flavor
      resources: [{{name: cpu, nominalQuota: 4}}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: ready-queue, namespace: {namespace}}}
spec: {{clusterQueue: ready-cq}}
"""


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": "ready-queue"}},
        "spec": {
            "suspend": True,  # as the webhook leaves it (this test does not need the webhook)
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox:1.36",
                            "command": ["sleep", "3600"],
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                }
            },
        },
    }


@pytest.fixture
def setup(tmp_path):
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    namespace = f"tower-ready-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace)
    kubectl("apply", "-f", "-", input=queues(namespace))
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    proc = controller_process("--config", str(config))
    yield k8s_config.new_client_from_config(config_file=KUBECONFIG), namespace
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    # No kubelet confirms the deletion of a bound pod: remove them outright.
    kubectl("delete", "pods", "--all", "-n", namespace, "--force", "--grace-period=0", check=False)
    kubectl("delete", "namespace", namespace, "--wait=false")
    kubectl("delete", "-f", "-", input=queues(namespace), check=False)


def workload_of(custom: client.CustomObjectsApi, namespace: str, job_name: str) -> dict | None:
    for wl in custom.list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads"
    )["items"]:
        owners = wl["metadata"].get("ownerReferences") or []
        if any(o.get("name") == job_name for o in owners):
            return wl
    return None


def condition(wl: dict | None, kind: str) -> dict:
    for c in ((wl or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == kind:
            return c
    return {}


def make_ready(core: client.CoreV1Api, namespace: str, job_name: str) -> int:
    """Play the kubelet for a Job's pods: Running and Ready. Returns how many there are."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    pods = core.list_namespaced_pod(namespace, label_selector=f"job-name={job_name}").items
    for pod in pods:
        if pod.status.phase == "Running":
            continue
        core.patch_namespaced_pod_status(
            pod.metadata.name,
            namespace,
            {
                "status": {
                    "phase": "Running",
                    "startTime": now,
                    "conditions": [
                        {"type": "Ready", "status": "True", "lastTransitionTime": now},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                    ],
                }
            },
        )
    return len(pods)


def confirm_deletions(core: client.CoreV1Api, namespace: str) -> None:
    """Play the kubelet for pods being deleted: their containers stopped, the pod is gone."""
    for pod in core.list_namespaced_pod(namespace).items:
        if pod.metadata.deletion_timestamp is not None:
            core.delete_namespaced_pod(
                pod.metadata.name, namespace, grace_period_seconds=0, _preload_content=False
            )


def test_never_ready_is_evicted_requeued_then_deactivated_and_ready_is_kept(setup):
    api, namespace = setup
    batch, core = client.BatchV1Api(api), client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    batch.create_namespaced_job(namespace, job("never-ready"))
    batch.create_namespaced_job(namespace, job("ready"))
    wait(
        lambda: all(
            not batch.read_namespaced_job(name, namespace).spec.suspend
            for name in ("never-ready", "ready")
        ),
        what="both Jobs to start",
    )
    wait(lambda: make_ready(core, namespace, "ready") > 0, what="the ready Job's pod")
    wait(
        lambda: (
            condition(workload_of(custom, namespace, "ready"), "PodsReady").get("status") == "True"
        ),
        what="PodsReady=True on the ready Job's Workload",
    )

    # The never-ready Job: evicted after 8 s, requeued with backoff (requeueState), started
    # again, evicted again, and past backoffLimitCount 1 deactivated.
    first = wait(
        lambda: (
            (workload_of(custom, namespace, "never-ready") or {})
            .get("status", {})
            .get("requeueState")
        ),
        timeout=60,
        what="the first PodsReadyTimeout and its requeueState",
    )
    assert first.get("count") == 1

    def deactivated() -> bool:
        confirm_deletions(core, namespace)
        return (workload_of(custom, namespace, "never-ready") or {}).get("spec", {}).get(
            "active"
        ) is False

    wait(
        deactivated,
        timeout=90,
        what="the never-ready Workload to be deactivated past the limit",
    )
    wl = workload_of(custom, namespace, "never-ready")
    evicted = condition(wl, "Evicted")
    assert evicted.get("reason") == "DeactivatedDueToRequeuingLimitExceeded", evicted
    wait(
        lambda: batch.read_namespaced_job("never-ready", namespace).spec.suspend is True,
        what="the deactivated Job to be stopped",
    )

    # The ready Job ran all along: never evicted, still unsuspended.
    ready = workload_of(custom, namespace, "ready")
    assert condition(ready, "Evicted").get("status") != "True", ready
    assert not (ready.get("status") or {}).get("requeueState")
    assert batch.read_namespaced_job("ready", namespace).spec.suspend is False

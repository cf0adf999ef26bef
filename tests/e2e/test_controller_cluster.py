"""The controller against a real cluster: the seed quick-start, end to end.

`kubectl apply -f deploy/crds/` and the seed's queues, then `python -m extender run` on this
machine against the cluster. Two Jobs are created already suspended (as the webhook leaves
them, so this test does not depend on the webhook being reachable): the first runs, the second
waits with a reason naming cpu, then runs once the first completes. Cleans up what it creates.
"""

from __future__ import annotations

import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.e2e.conftest import KUBECONFIG, controller_process, job_manifest, kubectl, wait

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
QUEUES = ROOT / "examples" / "quickstart" / "01-queues.yaml"


@pytest.fixture(scope="module")
def controller(kubelet_namespaces):
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    namespace = f"tower-e2e-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", namespace)
    kubelet_namespaces.add(namespace)
    queues = QUEUES.read_text().replace("namespace: default", f"namespace: {namespace}")
    subprocess.run(
        ["kubectl", "--kubeconfig", KUBECONFIG, "apply", "-f", "-"],
        input=queues,
        text=True,
        check=True,
    )
    proc = controller_process()
    yield config.new_client_from_config(config_file=KUBECONFIG), namespace
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    kubectl("delete", "namespace", namespace, "--wait=false")
    subprocess.run(
        ["kubectl", "--kubeconfig", KUBECONFIG, "delete", "-f", "-"],
        input=queues,
        text=True,
        check=False,
    )


def job(seconds: int) -> dict:
    """As the webhook leaves a seed Job: suspended (this test does not need the webhook)."""
    labels = {"kueue.x-k8s.io/queue-name": "user-queue"}
    return job_manifest(labels, seconds=seconds, suspend=True)


def test_the_seed_quick_start_runs_one_job_then_the_other(controller):
    api_client, namespace = controller
    batch = client.BatchV1Api(api_client)
    first = batch.create_namespaced_job(namespace, job(10)).metadata.name
    wait(
        lambda: batch.read_namespaced_job(first, namespace).spec.suspend is False,
        what="the first job to start",
    )
    second = batch.create_namespaced_job(namespace, job(1)).metadata.name
    custom = client.CustomObjectsApi(api_client)

    def second_reason():
        for wl in custom.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", namespace, "workloads"
        )["items"]:
            if wl["metadata"]["name"].startswith(f"job-{second}-"):
                for c in (wl.get("status") or {}).get("conditions") or []:
                    if c["type"] == "QuotaReserved" and c["status"] == "False":
                        return c["message"]
        return None

    assert "cpu" in wait(second_reason, what="the second job's reason")
    assert batch.read_namespaced_job(second, namespace).spec.suspend is True
    wide = kubectl("get", "clusterqueue", "cluster-queue", "-o", "wide").splitlines()
    assert wide[0].split() == [
        "NAME",
        "COHORT",
        "STRATEGY",
        "PENDING",
        "WORKLOADS",
        "ADMITTED",
        "WORKLOADS",
    ]
    wait(
        lambda: batch.read_namespaced_job(second, namespace).spec.suspend is False,
        what="the second job to start after the first completes",
    )
    wait(
        lambda: (batch.read_namespaced_job(second, namespace).status.succeeded or 0) == 1,
        what="the second job to complete",
    )

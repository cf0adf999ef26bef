"""Kueue's opt-in namespace management on a real kube-apiserver: the webhook and the
controller read the Configuration of Kueue's "Opt-in Namespace Management" page, and
`python -m certs bootstrap --config` points the webhooks at its namespaces, as the
controller's init container does in deploy/."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from tests.e2e.conftest import (
    KUBECONFIG,
    controller_process,
    job_manifest,
    kubectl,
    serve_webhook,
    wait,
    webhook_host_port,
)

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SUFFIX = uuid.uuid4().hex[:6]
RESEARCH, SANDBOX = f"research-{SUFFIX}", f"sandbox-{SUFFIX}"

# Kueue's page, step 2.1, unchanged (tests/data/kueue-v0.19.2/README.md).
OPT_IN = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples" / "opt-in-namespace-management.yaml"
LABEL = "managed-by-kueue"


def setup() -> list[dict]:
    resources = [{"name": "cpu", "nominalQuota": 4}, {"name": "memory", "nominalQuota": "8Gi"}]
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": RESEARCH, "labels": {LABEL: "true"}},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SANDBOX}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": f"flavor-{SUFFIX}"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": f"cq-{SUFFIX}"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [{"name": f"flavor-{SUFFIX}", "resources": resources}],
                    }
                ],
            },
        },
        *(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"clusterQueue": f"cq-{SUFFIX}"},
            }
            for namespace, name in ((RESEARCH, "default"), (SANDBOX, "user-queue"))
        ),
    ]


@pytest.fixture(scope="module")
def tower(tmp_path_factory, kubelet_namespaces):
    webhook_host_port()  # skips, with the reason, where no URL reaches this machine
    # Their Jobs' pods run (and end) on a cluster without kubelets too, so none is left
    # bound to a node, holding its room, once the namespaces go.
    kubelet_namespaces.update((RESEARCH, SANDBOX))
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    tmp = tmp_path_factory.mktemp("managed-namespaces")
    config = OPT_IN
    # As an admin arrives: the configurations as deploy/ has them, then the bootstrap.
    webhook = serve_webhook(
        tmp,
        # The controller below runs as the kubeconfig's user: it may start queued jobs.
        ["--config", str(config), "--controller-username", "kubernetes-admin"],
    )
    python = [sys.executable, "-m"]
    kube = ["--kubeconfig", KUBECONFIG]
    bootstrap = [*python, "certs", "bootstrap", "--no-certificate", "--config", str(config)]
    said = subprocess.run(
        [*bootstrap, *kube], check=True, cwd=ROOT, capture_output=True, text=True
    ).stdout
    objects = setup()
    kubectl(
        "apply", "-f", "-", input=json.dumps({"kind": "List", "apiVersion": "v1", "items": objects})
    )
    controller = controller_process("--config", str(config))
    yield said
    controller.terminate()
    controller.wait(timeout=30)
    webhook.terminate()
    webhook.wait(timeout=20)
    kubectl("delete", "ns", RESEARCH, SANDBOX, "--wait=false", check=False)
    kubectl("delete", "clusterqueue", f"cq-{SUFFIX}", "--wait=false", check=False)
    kubectl("delete", "resourceflavor", f"flavor-{SUFFIX}", "--wait=false", check=False)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


def small(labels: dict[str, str]) -> dict:
    return job_manifest(labels, cpu="100m", memory="64Mi")


def get_job(api_client, namespace: str, name: str):
    return client.BatchV1Api(api_client).read_namespaced_job(name, namespace)


def workloads(api_client, namespace: str) -> list[dict]:
    listed = client.CustomObjectsApi(api_client).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads"
    )
    return listed["items"]


def test_the_bootstrap_points_the_webhooks_at_the_files_namespaces(tower):
    assert "namespaceSelector of mjob-create.tower.dev" in tower
    hooks = json.loads(
        kubectl("get", "mutatingwebhookconfiguration", "tower-mutating-webhook", "-o", "json")
    )
    selectors = {h["name"]: h["namespaceSelector"] for h in hooks["webhooks"]}
    assert selectors["mjob-create.tower.dev"] == {"matchLabels": {LABEL: "true"}}
    assert selectors["mjob-default-queue.tower.dev"] == {"matchLabels": {LABEL: "true"}}


def test_an_unlabelled_job_in_a_selected_namespace_queues_in_default(tower, api_client):
    batch = client.BatchV1Api(api_client)
    job = batch.create_namespaced_job(RESEARCH, small({}))
    assert job.metadata.labels["kueue.x-k8s.io/queue-name"] == "default"
    assert job.spec.suspend is True
    name = job.metadata.name
    wait(
        lambda: get_job(api_client, RESEARCH, name).spec.suspend is False,
        what="the unlabelled Job admitted from LocalQueue default",
    )


def test_a_namespace_outside_the_selector_is_not_towers_until_it_opts_in(tower, api_client):
    batch = client.BatchV1Api(api_client)
    free = batch.create_namespaced_job(SANDBOX, small({}))
    queued = batch.create_namespaced_job(
        SANDBOX, small({"kueue.x-k8s.io/queue-name": "user-queue"})
    )
    # Neither reaches the webhook: kube-apiserver applies the hooks' namespaceSelector.
    assert free.spec.suspend is False
    assert queued.spec.suspend is False
    # The controller saw the labelled one and left it alone: a Job in research created
    # after it is admitted, and still no Workload in sandbox.
    later = batch.create_namespaced_job(RESEARCH, small({"kueue.x-k8s.io/queue-name": "default"}))
    wait(lambda: get_job(api_client, RESEARCH, later.metadata.name).spec.suspend is False)
    assert workloads(api_client, SANDBOX) == []

    kubectl("label", "namespace", SANDBOX, f"{LABEL}=true")
    workload = wait(
        lambda: next(iter(workloads(api_client, SANDBOX)), None),
        what="a Workload for the labelled Job once its namespace opted in",
    )
    assert workload["spec"]["queueName"] == "user-queue"
    assert workload["metadata"]["ownerReferences"][0]["name"] == queued.metadata.name
    # The Job without the label stays alone: only the webhook takes those, at creation.
    assert len(workloads(api_client, SANDBOX)) == 1

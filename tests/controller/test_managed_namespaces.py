"""Kueue's manageJobsWithoutQueueName and managedJobsNamespaceSelector from the Configuration
file, the way an admin arrives: the webhooks installed as deploy/ has them, then
`python -m certs bootstrap --config` points them at the file's namespaces, the webhook and
the controller read the same file. The file is the one Kueue's "Opt-in Namespace Management"
page gives (site/content/en/docs/tasks/manage/enforce_job_management/, v0.19.2)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from certs import kube as certs_kube
from extender.kube.api.resources import JOBS, NAMESPACES, Resource
from extender.kube.config_file import load
from tests.controller.conftest import ROOT, eventually
from tests.servers import start_webhook

MUTATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)

# Kueue's page, step 2.1, unchanged (tests/data/kueue-v0.19.2/README.md).
OPT_IN = ROOT / "tests" / "data" / "kueue-v0.19.2" / "examples" / "opt-in-namespace-management.yaml"


def queues(namespace_queues: dict[str, str]) -> list[dict[str, Any]]:
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "default-flavor"},
    }
    resources = [{"name": "cpu", "nominalQuota": 8}, {"name": "memory", "nominalQuota": "64Gi"}]
    cluster_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cluster-queue"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [{"name": "default-flavor", "resources": resources}],
                }
            ],
        },
    }
    local_queues = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": "cluster-queue"},
        }
        for namespace, name in namespace_queues.items()
    ]
    return [flavor, cluster_queue, *local_queues]


def job(name: str, namespace: str, queue: str | None) -> dict[str, Any]:
    labels = {"kueue.x-k8s.io/queue-name": queue} if queue else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "busybox:1.36",
                            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                        }
                    ],
                }
            }
        },
    }


@pytest.fixture
def configured(cluster, webhook, tmp_path):
    """The webhook with --config, its configurations installed as deploy/ has them, then
    bootstrapped with the file as the controller's init container does."""
    config = OPT_IN
    server = start_webhook(webhook.certs, tmp_path / "metrics", "--config", str(config), workers=1)
    ca = (webhook.certs / "ca.crt").read_bytes()
    certs_kube.install(cluster.admin.api_client, server.url, ca)  # no file: Tower's defaults
    bootstrap = [sys.executable, "-m", "certs", "bootstrap", "--no-certificate"]
    done = subprocess.run(
        [*bootstrap, "--config", str(config), "--kubeconfig", cluster.controller_config],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    yield config, done.stdout
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=20)


def test_bootstrap_points_the_webhooks_at_the_files_namespaces(cluster, configured):
    _, said = configured
    assert "namespaceSelector of mjob-create.tower.dev" in said
    stored = cluster.admin.get(MUTATING_WEBHOOK_CONFIGURATIONS, "tower-mutating-webhook")
    hooks = {h["name"]: h for h in stored["webhooks"]}
    selector = {"matchLabels": {"managed-by-kueue": "true"}}
    assert hooks["mjob-create.tower.dev"]["namespaceSelector"] == selector
    # manageJobsWithoutQueueName: every selected namespace, no opt-in label of Tower's.
    assert hooks["mjob-default-queue.tower.dev"]["namespaceSelector"] == selector
    # What the install set is kept: the URL and the CA.
    assert hooks["mjob-create.tower.dev"]["clientConfig"]["caBundle"]
    assert hooks["mjob-create.tower.dev"]["clientConfig"]["url"].endswith("/mutate-batch-v1-job")


def test_jobs_are_managed_in_the_selected_namespaces_only(cluster, configured, start_controller):
    config, _ = configured
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "research", "labels": {"managed-by-kueue": "true"}},
        },
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "sandbox"}},
        *queues({"research": "default", "sandbox": "user-queue"}),
    )
    start_controller(managed_namespaces=load(str(config)).managed_jobs_namespace_selector)

    # A selected namespace: a Job without the label goes to LocalQueue `default`, and runs.
    unlabelled = cluster.admin.create(JOBS, job("unlabelled", "research", None), "research")
    assert unlabelled["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "default"
    assert unlabelled["spec"]["suspend"] is True
    eventually(
        lambda: cluster.get("jobs", "unlabelled", "research")["spec"]["suspend"] is False,
        what="the unlabelled Job admitted from LocalQueue default",
    )

    # Elsewhere nothing is Tower's, the queue-name label or not (as in Kueue v0.19).
    free = cluster.admin.create(JOBS, job("free", "sandbox", None), "sandbox")
    labelled = cluster.admin.create(JOBS, job("labelled", "sandbox", "user-queue"), "sandbox")
    assert "suspend" not in free["spec"] or free["spec"]["suspend"] is False
    assert labelled["spec"].get("suspend") in (None, False)
    # The controller has seen them: a later Job in research is admitted first.
    cluster.admin.create(JOBS, job("later", "research", "default"), "research")
    eventually(lambda: cluster.get("jobs", "later", "research")["spec"]["suspend"] is False)
    time.sleep(0.3)
    assert cluster.workload_of(cluster.get("jobs", "labelled", "sandbox")) is None
    assert cluster.get("jobs", "labelled", "sandbox")["spec"].get("suspend") in (None, False)

    # The namespace opts in: its queued Job is Tower's now (stopped, queued, admitted).
    namespace = cluster.admin.get(NAMESPACES, "sandbox")
    namespace["metadata"]["labels"] = {"managed-by-kueue": "true"}
    cluster.admin.update(NAMESPACES, namespace)
    workload = eventually(
        lambda: cluster.workload_of(cluster.get("jobs", "labelled", "sandbox")),
        what="a Workload for the Job of the namespace that opted in",
    )
    assert workload["spec"]["queueName"] == "user-queue"
    eventually(
        lambda: any(
            c["type"] == "Admitted" and c["status"] == "True"
            for c in (cluster.workload_of(cluster.get("jobs", "labelled", "sandbox")) or {})
            .get("status", {})
            .get("conditions", [])
        ),
        what="the Job's Workload admitted",
    )
    # The unlabelled Job there stays alone: only the webhook queues jobs without the label.
    assert cluster.workload_of(cluster.get("jobs", "free", "sandbox")) is None

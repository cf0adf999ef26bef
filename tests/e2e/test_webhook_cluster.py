"""The webhook against a real kube-apiserver: the seed Job is queued, others are untouched.

Runs the real `python -m webhook` on this machine, registers it with `certs install`, and talks
to the cluster with the real kubernetes client. Cleans up what it creates.
"""

import ipaddress
import json
import os
import subprocess
import sys
import urllib.parse
import uuid
from pathlib import Path

import pytest
from kubernetes import client, config

from tests.e2e.conftest import (
    KUBECONFIG,
    WEBHOOK_URL,
    job_manifest,
    kubectl,
    listening,
    webhook_host_port,
)
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    webhook_host_port()  # skips, with the reason, where no URL reaches this machine
    certs = tmp_path_factory.mktemp("certs")
    host = urllib.parse.urlparse(WEBHOOK_URL).hostname
    try:
        ipaddress.ip_address(host)
        flag = "--ip-address"  # IPv4 or IPv6
    except ValueError:
        flag = "--dns-name"
    subprocess.run(
        [sys.executable, "-m", "certs", "generate", "--out", str(certs), flag, host],
        check=True,
        cwd=ROOT,
    )
    port = urllib.parse.urlparse(WEBHOOK_URL).port or 443
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "webhook",
            "--port",
            str(port),
            "--tls-cert-file",
            str(certs / "tls.crt"),
            "--tls-private-key-file",
            str(certs / "tls.key"),
        ],
        cwd=ROOT,
    )
    # Registered only once it listens: a create sent to it before would fail (a fixed pause
    # may end before a loaded machine has started it).
    wait_until(
        lambda: (server.poll(), listening(host, port)),
        lambda seen: seen[0] is not None or seen[1],
        what=f"the webhook to listen on {host}:{port}",
        timeout=60,
        interval=0.2,
    )
    assert server.poll() is None, f"the webhook exited with {server.returncode}"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "certs",
            "install",
            "--kubeconfig",
            KUBECONFIG,
            "--url",
            WEBHOOK_URL,
            "--certs-dir",
            str(certs),
        ],
        check=True,
        cwd=ROOT,
    )
    api_client = config.new_client_from_config(config_file=KUBECONFIG)
    namespace = f"tower-e2e-{uuid.uuid4().hex[:6]}"
    core = client.CoreV1Api(api_client)
    core.create_namespace({"metadata": {"name": namespace}})
    yield api_client, namespace
    core.delete_namespace(namespace)
    admission = client.AdmissionregistrationV1Api(api_client)
    admission.delete_mutating_webhook_configuration("tower-mutating-webhook")
    admission.delete_validating_webhook_configuration("tower-validating-webhook")
    server.terminate()
    server.wait(timeout=20)


def seed_job(labels):
    return job_manifest(labels)


def test_the_seed_job_is_created_suspended(cluster):
    api_client, namespace = cluster
    batch = client.BatchV1Api(api_client)
    job = batch.create_namespaced_job(
        namespace, seed_job({"kueue.x-k8s.io/queue-name": "user-queue"})
    )
    assert job.spec.suspend is True
    assert job.metadata.annotations["tower.dev/original-suspend"] == "false"


def test_a_job_without_the_label_is_untouched(cluster):
    api_client, namespace = cluster
    job = client.BatchV1Api(api_client).create_namespaced_job(namespace, seed_job({}))
    assert job.spec.suspend is False
    assert "tower.dev/original-suspend" not in (job.metadata.annotations or {})


def test_kubectl_patch_cannot_start_a_queued_job(cluster):
    api_client, namespace = cluster
    batch = client.BatchV1Api(api_client)
    job = batch.create_namespaced_job(
        namespace, seed_job({"kueue.x-k8s.io/queue-name": "user-queue"})
    )
    out = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            KUBECONFIG,
            "-n",
            namespace,
            "patch",
            "job",
            job.metadata.name,
            "--type=merge",
            "-p",
            json.dumps({"spec": {"suspend": False}}),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ),
    )
    assert "is queued: it waits in LocalQueue user-queue" in out.stderr
    assert batch.read_namespaced_job(job.metadata.name, namespace).spec.suspend is True


UNACTED_QUEUE = """\
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: tower-e2e-concurrent}
spec:
  namespaceSelector: {}
  concurrentAdmissionPolicy:
    migration: {mode: TryPreferredFlavors}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: 1}]}]
"""


def test_a_kueue_field_tower_does_not_act_on_is_accepted_with_a_warning(cluster):
    """What a user sees on a real cluster: the CRDs accept Kueue's field, the webhook's warning
    is printed by kubectl, and a bad object is refused by the CRDs' own rule."""
    assert cluster  # the webhook is installed
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")

    def run(*args, stdin):  # the exit status and stderr apart, which kubectl() joins
        return subprocess.run(
            ["kubectl", "--kubeconfig", KUBECONFIG, *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )

    applied = run("apply", "--validate=strict", "-f", "-", stdin=UNACTED_QUEUE)
    try:
        assert applied.returncode == 0, applied.stderr
        assert (
            "Warning: ClusterQueue tower-e2e-concurrent: spec.concurrentAdmissionPolicy "
            "(concurrent admission for flavor migration) is not acted on by Tower"
        ) in applied.stderr
        lonely = UNACTED_QUEUE.replace(
            "  concurrentAdmissionPolicy:\n    migration: {mode: TryPreferredFlavors}\n", ""
        ).replace("nominalQuota: 1}", "nominalQuota: 1, borrowingLimit: 1}")
        refused = run("apply", "-f", "-", stdin=lonely)
        assert refused.returncode != 0
        assert "a borrowingLimit needs a cohort" in refused.stderr
    finally:
        kubectl("delete", "clusterqueue", "tower-e2e-concurrent", "--ignore-not-found")

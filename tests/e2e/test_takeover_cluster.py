"""`kubectl tower takeover --from kueue` and `handback --to kueue` on the real control plane,
left as a stopped Kueue v0.19.2 leaves it: Kueue's own webhook configurations, CRD conversion
stanzas, RBAC, Configuration and Deployment (tests/data/kueue-install/, from its config/).

Kueue cannot run here, so the test plays its manager's Lease: renewed every 2 s as
controller-runtime renews it, then let go. While it is renewed takeover refuses and changes
nothing; once it is let go takeover clears Kueue's leftovers (which refuse every Job) and
Tower, run on this machine, admits; handback leaves Kueue's plumbing as Kueue installs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from tests.e2e.conftest import (
    KUBECONFIG,
    WEBHOOK_URL,
    controller_process,
    job_manifest,
    kubectl,
    measured,
    serve_webhook,
    wait,
    webhook_host_port,
)

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "kueue-install"
SUFFIX = uuid.uuid4().hex[:6]
NAMESPACE = f"takeover-{SUFFIX}"
KUEUE_NS, LEASE = "kueue-system", "c1f6bfd2.kueue.x-k8s.io"
MERGE = "application/merge-patch+json"
HOLDER = "kueue-controller-manager-6c5d8f7b9-q4w2x_5b0e9d3c-8c1d-4f8e-9a57-2a6f0c1e7d44"
CONVERTED = ("clusterqueues", "cohorts", "localqueues", "multikueueclusters", "workloads")
KUEUE_WEBHOOKS = (
    ("mutatingwebhookconfiguration", "kueue-mutating-webhook-configuration"),
    ("validatingwebhookconfiguration", "kueue-validating-webhook-configuration"),
)


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DATA / name).read_text()) if d]


def apply(*objects: dict) -> None:
    kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
    )


def tower(*args: str) -> subprocess.CompletedProcess[str]:
    """`kubectl tower ...` (the plugin's console script, run as a module)."""
    command = [sys.executable, "-m", "extender.kube.plugin.cli", "--kubeconfig", KUBECONFIG or ""]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def queues() -> list[dict]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
         "metadata": {"name": f"flavor-{SUFFIX}"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
         "metadata": {"name": f"cq-{SUFFIX}"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory"],
             "flavors": [{"name": f"flavor-{SUFFIX}", "resources": [
                 {"name": "cpu", "nominalQuota": 2}, {"name": "memory", "nominalQuota": "2Gi"}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "user-queue", "namespace": NAMESPACE},
         "spec": {"clusterQueue": f"cq-{SUFFIX}"}},
    ]  # fmt: skip


class KueueLease:
    """Kueue's manager as the API server sees it: its Lease renewed every 2 s (duration 15 s,
    controller-runtime's defaults) until `let_go`, which clears the holder (ReleaseOnCancel)."""

    def __init__(self, api: client.ApiClient) -> None:
        self.leases = client.CoordinationV1Api(api)
        self.stop = threading.Event()
        self.renewals = 0
        body = documents("lease.yaml")[0]
        body["spec"]["renewTime"] = body["spec"]["acquireTime"] = self.now()
        self.leases.create_namespaced_lease(KUEUE_NS, body)
        self.thread = threading.Thread(target=self._renew, daemon=True)
        self.thread.start()

    @staticmethod
    def now() -> str:
        return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def _renew(self) -> None:
        while not self.stop.wait(2.0):
            self.leases.patch_namespaced_lease(
                LEASE,
                KUEUE_NS,
                {"spec": {"holderIdentity": HOLDER, "renewTime": self.now()}},
                _content_type=MERGE,
            )
            self.renewals += 1

    def let_go(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.leases.patch_namespaced_lease(
            LEASE,
            KUEUE_NS,
            {"spec": {"holderIdentity": None, "renewTime": self.now()}},
            _content_type=MERGE,
        )


def conversion(name: str) -> dict:
    crd = json.loads(kubectl("get", "crd", f"{name}.kueue.x-k8s.io", "-o", "json"))
    return crd["spec"]["conversion"]


def job_refusal(api: client.ApiClient, name: str) -> str | None:
    """Why a queued Job is refused (None: created)."""
    body = job_manifest({"kueue.x-k8s.io/queue-name": "user-queue"}, name=name, cpu="100m",
                        memory="64Mi", seconds=600)  # fmt: skip
    try:
        client.BatchV1Api(api).create_namespaced_job(NAMESPACE, body)
    except client.ApiException as err:
        return str(json.loads(err.body).get("message"))
    return None


@pytest.fixture
def kueue_left(api_client, kubelet_namespaces, tmp_path):
    """The plane as a stopped Kueue leaves it; everything put back as it was afterwards."""
    webhook_host_port()
    kubelet_namespaces.add(NAMESPACE)
    # The plane's CRDs as they are (their conversion put back exactly afterwards).
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    before = {name: conversion(name) for name in CONVERTED}
    apply(*queues())  # before Kueue's webhooks, which refuse a ClusterQueue with no backend
    apply(*documents("rbac.yaml"))
    manager = documents("manager.yaml")
    for obj in manager:
        if obj["kind"] == "Deployment":
            obj["spec"]["replicas"] = 0  # stopped: its image never runs here
    apply(*manager)
    apply(*documents("webhooks.yaml"))
    for stanza in documents("crd-conversion.yaml"):
        patch = json.dumps({"spec": {"conversion": stanza["conversion"]}})
        kubectl("patch", "crd", stanza["name"], "--type", "merge", "-p", patch)
    yield tmp_path
    for kind, name in KUEUE_WEBHOOKS:
        kubectl("delete", kind, name, "--ignore-not-found", check=False)
    for name, stanza in before.items():
        patch = json.dumps([{"op": "replace", "path": "/spec/conversion", "value": stanza}])
        kubectl(
            "patch", "crd", f"{name}.kueue.x-k8s.io", "--type", "json", "-p", patch, check=False
        )
    kubectl("delete", "ns", NAMESPACE, KUEUE_NS, "--wait=false", check=False)
    kubectl("delete", "clusterqueue", f"cq-{SUFFIX}", "--wait=false", check=False)
    kubectl("delete", "resourceflavor", f"flavor-{SUFFIX}", "--wait=false", check=False)
    kubectl("delete", "mutatingwebhookconfiguration", "tower-mutating-webhook", check=False)
    kubectl("delete", "validatingwebhookconfiguration", "tower-validating-webhook", check=False)


def test_takeover_from_a_stopped_kueue_then_handback(api_client, kueue_left):
    tmp = kueue_left
    refused = job_refusal(api_client, "before")
    assert refused is not None
    assert 'no endpoints available for service "kueue-webhook-service"' in refused
    measured(f"takeover: a Job beside a stopped Kueue's webhooks is refused: {refused}")

    # Kueue's Lease renewed: takeover refuses in one line and changes nothing.
    lease = KueueLease(api_client)
    try:
        wait(lambda: lease.renewals >= 1, 30, "a renewal")
        live = tower("takeover", "--from", "kueue", "--yes")
        assert live.returncode == 1
        [line] = live.stderr.splitlines()
        assert line.startswith(f"error: Kueue's controller holds its Lease {KUEUE_NS}/{LEASE}")
        assert line.endswith(
            "kubectl -n kueue-system scale deployment kueue-controller-manager --replicas=0"
        )
        measured(f"takeover refused while Kueue's Lease is renewed: {line}")
        for kind, name in KUEUE_WEBHOOKS:
            kubectl("get", kind, name)  # nothing changed
        assert conversion("workloads")["webhook"]["clientConfig"]["service"]["name"] == (
            "kueue-webhook-service"
        )
    finally:
        lease.let_go()

    # Let go: Tower's webhook on this machine (python -m certs install registers it), then
    # takeover with --yes.
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    controller = None
    try:
        started = time.monotonic()
        over = tower("takeover", "--from", "kueue", "--webhook-url", WEBHOOK_URL or "",
                     "--certs-dir", str(tmp), "--yes")  # fmt: skip
        took = time.monotonic() - started
        assert over.returncode == 0, over.stderr + over.stdout
        measured(f"takeover --yes on the real plane: {took:.2f}s (the command, end to end)")
        for text in over.stdout.splitlines():
            measured(f"  {text}")
        for kind, name in KUEUE_WEBHOOKS:
            assert "NotFound" in kubectl("get", kind, name, check=False)
        for name in CONVERTED:
            assert conversion(name)["webhook"]["clientConfig"]["url"] == f"{WEBHOOK_URL}/convert"
        # A v1beta1 read converts through Tower's webhook now.
        kubectl("get", "localqueues.v1beta1.kueue.x-k8s.io", "-n", NAMESPACE)

        again = tower("takeover", "--from", "kueue", "--webhook-url", WEBHOOK_URL or "",
                      "--certs-dir", str(tmp), "--yes")  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert all(" done " in text for text in again.stdout.splitlines()[1:7])

        controller = controller_process()
        assert job_refusal(api_client, "after") is None
        batch = client.BatchV1Api(api_client)
        wait(lambda: batch.read_namespaced_job("after", NAMESPACE).spec.suspend is False, 120,
             "Tower to admit the new Job")  # fmt: skip
        custom = client.CustomObjectsApi(api_client)
        [workload] = custom.list_namespaced_custom_object(
            "kueue.x-k8s.io", "v1beta2", NAMESPACE, "workloads"
        )["items"]
        assert workload["status"]["admission"]["clusterQueue"] == f"cq-{SUFFIX}"
    finally:
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=30)
        webhook.terminate()
        webhook.wait(timeout=20)

    back = tower("handback", "--to", "kueue", "--yes")
    assert back.returncode == 0, back.stderr + back.stdout
    for text in back.stdout.splitlines():
        measured(f"  {text}")
    for kind, name in (("mutatingwebhookconfiguration", "tower-mutating-webhook"),
                       ("validatingwebhookconfiguration", "tower-validating-webhook")):  # fmt: skip
        assert "NotFound" in kubectl("get", kind, name, check=False)
    for original in documents("webhooks.yaml"):
        restored = json.loads(
            kubectl("get", original["kind"].lower(), original["metadata"]["name"], "-o", "json")
        )
        for hook, want in zip(restored["webhooks"], original["webhooks"], strict=True):
            assert hook["name"] == want["name"]
            assert hook["clientConfig"]["service"] == {
                **want["clientConfig"]["service"],
                "port": 443,
            }
            assert hook["failurePolicy"] == want["failurePolicy"]
    for name in CONVERTED:
        service = conversion(name)["webhook"]["clientConfig"]["service"]
        assert service == {"namespace": KUEUE_NS, "name": "kueue-webhook-service",
                           "path": "/convert", "port": 443}  # fmt: skip
    # What Kueue's controller reads when it starts: the Workload Tower admitted, as it is.
    custom = client.CustomObjectsApi(api_client)
    [workload] = custom.list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", NAMESPACE, "workloads"
    )["items"]
    kinds = {c["type"]: c["status"] for c in workload["status"]["conditions"]}
    assert kinds["QuotaReserved"] == "True"
    assert kinds["Admitted"] == "True"
    measured(
        f"handback: Kueue would read Workload {workload['metadata']['name']}: admission "
        f"{workload['status']['admission']['clusterQueue']}, conditions {kinds}, finalizers "
        f"{workload['metadata'].get('finalizers')}"
    )
    refused = job_refusal(api_client, "after-handback")
    assert refused is not None
    assert "no endpoints available" in refused

    # Over to Tower once more (a new CA for its webhook: the conversion follows it): the Job
    # Tower admitted before runs on, untouched, and a new one is admitted.
    core = client.CoreV1Api(api_client)
    pods = {p.metadata.uid for p in core.list_namespaced_pod(NAMESPACE).items}
    webhook = serve_webhook(tmp, ["--controller-username", "kubernetes-admin"])
    controller = None
    try:
        over = tower("takeover", "--from", "kueue", "--webhook-url", WEBHOOK_URL or "",
                     "--certs-dir", str(tmp), "--yes")  # fmt: skip
        assert over.returncode == 0, over.stderr + over.stdout
        assert over.stdout.splitlines()[3].startswith(
            "3. done     the CRDs convert through Tower's webhook: clusterqueues, cohorts, "
            "localqueues, multikueueclusters, workloads now convert through"
        )
        controller = controller_process()
        assert job_refusal(api_client, "again") is None
        wait(lambda: batch.read_namespaced_job("again", NAMESPACE).spec.suspend is False, 120,
             "Tower to admit a Job after the round trip")  # fmt: skip
        kept = [
            w for w in custom.list_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", NAMESPACE, "workloads")["items"]
            if w["metadata"]["uid"] == workload["metadata"]["uid"]
        ]  # fmt: skip
        assert len(kept) == 1
        assert kept[0]["status"]["admission"] == workload["status"]["admission"]
        assert batch.read_namespaced_job("after", NAMESPACE).spec.suspend is False
        now = {p.metadata.uid for p in core.list_namespaced_pod(NAMESPACE).items}
        assert pods <= now  # none of its pods replaced
        measured(
            f"takeover after handback: Workload {workload['metadata']['name']} kept (same uid "
            f"and admission), its Job not suspended, {len(pods)} pod(s) kept; a new Job admitted"
        )
    finally:
        if controller is not None:
            controller.terminate()
            controller.wait(timeout=30)
        webhook.terminate()
        webhook.wait(timeout=20)

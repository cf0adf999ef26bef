"""`kubectl tower takeover --from kueue` and `handback --to kueue` on the API double, on a
cluster as a stopped Kueue v0.19.2 leaves it (tests/data/kueue-install/): its webhook
configurations failing closed with no backend, the CRDs converting through its Service, its
Lease live and then let go, and Tower installed beside it (its Deployments, Secret, webhooks).
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from certs import pki
from extender.kube.api import resources as r
from extender.kube.api.client import ApiError
from tests.apidouble.server import Fault
from tests.controller.conftest import CRDS
from tests.controller.test_kubectl_tower import tower
from tests.controller.test_kueue_lease import HOLDER, KUEUE_LEASE, KUEUE_NS, KueueManager

DATA = Path(__file__).resolve().parents[1] / "data" / "kueue-install"
CONFIG_MAPS = r.Resource("", "v1", "configmaps", "ConfigMap", True)
SERVICES = r.Resource("", "v1", "services", "Service", True)
DEPLOYMENTS = r.Resource("apps", "v1", "deployments", "Deployment", True)
MUTATING = r.Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    False,
)
VALIDATING = r.Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
CONVERTED = ("clusterqueues", "cohorts", "localqueues", "multikueueclusters", "workloads")
KUEUE_WEBHOOKS = ("kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration")
NOW = datetime(2026, 12, 6, 20, 0, tzinfo=UTC)


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DATA / name).read_text()) if d]


def secret(name: str, namespace: str, ca: bytes) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "data": {"ca.crt": base64.b64encode(ca).decode()},
    }


def deployment(name: str, replicas: int) -> dict:
    labels = {"app.kubernetes.io/name": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "tower-system"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "tower:0.1.0"}]},
            },
        },
    }


class KueueLeft:
    """The cluster as a stopped Kueue leaves it, and Tower installed in tower-system."""

    def __init__(self, cluster, kueue: KueueManager) -> None:
        self.cluster = cluster
        self.kueue = kueue
        admin = cluster.admin
        for obj in documents("manager.yaml"):
            resource = {
                "ConfigMap": CONFIG_MAPS,
                "Secret": r.SECRETS,
                "Service": SERVICES,
                "Deployment": DEPLOYMENTS,
            }[obj["kind"]]
            admin.create(resource, obj, KUEUE_NS)
        # Tower first: with Kueue's webhooks there and Kueue stopped, its Deployments would be
        # refused (mdeployment.kb.io fails closed in every namespace but two).
        self.tower_ca = pki.generate(["tower-webhook.tower-system.svc"], now=NOW).ca_cert
        self.kueue_ca = pki.generate(["kueue-webhook-service.kueue-system.svc"], now=NOW).ca_cert
        tls = secret("tower-webhook-tls", "tower-system", self.tower_ca)
        admin.create(r.SECRETS, tls, "tower-system")
        admin.create(DEPLOYMENTS, deployment("tower-controller", 0), "tower-system")
        admin.create(DEPLOYMENTS, deployment("tower-webhook", 2), "tower-system")
        for obj in documents("webhooks.yaml"):
            admin.create(MUTATING if obj["kind"].startswith("Mutating") else VALIDATING, obj)
        for stanza in documents("crd-conversion.yaml"):
            admin.patch(CRDS, stanza["name"], {"spec": {"conversion": stanza["conversion"]}})

    def state(self) -> dict:
        """Every object a switch may touch, by resourceVersion (absent: None)."""
        api = self.cluster.api
        seen = {}
        for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            for obj in api.list(plural, ""):
                seen[f"{plural}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
        for name in CONVERTED:
            crd = api.get("customresourcedefinitions", f"{name}.kueue.x-k8s.io", "")
            seen[name] = crd["metadata"]["resourceVersion"]
        for namespace in ("tower-system", KUEUE_NS):
            for plural in ("configmaps", "deployments", "secrets"):
                for obj in api.list(plural, namespace):
                    key = f"{plural}/{namespace}/{obj['metadata']['name']}"
                    seen[key] = obj["metadata"]["resourceVersion"]
        return seen

    def conversion(self, name: str) -> dict:
        crd = self.cluster.get("customresourcedefinitions", f"{name}.kueue.x-k8s.io")
        return crd["spec"]["conversion"]["webhook"]["clientConfig"]

    def job_refusal(self) -> str | None:
        """Why a new queued Job is refused; None when it is created."""
        try:
            self.cluster.job("probe", "1", generate=True)
        except ApiError as err:
            return str(err)
        return None


@pytest.fixture
def left(cluster):
    kueue = KueueManager(cluster)
    yield KueueLeft(cluster, kueue)
    kueue.done.set()


def takeover(left, *flags: str):
    return tower(left.cluster, "takeover", "--from", "kueue", *flags)


def handback(left, *flags: str):
    return tower(left.cluster, "handback", "--to", "kueue", *flags)


def test_takeover_refuses_while_kueues_lease_is_renewed_and_changes_nothing(left):
    left.kueue.start()
    before = left.state()
    run = takeover(left, "--yes")
    assert run.returncode == 1
    assert run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith(
        f"error: Kueue's controller holds its Lease kueue-system/{KUEUE_LEASE} (holder {HOLDER}, "
        "renewed "
    )
    assert line.endswith(
        "Tower never takes over beside a live Kueue, and nothing was changed; stop it first: "
        "kubectl -n kueue-system scale deployment kueue-controller-manager --replicas=0"
    )
    assert left.state() == before


def test_a_lease_renewed_by_a_clock_an_hour_behind_is_live_too(left):
    """Its renewTime looks an hour stale, but it changes between two looks."""
    behind = {"value": 0}

    def write(holder):
        behind["value"] += 1
        stamp = datetime.now(UTC) - timedelta(hours=1, microseconds=behind["value"])
        spec = {"holderIdentity": holder, "leaseDurationSeconds": 3,
                "renewTime": stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}  # fmt: skip
        lease = left.cluster.get("leases", KUEUE_LEASE, KUEUE_NS)
        if lease is None:
            body = {"metadata": {"name": KUEUE_LEASE, "namespace": KUEUE_NS}, "spec": spec}
            left.cluster.admin.create(r.LEASES, body, KUEUE_NS)
        else:
            lease["spec"] = spec
            left.cluster.admin.update(r.LEASES, lease)

    left.kueue._write = write
    left.kueue.start()
    before = left.state()
    run = takeover(left, "--yes")
    assert run.returncode == 1
    assert "renewed within 3.0s" in run.stderr
    assert left.state() == before


def test_the_plan_says_each_step_and_changes_nothing(left):
    left.kueue.start()
    left.kueue.stop()  # controller-runtime's ReleaseOnCancel: the holder is cleared
    assert "no endpoints available" in left.job_refusal()
    before = left.state()
    run = takeover(left)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Takeover from Kueue (kueue-system):"
    assert lines[1] == (
        f"1. done     Kueue's controller is stopped: its Lease kueue-system/{KUEUE_LEASE} has "
        "no holder (let go)"
    )
    assert lines[2].startswith(
        "2. to do    Kueue's webhook configurations are removed: delete "
        "MutatingWebhookConfiguration kueue-mutating-webhook-configuration ("
    )
    assert "failurePolicy Fail), ValidatingWebhookConfiguration " in lines[2]
    assert lines[3].startswith(
        "3. to do    the CRDs convert through Tower's webhook: 5 of 5 CRDs (clusterqueues, "
        "cohorts, localqueues, multikueueclusters, workloads) do not convert through Service "
        "tower-system/tower-webhook /convert"
    )
    assert lines[4].startswith("4. done     Tower's webhooks and controller are installed")
    assert lines[5].startswith(
        "5. to do    Tower reads Kueue's Configuration: write the Configuration of ConfigMap "
        "kueue-system/kueue-manager-config to ConfigMap tower-system/tower-manager-config"
    )
    assert lines[6] == (
        "6. to do    Tower's controller runs: scale Deployment tower-controller from 0 to 2"
    )
    assert lines[7] == 'Run it again with --yes to do the steps marked "to do".'
    assert left.state() == before


def taken_over(left) -> None:
    """What a finished takeover leaves: each step's outcome on the objects."""
    cluster = left.cluster
    for name in KUEUE_WEBHOOKS:
        assert cluster.get("mutatingwebhookconfigurations", name) is None
        assert cluster.get("validatingwebhookconfigurations", name) is None
    saved = cluster.get("configmaps", "tower-takeover-saved", KUEUE_NS)
    assert sorted(saved["data"]) == [
        "mutatingwebhookconfigurations.kueue-mutating-webhook-configuration.json",
        "validatingwebhookconfigurations.kueue-validating-webhook-configuration.json",
    ]
    tower_ca = base64.b64encode(left.tower_ca).decode()
    for name in CONVERTED:
        assert left.conversion(name) == {
            "service": {"namespace": "tower-system", "name": "tower-webhook",
                        "path": "/convert", "port": 443},
            "caBundle": tower_ca,
        }  # fmt: skip
    config = cluster.get("configmaps", "tower-manager-config", "tower-system")
    written = yaml.safe_load(config["data"]["controller_manager_config.yaml"])
    kueues = yaml.safe_load(documents("manager.yaml")[0]["data"]["controller_manager_config.yaml"])
    assert written["integrations"] == kueues["integrations"]
    assert written["namespace"] == "kueue-system"
    assert written["leaderElection"] == {"leaderElect": True, "resourceName": "tower-controller"}
    controller = cluster.get("deployments", "tower-controller", "tower-system")
    assert controller["spec"]["replicas"] == 2
    for name in ("tower-controller", "tower-webhook"):
        template = cluster.get("deployments", name, "tower-system")["spec"]["template"]
        assert "tower.dev/configuration" in template["metadata"]["annotations"]
    assert left.job_refusal() is None  # Tower's webhook answers; Kueue's no longer refuses


def test_takeover_does_each_step_and_a_second_run_changes_nothing(left):
    left.kueue.start()
    left.kueue.stop()
    run = takeover(left, "--yes")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [line[:8] for line in lines[1:7]] == [f"{n}. done " for n in range(1, 7)]
    assert lines[2].startswith(
        "2. done     Kueue's webhook configurations are removed: deleted "
        "MutatingWebhookConfiguration kueue-mutating-webhook-configuration"
    )
    assert lines[7].startswith("finished in ")
    assert lines[7].endswith("Tower now admits; kubectl tower handback --to kueue goes back")
    taken_over(left)

    before = left.state()
    again = takeover(left, "--yes")
    assert again.returncode == 0, again.stderr
    assert all(" done " in line for line in again.stdout.splitlines()[1:7])
    assert left.state() == before


def test_a_failure_part_way_is_finished_by_running_it_again(left):
    left.kueue.start()
    left.kueue.stop()
    left.cluster.api.faults.append(
        Fault(method="PATCH", plural="customresourcedefinitions", code=500, times=1)
    )
    run = takeover(left, "--yes")
    assert run.returncode == 1
    assert run.stdout.splitlines()[2].startswith(
        "2. done     Kueue's webhook configurations are removed"
    )
    assert len(run.stdout.splitlines()) == 3  # stopped at step 3
    assert run.stderr.splitlines() == [
        "error: 500 InternalError: injected fault on customresourcedefinitions"
    ]
    rerun = takeover(left, "--yes")
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.splitlines()[2] == (
        "2. done     Kueue's webhook configurations are removed: none is left"
    )
    taken_over(left)


def test_handback_puts_kueues_plumbing_back_and_takeover_again_restores_tower(left):
    left.cluster.admin.patch(
        r.SECRETS,
        "kueue-webhook-server-cert",
        secret("kueue-webhook-server-cert", KUEUE_NS, left.kueue_ca),
        KUEUE_NS,
    )
    left.kueue.start()
    left.kueue.stop()
    assert takeover(left, "--yes").returncode == 0

    back = handback(left, "--yes")
    assert back.returncode == 0, back.stderr
    lines = back.stdout.splitlines()
    assert lines == [
        "Handback to Kueue (kueue-system):",
        "1. done     Tower's controller is stopped: Deployment tower-controller scaled from 2 "
        "to 0 replicas",
        lines[2],
        "3. done     the CRDs convert through Kueue's webhook: clusterqueues, cohorts, "
        "localqueues, multikueueclusters, workloads now convert through Service "
        "kueue-system/kueue-webhook-service /convert with its CA",
        "4. done     Kueue's webhook configurations are back: created "
        "MutatingWebhookConfiguration kueue-mutating-webhook-configuration (21 webhooks, 21 "
        "failurePolicy Fail), ValidatingWebhookConfiguration "
        "kueue-validating-webhook-configuration (22 webhooks, 22 failurePolicy Fail) as "
        "takeover found them",
        lines[5],
    ]
    assert lines[2].startswith(
        "2. done     Tower's webhook configurations are removed: deleted "
        "MutatingWebhookConfiguration tower-mutating-webhook"
    )
    assert lines[5].startswith("finished in ")
    assert lines[5].endswith(
        "start Kueue: kubectl -n kueue-system scale deployment kueue-controller-manager "
        "--replicas=1"
    )
    cluster = left.cluster
    for name in ("tower-mutating-webhook", "tower-validating-webhook"):
        assert cluster.get("mutatingwebhookconfigurations", name) is None
        assert cluster.get("validatingwebhookconfigurations", name) is None
    for original in documents("webhooks.yaml"):
        plural = f"{original['kind'].lower()}s"
        restored = cluster.get(plural, original["metadata"]["name"])
        assert restored["webhooks"] == original["webhooks"]
        assert restored["metadata"]["labels"] == original["metadata"]["labels"]
    kueue_ca = base64.b64encode(left.kueue_ca).decode()
    for name in CONVERTED:
        assert left.conversion(name) == {
            "service": {"namespace": "kueue-system", "name": "kueue-webhook-service",
                        "path": "/convert", "port": 443},
            "caBundle": kueue_ca,
        }  # fmt: skip
    assert cluster.get("configmaps", "tower-takeover-saved", KUEUE_NS) is None
    controller = cluster.get("deployments", "tower-controller", "tower-system")
    assert controller["spec"]["replicas"] == 0
    assert controller["metadata"]["annotations"]["tower.dev/replicas-before-handback"] == "2"
    assert "no endpoints available" in left.job_refusal()  # as Kueue's install, until it starts

    before = left.state()
    again = handback(left, "--yes")
    assert again.returncode == 0, again.stderr
    assert left.state() == before

    # And over to Tower once more: its webhooks made again from its CA, its replicas back.
    over = takeover(left, "--yes")
    assert over.returncode == 0, over.stderr
    assert over.stdout.splitlines()[4].startswith(
        "4. done     Tower's webhooks and controller are installed: created "
        "MutatingWebhookConfiguration tower-mutating-webhook, ValidatingWebhookConfiguration "
        "tower-validating-webhook"
    )
    controller = cluster.get("deployments", "tower-controller", "tower-system")
    assert controller["spec"]["replicas"] == 2
    assert "tower.dev/replicas-before-handback" not in (
        controller["metadata"].get("annotations") or {}
    )
    hooks = cluster.get("mutatingwebhookconfigurations", "tower-mutating-webhook")["webhooks"]
    assert {json.dumps(h["clientConfig"]["service"], sort_keys=True) for h in hooks} >= {
        json.dumps({"name": "tower-webhook", "namespace": "tower-system", "path": p, "port": 443},
                   sort_keys=True)
        for p in ("/mutate-batch-v1-job",)
    }  # fmt: skip


def test_tower_not_installed_is_a_blocked_step_naming_the_install(left):
    left.cluster.admin.delete(DEPLOYMENTS, "tower-controller", "tower-system")
    left.kueue.start()
    left.kueue.stop()
    run = takeover(left)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[4] == (
        "4. blocked  Tower's webhooks and controller are installed: no Deployment "
        "tower-system/tower-controller: install Tower (kubectl apply -k deploy/default, or "
        "helm install tower deploy/helm/tower -n tower-system --create-namespace), then run "
        "this again"
    )
    yes = takeover(left, "--yes")
    assert yes.returncode == 1
    assert yes.stderr.startswith(
        "error: not finished: step 4 (Tower's webhooks and controller are installed) is blocked"
    )


def test_the_configuration_names_the_lease_takeover_looks_at(left, tmp_path):
    config = tmp_path / "kueue.yaml"
    config.write_text(
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "leaderElection:\n  leaderElect: true\n  resourceName: my-kueue\n"
    )
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease = {"metadata": {"name": "my-kueue", "namespace": KUEUE_NS},
             "spec": {"holderIdentity": HOLDER, "leaseDurationSeconds": 15, "renewTime": stamp}}  # fmt: skip
    left.cluster.admin.create(r.LEASES, lease, KUEUE_NS)
    before = left.state()
    run = takeover(left, "--config", str(config), "--yes")
    assert run.returncode == 1
    assert run.stderr.startswith(
        f"error: Kueue's controller holds its Lease kueue-system/my-kueue (holder {HOLDER}, "
    )
    assert left.state() == before
    # Kueue's default Lease is not the one it reads: without the file, nothing stops it.
    plan = takeover(left)
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines()[1] == (
        f"1. done     Kueue's controller is stopped: no Lease kueue-system/{KUEUE_LEASE}: "
        "Kueue's controller does not lead here"
    )

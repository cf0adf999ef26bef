"""deploy/default, as `kubectl kustomize` renders it: every object valid against Kubernetes
1.32's schemas, the webhook configurations generated, and the Deployments hardened."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest

from certs import kube as certs_kube
from tests import yamlc

ROOT = Path(__file__).resolve().parents[2]
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def render(path: str = "deploy/default") -> list[dict]:
    out = subprocess.run(
        [KUBECTL or "kubectl", "kustomize", path],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [d for d in yamlc.safe_load_all(out) if d]


@pytest.fixture(scope="module")
def rendered() -> list[dict]:
    return render()


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict], kind: str, name: str) -> dict:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_every_rendered_object_is_valid_and_known(rendered):
    assert len(rendered) > 10
    problems = []
    for obj in rendered:
        try:
            # Strict: an unknown field, and a kind no schema knows, are errors.
            kubernetes_validate.validate(obj, "1.32.0", strict=True)
        except (
            kubernetes_validate.ValidationError,
            kubernetes_validate.SchemaNotFoundError,
        ) as err:
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {err}")
    assert problems == []


def test_the_webhook_configurations_are_generated():
    """`python -m certs manifests` wrote deploy/default/webhooks.yaml; it agrees with the code."""
    text = (ROOT / "deploy" / "default" / "webhooks.yaml").read_text()
    have = [d for d in yamlc.safe_load_all(text) if d]
    want = list(certs_kube.webhook_configurations(None, service=certs_kube.SERVICE))
    assert have == want, "run python -m certs manifests --out deploy/default/webhooks.yaml"


def test_the_webhook_configurations_fail_closed_only_where_they_must(rendered):
    for config in by_kind(rendered, "MutatingWebhookConfiguration") + by_kind(
        rendered, "ValidatingWebhookConfiguration"
    ):
        for hook in config["webhooks"]:
            assert hook["timeoutSeconds"] == 3
            assert hook["matchPolicy"] == "Equivalent"
            assert hook["sideEffects"] == "None"
            assert hook["clientConfig"]["service"] == {
                "namespace": "tower-system",
                "name": "tower-webhook",
                "path": hook["clientConfig"]["service"]["path"],
                "port": 443,
            }
            operations = {op for rule in hook["rules"] for op in rule["operations"]}
            jobs = hook["rules"][0]["resources"][0] in ("jobs", "jobsets")
            if jobs and operations == {"CREATE"} and config["kind"].startswith("Mutating"):
                assert hook["failurePolicy"] == "Fail"  # a queued Job must start suspended
            elif jobs:
                assert hook["failurePolicy"] == "Ignore"  # the controller re-suspends
            if jobs:  # Jobs Tower does not queue never wait on the webhook
                selector = hook["objectSelector"]["matchExpressions"][0]
                assert selector["key"] == "kueue.x-k8s.io/queue-name"


def test_the_crds_convert_through_the_webhook_service(rendered):
    converted = {
        crd["metadata"]["name"]: crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
        for crd in by_kind(rendered, "CustomResourceDefinition")
        if crd["spec"].get("conversion", {}).get("strategy") == "Webhook"
    }
    assert set(converted) == set(certs_kube.CONVERTED_CRDS)
    for service in converted.values():
        assert (service["namespace"], service["name"], service["path"]) == (
            "tower-system",
            "tower-webhook",
            "/convert",
        )


@pytest.mark.parametrize("name", ["tower-webhook", "tower-controller"])
def test_the_deployments_are_replicated_and_hardened(rendered, name):
    deployment = one(rendered, "Deployment", name)
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    for container in pod["containers"] + pod.get("initContainers", []):
        context = container["securityContext"]
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert container["resources"]["requests"]
        assert container["resources"]["limits"]["memory"]
        assert container["image"] == "tower:0.1.0"
    main = pod["containers"][0]
    assert main["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert main["livenessProbe"]["httpGet"]["path"] == "/healthz"
    budget = next(
        b
        for b in by_kind(rendered, "PodDisruptionBudget")
        if b["spec"]["selector"]["matchLabels"] == spec["selector"]["matchLabels"]
    )
    assert budget["spec"]["minAvailable"] == 1


def test_the_controller_keeps_the_certificate_and_the_webhook_serves_it(rendered):
    controller = one(rendered, "Deployment", "tower-controller")["spec"]["template"]["spec"]
    # The bootstrap reads the Configuration for the webhooks' namespaces (the ConfigMap).
    config = "/etc/tower/config/controller_manager_config.yaml"
    assert controller["initContainers"][0]["args"] == ["certs", "bootstrap", "--config", config]
    mounts = controller["initContainers"][0]["volumeMounts"]
    assert mounts == [
        {"name": "manager-config", "mountPath": "/etc/tower/config", "readOnly": True}
    ]
    cron = one(rendered, "CronJob", "tower-certs")["spec"]["jobTemplate"]["spec"]["template"]
    assert cron["spec"]["containers"][0]["args"] == ["certs", "bootstrap", "--config", config]
    volume = cron["spec"]["volumes"][0]
    assert volume == {"name": "manager-config", "configMap": {"name": "tower-manager-config"}}
    webhook = one(rendered, "Deployment", "tower-webhook")["spec"]["template"]["spec"]
    secret = next(v for v in webhook["volumes"] if v["name"] == "certs")["secret"]
    assert secret["secretName"] == certs_kube.SECRET
    env = {e["name"]: e.get("value") for e in webhook["containers"][0]["env"]}
    assert env["TOWER_WEBHOOK_CONTROLLER_USERNAME"] == (
        "system:serviceaccount:tower-system:tower-controller"
    )
    # The webhook reads the same file as the controller, from the same ConfigMap.
    assert env["TOWER_CONFIG"] == config
    mount = next(
        m for m in webhook["containers"][0]["volumeMounts"] if m["name"] == "manager-config"
    )
    assert config.startswith(mount["mountPath"] + "/")
    assert {"name": "manager-config", "configMap": {"name": "tower-manager-config"}} in (
        webhook["volumes"]
    )
    service = one(rendered, "Service", "tower-webhook")
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https"}]


def test_the_controller_reads_kueues_configuration_from_its_config_map(rendered, tmp_path):
    from extender.kube.config_file import load

    config_map = one(rendered, "ConfigMap", "tower-manager-config")
    pod = one(rendered, "Deployment", "tower-controller")["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "controller")
    path = container["args"][container["args"].index("--config") + 1]
    mount = next(m for m in container["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == "tower-manager-config"
    file = tmp_path / path.rsplit("/", 1)[1]
    file.write_text(config_map["data"][file.name])
    config = load(str(file))
    # The Lease of a release without the file, so an upgrade keeps it; Kueue's budget.
    assert config.leader_election.resource_name == "tower-controller"
    assert (config.kube_api_qps, config.kube_api_burst) == (300.0, 500)
    assert len(config.integrations) == 12
    assert config.warnings("f") == []
    # Kueue's v1beta2 turns waitForPodsReady on when the file is silent: 30 minutes.
    assert config.wait_for_pods_ready is not None
    assert config.wait_for_pods_ready.timeout == 1800.0

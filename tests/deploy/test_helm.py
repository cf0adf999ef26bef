"""The Helm chart renders the kustomize base, object for object, and its values do what
they say. (Rendered by tests/deploy/helm.py; `make e2e` checks it against helm template.)"""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from tests.deploy.helm import TemplateError, template
from tests.deploy.test_manifests import KUBECTL, render

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "tower"


def key(obj):
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def hook(obj):
    return (obj["metadata"].get("annotations") or {}).get("helm.sh/hook")


def test_the_chart_with_its_defaults_is_the_kustomize_base():
    """Object for object, less the Namespace and the chart's post-delete hook (below)."""
    kustomize = {key(o): o for o in render("deploy/default") if o["kind"] != "Namespace"}
    chart = {key(o): o for o in template(CHART) if not hook(o)}
    assert sorted(chart) == sorted(kustomize)
    for name, obj in chart.items():
        assert obj == kustomize[name], name


def test_after_an_uninstall_a_hook_leaves_the_crds_readable_and_takes_what_tower_made():
    """Helm keeps crds/: the post-delete hook runs `python -m certs uninstall` (the CRDs'
    conversion back to None, the Secret and Lease deleted), with rights for that only."""
    hooks = [o for o in template(CHART) if hook(o)]
    assert {hook(o) for o in hooks} == {"post-delete"}
    job = one(hooks, "Job", "tower-uninstall")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["certs", "uninstall"]
    assert container["image"] == "tower:0.1.0"
    cluster_rules = one(hooks, "ClusterRole", "tower-uninstall")["rules"]
    assert cluster_rules == [{"apiGroups": ["apiextensions.k8s.io"],
                              "resources": ["customresourcedefinitions"],
                              "verbs": ["list", "patch"]}]  # fmt: skip
    rules = one(hooks, "Role", "tower-uninstall")["rules"]
    assert {(r["resources"][0], r["resourceNames"][0], *r["verbs"]) for r in rules} == {
        ("secrets", "tower-webhook-tls", "delete"),
        ("leases", "tower-controller", "delete"),
    }
    weights = {o["kind"]: int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in hooks}
    assert weights["Job"] > max(w for k, w in weights.items() if k != "Job")  # rights first


def test_the_chart_must_be_installed_in_tower_system():
    with pytest.raises(TemplateError, match="install Tower into the namespace tower-system"):
        template(CHART, namespace="default")


def one(objs, kind, name):
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_values_change_what_they_say():
    objs = template(
        CHART,
        {
            "image": {"repository": "registry.example.com/tower", "tag": "1.2.3"},
            "webhook": {"replicas": 3, "manageJobsWithoutQueueName": "team-a,team-b"},
            "controller": {"fairSharing": True, "extraArgs": ["--kube-api-qps", "100"]},
            "metrics": {"serviceMonitor": {"enabled": True}},
        },
    )
    webhook = one(objs, "Deployment", "tower-webhook")
    assert webhook["spec"]["replicas"] == 3
    container = webhook["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example.com/tower:1.2.3"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["TOWER_WEBHOOK_MANAGE_JOBS_WITHOUT_QUEUE_NAME"] == "team-a,team-b"
    controller = one(objs, "Deployment", "tower-controller")["spec"]["template"]["spec"]
    assert controller["containers"][0]["args"][-3:] == ["--fair-sharing", "--kube-api-qps", "100"]
    monitor = one(objs, "ServiceMonitor", "tower-controller")
    endpoint = monitor["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["scheme"], endpoint["tlsConfig"]) == (
        "https",
        "https",
        {"insecureSkipVerify": True},
    )
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"


def test_cert_manager_replaces_the_bootstrap():
    objs = template(CHART, {"certManager": {"enabled": True}})
    controller = one(objs, "Deployment", "tower-controller")["spec"]["template"]["spec"]
    # The init container no longer touches the certificate; it still sets the webhooks'
    # namespaces from Kueue's Configuration.
    assert controller["initContainers"][0]["args"] == [
        "certs",
        "bootstrap",
        "--no-certificate",
        "--config",
        "/etc/tower/config/controller_manager_config.yaml",
    ]
    assert not [o for o in objs if o["kind"] == "CronJob"]
    certificate = one(objs, "Certificate", "tower-webhook")
    assert certificate["spec"]["secretName"] == "tower-webhook-tls"
    for kind, name in (
        ("MutatingWebhookConfiguration", "tower-mutating-webhook"),
        ("ValidatingWebhookConfiguration", "tower-validating-webhook"),
    ):
        annotations = one(objs, kind, name)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": "tower-system/tower-webhook"}


@pytest.mark.parametrize("overrides", [{}, {"certManager": {"enabled": True}}])
def test_what_the_chart_renders_is_valid(overrides):
    for obj in template(CHART, overrides):
        if obj["apiVersion"].startswith(("cert-manager.io", "monitoring.coreos.com")):
            continue  # their schemas are not Kubernetes'
        kubernetes_validate.validate(obj, "1.32.0", strict=True)


def test_the_charts_crds_are_deploy_crds():
    deploy = CHART.parents[1] / "crds"
    chart = {p.name: p.read_text() for p in (CHART / "crds").glob("*.yaml")}
    assert chart == {p.name: p.read_text() for p in deploy.glob("*.yaml")}, (
        "copy deploy/crds/*.yaml to deploy/helm/tower/crds/"
    )

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
def test_the_chart_with_its_defaults_is_the_kustomize_base():
    kustomize = {key(o): o for o in render("deploy/default") if o["kind"] != "Namespace"}
    chart = {key(o): o for o in template(CHART)}
    assert sorted(chart) == sorted(kustomize)
    for name, obj in chart.items():
        assert obj == kustomize[name], name


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
    assert monitor["spec"]["endpoints"][0]["port"] == "health"


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

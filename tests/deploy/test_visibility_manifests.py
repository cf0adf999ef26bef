"""The visibility API's manifests: Kueue's APIServices, Service and RBAC in the kustomize base
and the chart (which its `visibility.enabled` value turns off), and the optional API Priority
and Fairness objects."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from tests.deploy.helm import template
from tests.deploy.test_manifests import KUBECTL, render

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "tower"
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


def one(objs, kind, name):
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_the_base_registers_both_versions_with_the_controllers_service():
    objs = render("deploy/default")
    for version in ("v1beta1", "v1beta2"):
        spec = one(objs, "APIService", f"{version}.visibility.kueue.x-k8s.io")["spec"]
        assert spec == {
            "group": "visibility.kueue.x-k8s.io",
            "version": version,
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
            "insecureSkipTLSVerify": True,
            "service": {"name": "tower-visibility-server", "namespace": "tower-system"},
        }
    service = one(objs, "Service", "tower-visibility-server")
    assert service["metadata"]["namespace"] == "tower-system"
    controller = one(objs, "Deployment", "tower-controller")
    assert service["spec"]["selector"] == controller["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": "visibility"}
    ]
    reader = one(objs, "RoleBinding", "tower-visibility-server-auth-reader")
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    delegator = one(objs, "ClusterRoleBinding", "tower-visibility-server-auth-delegator")
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    account = one(objs, "ServiceAccount", "tower-controller")["metadata"]
    for binding in (reader, delegator):
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
        ]


def test_the_chart_leaves_the_visibility_api_out_when_told():
    def visibility(objs):
        return sorted(o["metadata"]["name"] for o in objs if "visibility" in o["metadata"]["name"])

    assert visibility(template(CHART)) == visibility(render("deploy/visibility"))
    assert visibility(template(CHART, {"visibility": {"enabled": False}})) == []


def test_api_priority_and_fairness_is_valid_and_queues_the_visibility_group():
    objs = render("deploy/visibility/apf")
    for obj in objs:
        kubernetes_validate.validate(obj, "1.32.0", strict=True)
    schema = one(objs, "FlowSchema", "tower-visibility")["spec"]
    assert schema["priorityLevelConfiguration"] == {"name": "tower-visibility"}
    assert schema["rules"][0]["resourceRules"][0]["apiGroups"] == ["visibility.kueue.x-k8s.io"]

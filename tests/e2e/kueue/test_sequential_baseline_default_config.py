"""Kueue v0.19.2 test/e2e/sequential/baseline/default_config_test.go, ported.

Certs: Kueue's own certificate controller puts the caBundle back into its CRDs' conversion and
its webhook configurations when it is cleared. Tower's certificates are `python -m certs`
(bootstrap at start and daily, or cert-manager), and its controller may not write webhook
configurations or CRDs: a cleared caBundle stays cleared until the next bootstrap (see
docs/kueue.md, "Webhook certificates"). The case checks the rest of Kueue's steps and states
the difference where Kueue expects the caBundle back.

Visibility Server: Kueue mounts a kubeconfig of another ServiceAccount into its Deployment;
here the controller, a process on this machine, is restarted with that kubeconfig (the
ServiceAccount's token from the TokenRequest API rather than a token Secret). Its identity
holds Tower's controller ClusterRole and TokenReview, not SubjectAccessReview: the visibility
API answers an internal error, until system:auth-delegator is bound. The request is made as a
user allowed to read pending workloads who is not in system:masters (kind's admin is not; this
control plane's is, and that group is always allowed, as by Kubernetes' own delegated
authorizer).
"""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from extender.core.jobframework import registry
from extender.kube.generators.rbac import job_rules
from tests.e2e.kueue import util
from tests.e2e.kueue.cases import DifferenceError, kueue_case
from tests.e2e.kueue.util import (
    KUEUE,
    MEDIUM_TIMEOUT,
    ROOT,
    TIMEOUT,
    Cluster,
    Tower,
    VisibilityClient,
    condition,
    eventually,
    make_cluster_queue,
    make_flavor_quotas,
    make_local_queue,
    make_resource_flavor,
)

pytestmark = pytest.mark.e2e
GO = "sequential/baseline/default_config_test.go"
MUTATING = "tower-mutating-webhook"
LOCAL_QUEUE_CRD = "localqueues.kueue.x-k8s.io"
SA = "visibility-test-sa"
TEST_LABEL = {"visibility-test-rbac": "true"}
CQ_NAME = "test-kubeconfig-cq"
READER = "visibility-test-user"


@pytest.fixture
def certs_queues(cluster: Cluster, ns: str) -> Iterator[str]:
    """BeforeEach: a flavor, a ClusterQueue and the LocalQueue `main`; AfterEach."""
    flavor, cq = f"on-demand-{ns}", f"cluster-queue-{ns}"
    cluster.create("resourceflavors", make_resource_flavor(flavor, {"instance-type": "on-demand"}))
    quotas = make_flavor_quotas(flavor, cpu="1", memory="1Gi")
    cluster.create_active("clusterqueues", make_cluster_queue(cq, quotas))
    cluster.create_active("localqueues", make_local_queue("main", ns, cq), ns)
    yield ns
    cluster.delete_namespace(ns)
    cluster.expect_deleted("clusterqueues", cq)
    cluster.expect_deleted("resourceflavors", flavor)


def crd_bundle(ext: client.ApiextensionsV1Api) -> str:
    crd = ext.read_custom_resource_definition(LOCAL_QUEUE_CRD)
    return crd.spec.conversion.webhook.client_config.ca_bundle or ""


def webhook_bundles(reg: client.AdmissionregistrationV1Api) -> list[str]:
    mwc = reg.read_mutating_webhook_configuration(MUTATING)
    return [w.client_config.ca_bundle or "" for w in mwc.webhooks]


@kueue_case(
    GO,
    "Default configuration tests Certs should rotate the certificates for the CRD resources",
    differs="#webhook-certificates",
)
def test_a_cleared_ca_bundle_is_put_back(
    api_client: client.ApiClient, cluster: Cluster, certs_queues: str
) -> None:
    ext = client.ApiextensionsV1Api(api_client)
    reg = client.AdmissionregistrationV1Api(api_client)
    # Tower runs outside the cluster here (`certs install`): its CRDs' conversion names the
    # in-cluster Service and holds no bundle, so only the webhooks' bundle is Kueue's step.
    crd_has_bundle = bool(crd_bundle(ext))
    eventually(lambda: all(webhook_bundles(reg)), MEDIUM_TIMEOUT, "the webhooks' caBundle")
    saved = reg.read_mutating_webhook_configuration(MUTATING)
    bundle = crd_bundle(ext)
    difference = None
    try:
        if crd_has_bundle:
            ext.patch_custom_resource_definition(LOCAL_QUEUE_CRD, {"spec": {"conversion": {
                "webhook": {"clientConfig": {"caBundle": None}}}}})  # fmt: skip
        cleared = reg.read_mutating_webhook_configuration(MUTATING)
        for webhook in cleared.webhooks:
            webhook.client_config.ca_bundle = None
        reg.replace_mutating_webhook_configuration(MUTATING, cleared)
        try:
            if crd_has_bundle:
                eventually(lambda: crd_bundle(ext), MEDIUM_TIMEOUT, "the CRD's caBundle back")
            eventually(lambda: all(webhook_bundles(reg)), MEDIUM_TIMEOUT, "the webhooks' back")
        except AssertionError as err:
            difference = f"Kueue puts a cleared caBundle back; Tower: {err}"
    finally:  # what the next bootstrap does: the CA put back
        if crd_has_bundle:
            ext.patch_custom_resource_definition(LOCAL_QUEUE_CRD, {"spec": {"conversion": {
                "webhook": {"clientConfig": {"caBundle": bundle}}}}})  # fmt: skip
        now = reg.read_mutating_webhook_configuration(MUTATING)
        for webhook, before in zip(now.webhooks, saved.webhooks, strict=True):
            webhook.client_config.ca_bundle = before.client_config.ca_bundle
        reg.replace_mutating_webhook_configuration(MUTATING, now)
    lq = cluster.get("localqueues", "main", certs_queues)
    lq["spec"]["stopPolicy"] = "Hold"
    cluster.custom.replace_namespaced_custom_object(
        KUEUE, "v1beta2", certs_queues, "localqueues", "main", lq
    )
    eventually(
        lambda: (
            condition(cluster.get("localqueues", "main", certs_queues), "Active").get("status")
            == "False"
        ),
        MEDIUM_TIMEOUT,
        "the LocalQueue inactive",
    )
    if difference is not None:
        raise DifferenceError(difference)


def controller_role() -> dict:
    """Tower's controller ClusterRole (deploy/rbac), copied under a test name: the base
    permissions, without TokenReview and SubjectAccessReview (tower-metrics-auth), and the
    rules of the kinds the suite's Configuration turns on beyond Kueue's default set (the
    Kubeflow v1 kinds: their CRDs are on the plane once their ports ran), as Kueue's own role
    covers every kind it manages."""
    docs = yaml.safe_load_all((ROOT / "deploy" / "rbac" / "controller.yaml").read_text())
    role = next(d for d in docs if d and d["kind"] == "ClusterRole"
                and d["metadata"]["name"] == "tower-controller")  # fmt: skip
    frameworks = yaml.safe_load(util.CONFIGURATION)["integrations"]["frameworks"]
    extra = [a for a in registry.enabled(frameworks) if a not in registry.enabled()]
    return {**role, "rules": [*role["rules"], *job_rules(extra)],
            "metadata": {"name": "vistest-copy-tower-controller", "labels": TEST_LABEL}}  # fmt: skip


def binding(name: str, role: str, namespace: str, kind: str = "ClusterRole") -> dict:
    return {
        "metadata": {"name": name, "labels": TEST_LABEL},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": SA, "namespace": namespace}],
    }


def sa_kubeconfig(api_client: client.ApiClient, token: str, path: Path) -> str:
    """A kubeconfig for the cluster's address and CA, authenticated as the ServiceAccount."""
    conf = api_client.configuration
    ca = Path(conf.ssl_ca_cert).read_bytes() if conf.ssl_ca_cert else b""
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "default",
        "clusters": [{"name": "local", "cluster": {
            "server": conf.host, "certificate-authority-data": base64.b64encode(ca).decode()}}],
        "users": [{"name": SA, "user": {"token": token}}],
        "contexts": [{"name": "default", "context": {"cluster": "local", "user": SA}}],
    }))  # fmt: skip
    return str(path)


@pytest.fixture
def custom_identity(
    api_client: client.ApiClient,
    tower: Tower,
    visibility_api: str,
    cluster: Cluster,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[None]:
    """The ServiceAccount, its RBAC (the controller's role, the auth reader, TokenReview) and
    the controller restarted as it; the AfterEach puts everything back."""
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    cluster.create_active("clusterqueues", {
        "apiVersion": f"{KUEUE}/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": CQ_NAME}, "spec": {"namespaceSelector": {}},
    })  # fmt: skip
    core.create_namespaced_service_account(visibility_api, {"metadata": {"name": SA}})
    rbac.create_cluster_role(controller_role())
    rbac.create_cluster_role_binding(
        binding("vistest-copy-tower-controller", "vistest-copy-tower-controller", visibility_api)
    )
    rbac.create_namespaced_role_binding(
        "kube-system",
        binding(
            "visibility-test-auth-reader",
            "extension-apiserver-authentication-reader",
            visibility_api,
            kind="Role",
        ),
    )
    rbac.create_cluster_role(
        {
            "metadata": {"name": "visibility-test-token-reviewer", "labels": TEST_LABEL},
            "rules": [
                {
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["tokenreviews"],
                    "verbs": ["create"],
                }
            ],
        }
    )
    rbac.create_cluster_role_binding(
        binding("visibility-test-token-reviewer", "visibility-test-token-reviewer", visibility_api)
    )
    rbac.create_cluster_role(
        {
            "metadata": {"name": "visibility-test-reader", "labels": TEST_LABEL},
            "rules": [
                {
                    "apiGroups": ["visibility.kueue.x-k8s.io"],
                    "resources": ["clusterqueues/pendingworkloads"],
                    "verbs": ["get"],
                }
            ],
        }
    )
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "visibility-test-reader", "labels": TEST_LABEL},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "visibility-test-reader",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": READER}],
        }
    )
    token = core.create_namespaced_service_account_token(
        SA, visibility_api, {"spec": {"expirationSeconds": 3600}}).status.token  # fmt: skip
    # Only the controller runs as the ServiceAccount; the test's own clients stay the admin.
    with monkeypatch.context() as patched:
        patched.setattr(util, "KUBECONFIG", sa_kubeconfig(api_client, token, tmp_path / "sa"))
        tower.restart_controller()
    yield
    tower.restart_controller()
    selector = ",".join(f"{k}={v}" for k, v in TEST_LABEL.items())
    for crb in rbac.list_cluster_role_binding(label_selector=selector).items:
        rbac.delete_cluster_role_binding(crb.metadata.name)
    for role in rbac.list_cluster_role(label_selector=selector).items:
        rbac.delete_cluster_role(role.metadata.name)
    with contextlib.suppress(client.ApiException):
        rbac.delete_namespaced_role_binding("visibility-test-auth-reader", "kube-system")
    core.delete_namespaced_service_account(SA, visibility_api)
    cluster.expect_deleted("clusterqueues", CQ_NAME)


@kueue_case(
    GO,
    "Default configuration tests Visibility Server Should use the RBAC identity from the "
    "provided kubeconfig",
)
def test_the_visibility_api_uses_the_identity_of_the_kubeconfig(
    api_client: client.ApiClient, visibility_api: str, custom_identity: None
) -> None:
    def internal_error() -> bool:
        try:
            VisibilityClient("v1beta2", impersonate=READER).cluster_queue_pending(CQ_NAME)
        except client.ApiException as err:
            status, body = err.status, err.body
        else:
            raise AssertionError("the request succeeded without delegated authorization")
        assert status == 500, f"expected an internal error, got {status}: {body}"
        return True

    eventually(internal_error, TIMEOUT, "an internal error without SubjectAccessReview")
    client.RbacAuthorizationV1Api(api_client).create_cluster_role_binding(
        binding("visibility-test-auth-delegator", "system:auth-delegator", visibility_api)
    )

    def answers() -> bool:
        try:
            VisibilityClient("v1beta2", impersonate=READER).cluster_queue_pending(CQ_NAME)
        except client.ApiException as err:
            raise AssertionError(f"{err.status}: {err.body}") from err
        return True

    eventually(answers, TIMEOUT, "the visibility API answering with the permission")

"""Kueue's user roles on a real API server: the CRDs and deploy/rbac/user-roles.yaml applied,
the bindings of Kueue's "Setup RBAC" page applied as written (and the same with Tower's role
names), then what a batch user and a batch admin may do, asked of the API server as them
(impersonation: `kubectl --as`, and SelfSubjectAccessReviews).

The visibility API's pending workloads are asked as a SelfSubjectAccessReview: it is the
answer kube-apiserver's authorizer gives before it proxies a request to the APIService."""

from __future__ import annotations

import json
import time

import pytest

from tests.deploy.user_roles import ROOT, USER_ROLES, rbac_md_blocks, shipped_roles
from tests.e2e.conftest import job_manifest, kubectl, measured, wait

pytestmark = pytest.mark.e2e

# Kueue's page binds the group team-a@example.com in team-a, and admin@example.com everywhere.
KUEUE_USER = ("--as=alice@example.com", "--as-group=team-a@example.com")
KUEUE_ADMIN = ("--as=admin@example.com",)
# The same, bound to Tower's names.
TOWER_USER = ("--as=bob@example.com",)
TOWER_ADMIN = ("--as=root@example.com",)
USERS = pytest.mark.parametrize("user", [KUEUE_USER, TOWER_USER], ids=["kueue-name", "tower-name"])
ADMINS = pytest.mark.parametrize(
    "admin", [KUEUE_ADMIN, TOWER_ADMIN], ids=["kueue-name", "tower-name"]
)
CLUSTER_QUEUE = "user-roles-cq"
TOWER_BINDINGS = """
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: user-roles-e2e, namespace: team-a}
subjects: [{kind: User, name: bob@example.com, apiGroup: rbac.authorization.k8s.io}]
roleRef: {kind: ClusterRole, name: tower-batch-user-role, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: user-roles-e2e}
subjects: [{kind: User, name: root@example.com, apiGroup: rbac.authorization.k8s.io}]
roleRef: {kind: ClusterRole, name: tower-batch-admin-role, apiGroup: rbac.authorization.k8s.io}
"""
QUEUES = f"""
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {{name: {CLUSTER_QUEUE}}}
spec: {{namespaceSelector: {{}}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: user-queue, namespace: team-a}}
spec: {{clusterQueue: {CLUSTER_QUEUE}}}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {{name: user-queue, namespace: team-b}}
spec: {{clusterQueue: {CLUSTER_QUEUE}}}
"""


def exists(*what: str) -> bool:
    return "NotFound" not in kubectl("get", *what, check=False)


def aggregated_roles_filled() -> bool:
    """Whether kube-controller-manager has filled in every aggregated role shipped."""
    names = [n for n, r in shipped_roles().items() if r.get("aggregationRule")]
    got = json.loads(kubectl("get", "clusterroles", "-o", "json"))
    rules = {r["metadata"]["name"]: r.get("rules") or [] for r in got["items"]}
    return all(rules.get(n) for n in names)


@pytest.fixture(scope="module")
def cluster():
    had_roles = exists("clusterrole", "tower-batch-user-role")
    made = [ns for ns in ("team-a", "team-b") if not exists("namespace", ns)]
    kubectl("apply", "-f", str(ROOT / "deploy" / "crds"))
    started = time.monotonic()
    kubectl("apply", "-f", str(USER_ROLES))
    wait(aggregated_roles_filled, timeout=60, what="the aggregated roles' rules")
    took = time.monotonic() - started
    measured(f"user roles: applied and every aggregated role filled in {took:.1f} s")
    for ns in made:
        kubectl("create", "namespace", ns)
    for block in rbac_md_blocks():
        kubectl("apply", "-f", "-", input=block)
    kubectl("apply", "-f", "-", input=TOWER_BINDINGS)
    kubectl("apply", "-f", "-", input=QUEUES)
    yield
    kubectl("delete", "--ignore-not-found", "-f", "-", input=QUEUES, check=False)
    kubectl("delete", "--ignore-not-found", "-f", "-", input=TOWER_BINDINGS, check=False)
    for block in rbac_md_blocks():
        kubectl("delete", "--ignore-not-found", "-f", "-", input=block, check=False)
    for ns in made:
        kubectl("delete", "namespace", ns, check=False)
    if not had_roles:
        kubectl("delete", "--ignore-not-found", "-f", str(USER_ROLES), check=False)


def allowed(who: tuple[str, ...], verb: str, group: str, resource: str, **where: str) -> bool:
    """The API server's answer to `who` asking whether they may (a SelfSubjectAccessReview)."""
    resource, _, subresource = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": resource, **where}
    if subresource:
        attributes["subresource"] = subresource
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    out = kubectl(
        "create", "--validate=false", "-o", "json", "-f", "-", *who, input=json.dumps(review)
    )
    return bool(json.loads(out)["status"].get("allowed"))


@USERS
def test_a_batch_user_creates_a_job_in_their_namespace_and_not_in_another(cluster, user):
    job = json.dumps(job_manifest({}, suspend=True))
    assert "created" in kubectl("create", "-n", "team-a", "-f", "-", *user, input=job)
    refused = kubectl("create", "-n", "team-b", "-f", "-", *user, input=job, check=False)
    assert 'cannot create resource "jobs" in API group "batch" in the namespace "team-b"' in (
        refused
    )


@USERS
def test_a_batch_user_sees_their_localqueues_pending_workloads_and_not_another_namespaces(
    cluster, user
):
    pending = ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads")
    for verb in ("get", "list"):
        assert allowed(user, verb, *pending, namespace="team-a", name="user-queue")
        assert not allowed(user, verb, *pending, namespace="team-b", name="user-queue")
    assert not allowed(user, "get", "visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads")
    assert "user-queue" in kubectl("get", "localqueues", "-n", "team-a", *user)
    refused = kubectl("get", "localqueues", "-n", "team-b", *user, check=False)
    assert "Forbidden" in refused


@USERS
def test_a_batch_user_cannot_change_a_cluster_queue(cluster, user):
    for verb in ("update", "patch", "delete"):
        assert not allowed(user, verb, "kueue.x-k8s.io", "clusterqueues", name=CLUSTER_QUEUE)
    patch = '{"metadata":{"labels":{"changed-by":"user"}}}'
    refused = kubectl(
        "patch", "clusterqueue", CLUSTER_QUEUE, "--type=merge", "-p", patch, *user, check=False
    )
    assert "Forbidden" in refused


@ADMINS
def test_a_batch_admin_can(cluster, admin):
    for verb in ("update", "patch"):
        assert allowed(admin, verb, "kueue.x-k8s.io", "clusterqueues", name=CLUSTER_QUEUE)
    assert allowed(admin, "get", "visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads")
    assert allowed(
        admin,
        "get",
        "visibility.kueue.x-k8s.io",
        "localqueues/pendingworkloads",
        namespace="team-b",
    )
    patch = '{"metadata":{"labels":{"changed-by":"admin"}}}'
    out = kubectl("patch", "clusterqueue", CLUSTER_QUEUE, "--type=merge", "-p", patch, *admin)
    assert "patched" in out


def test_kueues_label_finds_one_role_and_the_pages_own_role_is_filled(cluster):
    """`kubectl get clusterroles -l rbac.kueue.x-k8s.io/role=clusterqueue-viewer` (Kueue's
    page) names one role; the page's kueue-queue-readonly has the viewers' rules."""
    found = kubectl(
        "get", "clusterroles", "-l", "rbac.kueue.x-k8s.io/role=clusterqueue-viewer", "-o", "name"
    )
    assert found.split() == ["clusterrole.rbac.authorization.k8s.io/tower-clusterqueue-viewer-role"]
    rules = json.loads(kubectl("get", "clusterrole", "kueue-queue-readonly", "-o", "json"))["rules"]
    resources = {r for rule in rules for r in rule["resources"]}
    assert {"clusterqueues", "localqueues", "workloads"} <= resources

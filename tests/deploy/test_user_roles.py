"""deploy/rbac/user-roles.yaml is Kueue's user-facing ClusterRoles: each role of Kueue v0.19.2
(tests/data/kueue-rbac/) under Tower's name with Kueue's rules and labels, and under Kueue's
name granting, once aggregated, what it granted in a Kueue cluster; the chart ships the same."""

from __future__ import annotations

import pytest

from tests.deploy.helm import template
from tests.deploy.user_roles import (
    ROOT,
    aggregated,
    grants,
    kueue_roles,
    on_unmanaged_kind,
    rbac_md_manifests,
    shipped_roles,
)

KUEUE = kueue_roles()
SHIPPED = shipped_roles()
CHART = ROOT / "deploy" / "helm" / "tower"
PART_OF = {"app.kubernetes.io/part-of": "tower"}


def managed(name: str) -> bool:
    """Whether Tower ships Kueue's role `name`: not when it is on a kind of job Tower has no
    adapter for."""
    role = KUEUE[name]
    return role.get("aggregationRule") is not None or not any(
        on_unmanaged_kind(g) for g in grants(role["rules"])
    )


def without_unmanaged_kinds(granted: set) -> set:
    return {g for g in granted if not on_unmanaged_kind(g)}


@pytest.mark.parametrize("name", sorted(KUEUE))
def test_each_kueue_role_has_its_tower_counterpart_with_its_rules_and_labels(name):
    tower = SHIPPED.get(f"tower-{name}")
    if not managed(name):
        assert tower is None, f"tower-{name}: Tower has no adapter for its kind of job"
        return
    assert tower is not None, f"deploy/rbac/user-roles.yaml has no tower-{name}"
    kueue = KUEUE[name]
    assert grants(tower.get("rules") or ()) == grants(kueue.get("rules") or ())
    assert tower.get("aggregationRule") == kueue.get("aggregationRule")
    assert tower["metadata"]["labels"] == {**PART_OF, **(kueue["metadata"].get("labels") or {})}


@pytest.mark.parametrize("name", sorted(n for n in KUEUE if managed(n)))
def test_kueues_name_grants_what_it_granted_in_a_kueue_cluster(name):
    """A RoleBinding a team wrote for Kueue (`roleRef: kueue-batch-user-role`) allows the same
    once kube-controller-manager has aggregated the roles, less the kinds Tower does not run."""
    want = without_unmanaged_kinds(aggregated(name, KUEUE))
    assert want, f"{name} grants nothing in Kueue"
    assert aggregated(f"kueue-{name}", SHIPPED) == want
    assert aggregated(f"tower-{name}", SHIPPED) == want


def test_the_file_holds_kueues_roles_and_nothing_else():
    want = {f"{prefix}-{n}" for n in KUEUE if managed(n) for prefix in ("tower", "kueue")}
    want.add("tower-dashboard-viewer")  # Tower's own: Kueue has no dashboard
    assert sorted(SHIPPED) == sorted(want)
    assert SHIPPED["tower-dashboard-viewer"]["rules"] == [
        {"nonResourceURLs": ["/dashboard/api/state"], "verbs": ["get"]}
    ]
    assert {r["kind"] for r in SHIPPED.values()} == {"ClusterRole"}
    assert "tower-metrics-reader" in SHIPPED  # the metrics server's docs name it
    assert all(managed(n) for n in KUEUE)  # every kind of Kueue's roles has an adapter


def test_kueues_names_carry_no_kueue_label_so_each_role_is_found_once():
    """Kueue's docs find a role by its label (`kubectl get clusterroles -l
    rbac.kueue.x-k8s.io/role=clusterqueue-viewer`): one answer, Tower's; and the built-in
    admin, edit and view roles take each viewer in once."""
    for name, role in SHIPPED.items():
        if name.startswith("kueue-"):
            assert role["metadata"]["labels"] == PART_OF, name
    found: dict[str, list[str]] = {}
    for name, role in SHIPPED.items():
        value = role["metadata"]["labels"].get("rbac.kueue.x-k8s.io/role")
        if value:
            found.setdefault(value, []).append(name)
    assert found
    assert all(names == [f"tower-{value}-role"] for value, names in found.items()), found


def test_the_rbac_pages_bindings_name_shipped_roles_and_its_custom_role_aggregates():
    """Kueue's "Setup RBAC" page as written: its bindings name kueue-batch-admin-role and
    kueue-batch-user-role; its own ClusterRole (`kueue-queue-readonly`, selecting viewers by
    rbac.kueue.x-k8s.io/role) gets the queue and Workload viewers' rules."""
    manifests = rbac_md_manifests()
    refs = {m["roleRef"]["name"] for m in manifests if "roleRef" in m}
    assert refs == {"kueue-batch-admin-role", "kueue-batch-user-role"}
    assert refs <= set(SHIPPED)
    [custom] = [m for m in manifests if m["kind"] == "ClusterRole"]
    roles = {**SHIPPED, custom["metadata"]["name"]: custom}
    viewers = ("clusterqueue", "localqueue", "workload")
    want = set().union(*(aggregated(f"tower-{v}-viewer-role", SHIPPED) for v in viewers))
    assert ("kueue.x-k8s.io", "workloads", "list") in want
    assert aggregated(custom["metadata"]["name"], roles) == want


def test_the_batch_user_runs_jobs_and_sees_its_queue_but_cannot_change_quota():
    user = aggregated("kueue-batch-user-role", SHIPPED)
    assert ("batch", "jobs", "create") in user
    assert ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "get") in user
    assert ("kueue.x-k8s.io", "localqueues", "list") in user
    assert not {g for g in user if g[1].startswith(("clusterqueues", "resourceflavors"))}
    assert {verb for _, resource, verb in user if resource == "localqueues"} == {
        "get",
        "list",
        "watch",
    }
    admin = aggregated("kueue-batch-admin-role", SHIPPED)
    assert ("kueue.x-k8s.io", "clusterqueues", "patch") in admin
    assert ("visibility.kueue.x-k8s.io", "clusterqueues/pendingworkloads", "get") in admin


def names(objs):
    return {o["metadata"]["name"] for o in objs if o["kind"] == "ClusterRole"}


def test_the_chart_ships_them_unless_switched_off():
    on = template(CHART)
    off = template(CHART, {"userRoles": {"enabled": False}})
    assert set(SHIPPED) <= names(on)
    assert not set(SHIPPED) & names(off)
    rest = [o for o in on if o["metadata"]["name"] not in SHIPPED]
    assert rest == off

"""deploy/rbac/ allows every request the controller makes, and matches Kubernetes' schemas."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from tests.controller.conftest import CONTROLLER_USER, controller_process, eventually
from tests.controller.test_preemption import priority_preemption_setup

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "rbac" / "controller.yaml"


def documents():
    return [d for d in yaml.safe_load_all(RBAC.read_text()) if d]


@pytest.mark.parametrize(
    "document", documents(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}"
)
def test_the_manifests_match_kubernetes_schemas(document):
    kubernetes_validate.validate(document, "1.32.0", strict=True)


def allowed(method: str, path: str) -> tuple[str, str, str, str | None]:
    """(apiGroup, resource[/subresource], verb, namespace) of one request, as RBAC sees it."""
    parts = [p for p in path.split("?")[0].strip("/").split("/") if p]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) == 3 else "")
    named = len(rest) >= 2
    verb = {
        "GET": "get" if named else "list",
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }[method]
    return group, resource, verb, namespace


def permits(rules, group, resource, verb):
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )


def test_every_request_the_controller_made_is_allowed(cluster):
    cluster.apply(*priority_preemption_setup())
    proc = controller_process(
        cluster, "--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.2"
    )
    try:
        cluster.job("low", "4", duration="600s", labels={"kueue.x-k8s.io/priority-class": "low"})
        eventually(lambda: cluster.get("jobs", "low", "default")["spec"]["suspend"] is False)
        cluster.job("high", "4", duration="0.5s", labels={"kueue.x-k8s.io/priority-class": "high"})
        eventually(
            lambda: any(
                c["type"] == "Finished" and c["status"] == "True"
                for w in cluster.api.list("workloads", "default")
                for c in (w.get("status") or {}).get("conditions") or []
            ),
            what="the preemptor to finish",
        )
        eventually(
            lambda: cluster.get("jobs", "low", "default")["spec"]["suspend"] is False,
            what="the preempted job to run again",
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    docs = documents()
    cluster_rules = next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
    lease_rules = next(d for d in docs if d["kind"] == "Role")["rules"]
    made = {
        allowed(method, path)
        for method, path, user in cluster.api.requests
        if user == CONTROLLER_USER
        and path.startswith(("/api/", "/apis/"))
        and len([p for p in path.split("/") if p]) > (2 if path.startswith("/api/") else 3)
    }
    assert ("kueue.x-k8s.io", "workloads/status", "patch", "default") in made
    assert ("batch", "jobs/status", "patch", "default") in made  # startTime cleared on eviction
    assert ("authentication.k8s.io", "selfsubjectreviews", "create", None) in made  # whoami
    refused = [
        request
        for request in made
        if not permits(cluster_rules + BASIC_USER, *request[:3])
        and not (request[3] == "tower-system" and permits(lease_rules, *request[:3]))
    ]
    assert refused == []


# What Kubernetes grants every authenticated user (the system:basic-user ClusterRole).
BASIC_USER = [
    {
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["selfsubjectreviews"],
        "verbs": ["create"],
    },
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
        "verbs": ["create"],
    },
]

"""Kueue's user-facing ClusterRoles and Tower's, read as grants, and aggregated as
kube-controller-manager aggregates them (test code, shared by the deploy and e2e tests)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from extender.core.jobframework import registry
from tests import yamlc

ROOT = Path(__file__).resolve().parents[2]
KUEUE_RBAC = ROOT / "tests" / "data" / "kueue-rbac"
USER_ROLES = ROOT / "deploy" / "rbac" / "user-roles.yaml"

# The groups of Kueue's own objects; any other group a role names is a kind of job's.
KUEUE_GROUPS = frozenset({"kueue.x-k8s.io", "visibility.kueue.x-k8s.io"})

Grant = tuple[str, str, str]  # (apiGroup, resource, verb), or ("", nonResourceURL, verb)


def kueue_roles() -> dict[str, dict[str, Any]]:
    """Kueue's roles by their name in Kueue's files (`batch-user-role`, ...)."""
    roles = (yamlc.safe_load(p.read_text()) for p in sorted(KUEUE_RBAC.glob("*.yaml")))
    return {r["metadata"]["name"]: r for r in roles}


def shipped_roles() -> dict[str, dict[str, Any]]:
    """deploy/rbac/user-roles.yaml's ClusterRoles by name."""
    docs = [d for d in yamlc.safe_load_all(USER_ROLES.read_text()) if d]
    return {d["metadata"]["name"]: d for d in docs}


def job_kinds() -> set[tuple[str, str]]:
    """(group, plural) of every kind of job Tower has an adapter for."""
    kinds = {(a.group, a.plural) for a in registry.ADAPTERS.values()}
    return kinds | {(p.group, p.plural) for p in registry.PARENTS.values()}


def grants(rules: Iterable[Mapping[str, Any]]) -> set[Grant]:
    """Each (group, resource, verb) a list of rules allows, whatever the rules' grouping."""
    out: set[Grant] = set()
    for rule in rules:
        for verb in rule["verbs"]:
            out |= {("", url, verb) for url in rule.get("nonResourceURLs") or ()}
            for group in rule.get("apiGroups") or ():
                out |= {(group, resource, verb) for resource in rule.get("resources") or ()}
    return out


def on_unmanaged_kind(grant: Grant) -> bool:
    """Whether a grant is on a kind of job Tower has no adapter for."""
    group, resource, _ = grant
    if group in KUEUE_GROUPS or resource.startswith("/"):
        return False
    return (group, resource.split("/")[0]) not in job_kinds()


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label selector's answer for these labels (matchLabels and matchExpressions)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or ():
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values") or ()
        found = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not found:
            return False
    return True


def aggregated(name: str, roles: Mapping[str, Mapping[str, Any]]) -> set[Grant]:
    """What a role grants once aggregated: its rules, or the union of the roles its
    aggregationRule selects (itself excepted), themselves aggregated."""
    role = roles[name]
    rule = role.get("aggregationRule")
    if not rule:
        return grants(role.get("rules") or ())
    out: set[Grant] = set()
    for other, obj in roles.items():
        labels = obj["metadata"].get("labels") or {}
        if other != name and any(selects(s, labels) for s in rule["clusterRoleSelectors"]):
            out |= aggregated(other, roles)
    return out


def rbac_md_blocks() -> list[str]:
    """The YAML examples of Kueue's "Setup RBAC" page, as written there."""
    text = (KUEUE_RBAC / "rbac.md").read_text()
    return re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)


def rbac_md_manifests() -> list[dict[str, Any]]:
    return [doc for block in rbac_md_blocks() for doc in yamlc.safe_load_all(block) if doc]

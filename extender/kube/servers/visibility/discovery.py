"""The discovery documents of visibility.kueue.x-k8s.io, as Kueue's generic API server makes
them: what kubectl reads, what kube-aggregator asks to call the APIService available
(GET /apis/GROUP/VERSION answered 200) and to merge the group into the cluster's aggregated
discovery (GET /apis asking for apidiscovery.k8s.io/v2 or v2beta1).

Kueue installs four storages per version: `clusterqueues` and `localqueues`, which answer no
verb, and their `pendingworkloads` subresources, which answer `get` with a
PendingWorkloadsSummary. The generic API server lists them sorted by path, with the
singular names of the two resources and `verbs: []` where there are none.
"""

from __future__ import annotations

from typing import Any

GROUP = "visibility.kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # Kueue's priority order: v1beta2 is preferred
KIND = "PendingWorkloadsSummary"

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList"
AGGREGATED_VERSIONS = ("v2", "v2beta1")

Json = dict[str, Any]

# (resource, singular name, namespaced, verbs), in the generic API server's order.
_RESOURCES: tuple[tuple[str, str, bool, list[str]], ...] = (
    ("clusterqueues", "clusterqueue", False, []),
    ("clusterqueues/pendingworkloads", "", False, ["get"]),
    ("localqueues", "localqueue", True, []),
    ("localqueues/pendingworkloads", "", True, ["get"]),
)


def _group_version(version: str) -> Json:
    return {"groupVersion": f"{GROUP}/{version}", "version": version}


def api_group() -> Json:
    """GET /apis/visibility.kueue.x-k8s.io"""
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": [_group_version(v) for v in VERSIONS],
        "preferredVersion": _group_version(VERSIONS[0]),
    }


def api_group_list() -> Json:
    """GET /apis (the server serves one group)."""
    group = api_group()
    del group["kind"], group["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]}


def api_resource_list(version: str) -> Json:
    """GET /apis/visibility.kueue.x-k8s.io/VERSION"""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{version}",
        "resources": [
            {
                "name": name,
                "singularName": singular,
                "namespaced": namespaced,
                "kind": KIND,
                "verbs": verbs,
            }
            for name, singular, namespaced, verbs in _RESOURCES
        ],
    }


def aggregated(discovery_version: str) -> Json:
    """GET /apis with Accept: application/json;g=apidiscovery.k8s.io;v=V;as=APIGroupDiscoveryList
    (each resource with its subresources, as the generic API server converts its list)."""
    kind = {"group": "", "version": "", "kind": KIND}
    versions = []
    for version in VERSIONS:
        resources: list[Json] = []
        for name, singular, namespaced, verbs in _RESOURCES:
            if "/" in name:
                parent, sub = name.split("/")
                resources[-1]["subresources"] = [
                    {"subresource": sub, "responseKind": kind, "verbs": verbs}
                ]
                assert resources[-1]["resource"] == parent
                continue
            resources.append(
                {
                    "resource": name,
                    "responseKind": kind,
                    "scope": "Namespaced" if namespaced else "Cluster",
                    "singularResource": singular,
                    "verbs": verbs,
                }
            )
        versions.append({"version": version, "resources": resources, "freshness": "Current"})
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": f"apidiscovery.k8s.io/{discovery_version}",
        "metadata": {},
        "items": [{"metadata": {"name": GROUP}, "versions": versions}],
    }


def aggregated_version_asked(accept: str) -> str | None:
    """The aggregated discovery version an Accept header asks for first (None: the plain
    APIGroupList). Media ranges are tried in the client's order, as the API server does."""
    for media_range in accept.split(","):
        kind, *params = (part.strip() for part in media_range.split(";"))
        if kind.lower() not in ("application/json", "*/*"):
            continue
        values = dict(p.split("=", 1) for p in params if "=" in p)
        if values.get("g") != "apidiscovery.k8s.io":
            if kind.lower() == "application/json" and "as" not in values:
                return None  # plain JSON comes first
            continue
        if values.get("as") == "APIGroupDiscoveryList" and values.get("v") in AGGREGATED_VERSIONS:
            return values["v"]
    return None

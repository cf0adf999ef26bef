"""A MultiKueue worker named by a ClusterProfile: its endpoint and credentials, as Kueue reads them.

With Kueue's MultiKueueClusterProfile gate, a MultiKueueCluster may name a ClusterProfile
(the cluster-inventory API, `multicluster.x-k8s.io/v1alpha1`, in the controller's namespace)
instead of a kubeconfig. The profile's status lists access providers, each a cluster
(server, CA, extensions); the Configuration's `multiKueue.clusterProfile.accessProviders`
says, per provider name, which exec credential plugin fetches a token for it. The first
configured provider the profile offers is used (cluster-inventory-api's pkg/access), and the
worker is reached with that cluster and that plugin: a kubeconfig, built here, that the
Kubernetes client runs as it runs any exec plugin. Pure: the controller reads the profile.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from extender.core.jobframework.adapter import as_mapping, as_sequence

GATE = "MultiKueueClusterProfile"
GROUP_RESOURCE = "ClusterProfile.multicluster.x-k8s.io"  # as Kueue's not-found error names it
EXEC_EXTENSION = "client.authentication.k8s.io/exec"  # the plugin's per-cluster config
BAD_PROFILE = "BadClusterProfile"
BAD_REST_CONFIG = "BadRestConfig"
GATE_OFF = "MultiKueueClusterProfileFeatureDisabled"
NO_PROVIDERS = "no access provider configured"

Obj = dict[str, Any]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True, slots=True)
class AccessProvider:
    """One of the Configuration's multiKueue.clusterProfile.accessProviders: a provider's
    name and the exec credential plugin (a kubeconfig `exec` stanza) that serves it."""

    name: str
    exec_config: Mapping[str, Any] = field(default_factory=dict)


def profile_ref(obj: Mapping[str, Any]) -> str | None:
    """The ClusterProfile a MultiKueueCluster names (either version), or None."""
    spec = as_mapping(obj.get("spec"))
    source = as_mapping(spec.get("clusterSource")) or spec
    name = as_mapping(source.get("clusterProfileRef")).get("name")
    return name if isinstance(name, str) and name else None


def not_found(name: str) -> str:
    return f'{GROUP_RESOURCE} "{name}" not found'


def worker_kubeconfig(profile: Mapping[str, Any], providers: Sequence[AccessProvider]) -> Obj | str:
    """The kubeconfig that reaches the worker a ClusterProfile describes, or why there is
    none (Kueue's words, after its "load client config failed: ")."""
    if not providers:
        return NO_PROVIDERS
    name = as_mapping(profile.get("metadata")).get("name") or ""
    status = as_mapping(profile.get("status"))
    offered: dict[str, Mapping[str, Any]] = {}
    # The deprecated credentialProviders first, so that accessProviders win a shared name.
    for key in ("credentialProviders", "accessProviders"):
        for entry in as_sequence(status.get(key)):
            entry = as_mapping(entry)
            if isinstance(entry.get("name"), str):
                offered[entry["name"]] = as_mapping(entry.get("cluster"))
    chosen = next((p for p in providers if p.name in offered), None)
    if chosen is None:
        return f'no matching cluster accessor found for cluster profile "{name}"'
    if not chosen.exec_config.get("command"):
        return f'no exec config found for provider "{chosen.name}"'
    cluster = dict(offered[chosen.name])
    why = _untrusted(cluster)
    if why is not None:
        return why
    user = {
        "exec": {
            **{k: v for k, v in chosen.exec_config.items() if v is not None},
            "interactiveMode": "Never",
        }
    }
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }


def _untrusted(cluster: Mapping[str, Any]) -> str | None:
    """Kueue's checks of a profile's endpoint (its validateRestConfig): a server whose host is
    an IP address or a DNS name; exec plugins are what profiles are for, so they pass."""
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        return "untrusted server endpoint"
    host = (urlsplit(server).hostname or "").lower()
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    if len(host) > 253 or not _DNS_SUBDOMAIN.match(host):
        return "untrusted server endpoint"
    return None

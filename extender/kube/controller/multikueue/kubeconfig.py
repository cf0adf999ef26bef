"""A worker cluster's kubeconfig: read from a Secret, a path or a ClusterProfile, vetted as Kueue
vets it."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import yaml

from extender.core.admission import cluster_profile as profiles
from extender.core.admission import multikueue as policy
from extender.core.jobframework.adapter import as_mapping
from extender.kube.api.client import ApiError, KubeClient
from extender.kube.api.resources import SECRETS, Resource

Obj = dict[str, Any]

CLUSTER_PROFILES = Resource(
    "multicluster.x-k8s.io", "v1alpha1", "clusterprofiles", "ClusterProfile", True
)
# A profile not there yet, or not usable yet, is read again this often: profiles are not
# watched (Kueue watches them; the one read a few seconds late costs nothing else).
PROFILE_RETRY = 5.0


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a worker cannot be reached: the Active condition's reason and message."""

    reason: str
    message: str
    retry: float | None = None  # seconds before it is looked at again (None: on its change)


def worker_config(
    client: KubeClient,
    namespace: str,
    obj: Obj,
    gates: Mapping[str, bool],
    providers: Sequence[profiles.AccessProvider],
) -> tuple[bytes, Obj] | Refusal:
    """A MultiKueueCluster's kubeconfig (its bytes and parsed), from its kubeconfig source
    or, with Kueue's MultiKueueClusterProfile gate, its ClusterProfile; or why not."""
    name = profiles.profile_ref(obj)
    if name is None:
        source = policy.cluster_source(obj)
        if not isinstance(source, policy.KubeConfigSource):
            return Refusal(*source)
        return load_kubeconfig(client, namespace, source)
    if not gates.get(profiles.GATE, False):
        return Refusal(
            profiles.GATE_OFF,
            f"load client config failed: {profiles.GATE} feature gate is disabled",
        )
    try:
        profile = client.get(CLUSTER_PROFILES, name, namespace)
    except ApiError as err:
        missing = err.not_found or err.status == 404  # the profile, or its CRD
        message = profiles.not_found(name) if missing else one_line(err)
        return Refusal(profiles.BAD_PROFILE, f"load client config failed: {message}", PROFILE_RETRY)
    built = profiles.worker_kubeconfig(profile, providers)
    if isinstance(built, str):
        return Refusal(profiles.BAD_PROFILE, f"load client config failed: {built}", PROFILE_RETRY)
    return orjson.dumps(built, option=orjson.OPT_SORT_KEYS), built


def load_kubeconfig(
    client: KubeClient, namespace: str, source: policy.KubeConfigSource
) -> tuple[bytes, Obj] | Refusal:
    """The kubeconfig (its bytes and parsed) or why not, in Kueue's words; a Secret is read
    from `namespace`, Tower's own."""
    if source.location_type == "Secret":
        try:
            secret = client.get(SECRETS, source.location, namespace)
        except ApiError as err:
            if err.not_found:
                return Refusal(
                    "BadKubeConfig",
                    f'load client config failed: secrets "{source.location}" not found '
                    f"in {namespace} (Tower reads workers' kubeconfigs from its own "
                    "namespace)",
                )
            raise
        data = as_mapping(secret.get("data")).get(policy.SECRET_KEY)
        if not isinstance(data, str):
            return Refusal(
                "BadKubeConfig",
                f'load client config failed: key "{policy.SECRET_KEY}" not found in '
                f'secret "{source.location}"',
            )
        try:
            text = base64.b64decode(data)
        except ValueError:
            return Refusal(
                "BadKubeConfig",
                "load client config failed: the secret's data is not base64",
            )
    else:
        try:
            with open(source.location, "rb") as handle:
                text = handle.read()
        except OSError as err:
            return Refusal(
                "BadKubeConfig",
                f"load client config failed: {err.strerror}: {source.location}",
            )
    try:
        parsed = yaml.load(text, Loader=yaml.CSafeLoader)
    except yaml.YAMLError as err:
        return Refusal("BadKubeConfig", f"load client config failed: {one_line(err)}")
    if not isinstance(parsed, dict):
        return Refusal(
            "BadKubeConfig", "load client config failed: not a kubeconfig (a YAML mapping)"
        )
    why = policy.insecure(parsed)
    if why is not None:
        return Refusal("InsecureKubeConfig", f"load client config failed: {why}")
    return text, parsed


def one_line(err: BaseException) -> str:
    """An error as one line: a condition's message, a log line (YAML errors span lines)."""
    return " ".join(str(err).split())

"""A worker cluster's kubeconfig, read from a Secret or a path and vetted as Kueue vets it."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import yaml

from extender.core.admission import multikueue as policy
from extender.core.jobframework.adapter import as_mapping
from extender.kube.api.client import ApiError, KubeClient
from extender.kube.api.resources import SECRETS

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a worker cannot be reached: the Active condition's reason and message."""

    reason: str
    message: str


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

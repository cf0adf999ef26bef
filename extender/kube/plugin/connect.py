"""How `kubectl tower` reaches the cluster: its kubeconfig, its namespace, its requests.

Beyond the controller's client, a user's tool asks for what the controller never does:
field selectors, dry runs, the visibility API's subresources, discovery with singular names.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml
from kubernetes import config as k8s_config
from kubernetes.client import ApiClient

from extender.kube.api.client import (
    MERGE,
    ApiError,
    ConfigError,
    RequestBudget,
    RestClient,
    load_api_client,
)
from extender.kube.api.resources import Resource
from extender.kube.plugin.output import CliError

Obj = dict[str, Any]
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class PluginClient(RestClient):
    """The controller's client, plus what only a user's tool asks for."""

    def list_selected(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page: int = 500,
    ) -> Obj:
        """Every object that matches, read page by page, as one List (items keep no kind)."""
        items: list[Obj] = []
        token: str | None = None
        version = ""
        while True:
            answer = self._request(
                "GET",
                resource,
                resource.path(namespace),
                query={
                    "labelSelector": label_selector or None,
                    "fieldSelector": field_selector or None,
                    "limit": page,
                    "continue": token,
                },
            )
            items.extend(answer.get("items") or [])
            meta = answer.get("metadata") or {}
            version = version or str(meta.get("resourceVersion", ""))
            token = meta.get("continue") or None
            if not token:
                return {
                    "apiVersion": resource.api_version,
                    "kind": f"{resource.kind}List",
                    "metadata": {"resourceVersion": version},
                    "items": [
                        {"apiVersion": resource.api_version, "kind": resource.kind, **item}
                        for item in items
                    ],
                }

    def create_object(
        self, resource: Resource, obj: Obj, namespace: str | None, *, dry_run: bool
    ) -> Obj:
        answer: Obj = self._request(
            "POST",
            resource,
            resource.path(namespace),
            query={"dryRun": "All" if dry_run else None},
            body=obj,
        )
        return answer

    def patch_object(
        self, resource: Resource, name: str, patch: Obj, namespace: str | None, *, dry_run: bool
    ) -> Obj:
        answer: Obj = self._request(
            "PATCH",
            resource,
            resource.path(namespace, name),
            query={"dryRun": "All" if dry_run else None},
            body=patch,
            content_type=MERGE,
        )
        return answer

    def get_subresource(
        self,
        resource: Resource,
        name: str,
        namespace: str | None,
        subresource: str,
        query: dict[str, Any] | None = None,
    ) -> Obj:
        answer: Obj = self._request(
            "GET",
            resource,
            resource.path(namespace, name, subresource),
            query=query,
            subresource=subresource,
        )
        return answer

    def api_resources(self, group_version: str) -> list[Obj] | None:
        """The discovery entries (name, singularName, kind, ...) a group/version serves;
        None when the API server does not serve it."""
        group, _, version = group_version.rpartition("/")
        probe = Resource(group, version, "", "", False)
        try:
            answer = self._request("GET", probe, f"/apis/{group_version}" if group else "/api/v1")
        except ApiError as err:
            if err.status == 404:
                return None
            raise
        return [r for r in answer.get("resources") or [] if isinstance(r, dict)]


@dataclass
class Invocation:
    """One run of the plugin: the client, the namespace it defaults to, the time, and where
    its notes go (`-v`)."""

    client: PluginClient
    namespace: str  # -n, else the kubeconfig context's, else "default"
    namespace_given: bool  # -n was on the command line
    now: float
    verbosity: int = 0
    err: TextIO = field(default_factory=lambda: sys.stderr)

    def note(self, text: str) -> None:
        """A line for `-v` only: which way the answer was computed."""
        if self.verbosity > 0:
            print(f"I: {text}", file=self.err)

    def warn(self, text: str) -> None:
        """A line kueuectl writes to stderr (e.g. "No resources found")."""
        print(text, file=self.err)

    def none_found(self, namespace: str | None, period: bool = False) -> None:
        """kueuectl's line for an empty list (stderr, exit 0); `list pods` ends it with a
        period when it looked in every namespace."""
        if namespace is not None:
            self.warn(f"No resources found in {namespace} namespace.")
        else:
            self.warn("No resources found." if period else "No resources found")

    @property
    def page(self) -> int:
        """Objects per list request: kueuectl's KUEUECTL_LIST_REQUEST_LIMIT, else 100."""
        text = os.environ.get("KUEUECTL_LIST_REQUEST_LIMIT") or "100"
        try:
            return max(int(text), 0)
        except ValueError:
            raise CliError(
                f"KUEUECTL_LIST_REQUEST_LIMIT={text}: invalid list request limit (an integer)"
            ) from None


def kubeconfig_path(flag: str | None) -> str | None:
    """--kubeconfig, else $KUBECONFIG's first file, else ~/.kube/config (None: in-cluster)."""
    if flag:
        return flag
    env = os.environ.get("KUBECONFIG")
    if env:
        return env.split(os.pathsep)[0]
    default = Path.home() / ".kube" / "config"
    return str(default) if default.exists() else None


def connect(kubeconfig: str | None, context: str | None) -> tuple[PluginClient, str]:
    """A client for the kubeconfig's context (or the given one) and that context's
    namespace, as kubectl takes them."""
    api_client = _api_client(kubeconfig, context)
    return PluginClient(api_client, RequestBudget(50, 100)), _namespace(kubeconfig, context)


def _api_client(kubeconfig: str | None, context: str | None) -> ApiClient:
    if not context:
        return load_api_client(kubeconfig)
    if not kubeconfig:
        raise ConfigError("--context needs a kubeconfig (--kubeconfig or $KUBECONFIG)")
    load_api_client(kubeconfig)  # the same checks and one-line errors for the file itself
    try:
        client: ApiClient = k8s_config.new_client_from_config(
            config_file=kubeconfig, context=context
        )
    except Exception as err:  # any failure here is in the configuration the user gave
        reason = " ".join(str(err).split())
        raise ConfigError(f"cannot load the Kubernetes configuration: {reason}") from None
    return client


def _namespace(kubeconfig: str | None, context: str | None) -> str:
    if kubeconfig is None:
        try:
            return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
        except OSError:
            return "default"
    try:
        with open(kubeconfig, encoding="utf-8") as handle:
            content = yaml.safe_load(handle) or {}
    except (OSError, yaml.YAMLError):
        return "default"
    wanted = context or content.get("current-context")
    for entry in content.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == wanted:
            return str((entry.get("context") or {}).get("namespace") or "default")
    return "default"


Runner = Callable[[Invocation, Any], str]

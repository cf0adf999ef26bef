"""A thin JSON client over the `kubernetes` package's ApiClient, with client-go's request budget.

The typed APIs of the `kubernetes` package turn every answer into model objects, which costs
more CPU than the whole scheduling cycle; the controller works on plain dicts, so this client
uses the package's configuration, authentication, TLS and connection pool and decodes JSON
itself. Every request passes a token bucket like client-go's (`--kube-api-qps`,
`--kube-api-burst`), and every write is counted.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from extender.kube.resources import Resource

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"

Obj = dict[str, Any]


class ConfigError(ValueError):
    """The Kubernetes configuration could not be loaded; the message is one line."""


def load_api_client(kubeconfig: str | None) -> k8s.ApiClient:
    """A client from a kubeconfig file, or the in-cluster configuration without one."""
    try:
        if kubeconfig:
            # The library fails on a file that is YAML but not a mapping with a TypeError
            # that names nothing; say what the file is not.
            with open(kubeconfig, encoding="utf-8") as handle:
                content = yaml.safe_load(handle)
            if not isinstance(content, dict):
                raise ValueError(
                    f"{kubeconfig} is not a kubeconfig (a YAML mapping of clusters, users "
                    "and contexts)"
                )
            api_client: k8s.ApiClient = k8s_config.new_client_from_config(config_file=kubeconfig)
            return api_client
        k8s_config.load_incluster_config()
        return k8s.ApiClient()
    except Exception as err:  # any failure here is in the configuration the user gave
        reason = " ".join(str(err).split())  # YAML errors span lines
        raise ConfigError(f"cannot load the Kubernetes configuration: {reason}") from None


class ApiError(Exception):
    """A request the API server refused, with its Status."""

    def __init__(self, status: int, reason: str, message: str, body: Any = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body

    @property
    def conflict(self) -> bool:
        return self.status == 409 and self.reason == "Conflict"

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def gone(self) -> bool:
        return self.status == 410


class RequestBudget:
    """client-go's token bucket: `qps` requests a second on average, bursts up to `burst`."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("the request budget needs qps > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()
        self._lock = threading.Lock()
        self.writes: Counter[tuple[str, str]] = Counter()
        self.reads: Counter[tuple[str, str]] = Counter()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now

    def acquire(self) -> None:
        """Take one token, waiting for it if the bucket is empty."""
        with self._lock:
            self._refill()
            self._tokens -= 1
            wait = -self._tokens / self.qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._sleep(wait)

    def give_back(self) -> None:
        """Return a token taken for a request that turned out not to be needed."""
        with self._lock:
            self._refill()
            self._tokens = min(float(self.burst), self._tokens + 1)

    def spare(self, keep: float) -> bool:
        """Take a token only if more than `keep` would remain: for writes that can wait."""
        with self._lock:
            self._refill()
            if self._tokens - 1 < keep:
                return False
            self._tokens -= 1
            return True

    def count(self, method: str, resource: Resource, subresource: str = "") -> None:
        what = resource.plural + (f"/{subresource}" if subresource else "")
        if method in ("GET", "HEAD"):
            self.reads[(method, what)] += 1
        else:
            self.writes[(method, what)] += 1

    @property
    def total_writes(self) -> int:
        return sum(self.writes.values())


def _decode(data: bytes) -> Any:
    return orjson.loads(data) if data else None


class KubeClient:
    """JSON in, JSON out; errors raise ApiError with the server's Status message."""

    def __init__(
        self, api_client: k8s.ApiClient, budget: RequestBudget, *, timeout: float = 30.0
    ) -> None:
        self.api_client = api_client
        self.budget = budget
        self.timeout = timeout

    def _request(
        self,
        method: str,
        resource: Resource,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        subresource: str = "",
        stream: bool = False,
        timeout: float | tuple[float, float] | None = None,
        pace: bool = True,
    ) -> Any:
        if pace:
            self.budget.acquire()
        self.budget.count(method, resource, subresource)
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        elif body is not None:
            headers["Content-Type"] = "application/json"
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        method, url, headers, _, _ = self.api_client.param_serialize(
            method, path, query_params=params, header_params=headers, auth_settings=["BearerToken"]
        )
        response = self.api_client.rest_client.request(
            method,
            url,
            headers=headers,
            body=body,  # the REST layer encodes JSON bodies itself
            _request_timeout=timeout if timeout is not None else self.timeout,
        )
        if stream and 200 <= response.status < 300:
            return response.response
        data = response.read()
        if not 200 <= response.status < 300:
            try:
                status = _decode(data)
            except orjson.JSONDecodeError:
                status = None
            if isinstance(status, dict) and status.get("kind") == "Status":
                raise ApiError(
                    response.status,
                    str(status.get("reason", "")),
                    str(status.get("message", "")),
                    status,
                )
            text = data.decode("utf-8", "replace").strip()
            raise ApiError(response.status, str(response.reason or ""), text)
        return _decode(data)

    # ----- reads ------------------------------------------------------------------------

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        result: Obj = self._request("GET", resource, resource.path(namespace, name))
        return result

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        page: int = 500,
    ) -> tuple[list[Obj], str]:
        """Every object (paged), and the list's resourceVersion to watch from."""
        items: list[Obj] = []
        token: str | None = None
        while True:
            answer = self._request(
                "GET",
                resource,
                resource.path(namespace),
                query={"labelSelector": label_selector, "limit": page, "continue": token},
            )
            items.extend(answer.get("items") or [])
            meta = answer.get("metadata") or {}
            token = meta.get("continue") or None
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    def watch(
        self, resource: Resource, resource_version: str, *, timeout_seconds: int = 300
    ) -> Iterator[tuple[str, Obj]]:
        """Watch events (type, object) from `resource_version`, bookmarks included.

        An expired resourceVersion arrives as an ERROR event inside an HTTP 200 stream (as
        kube-apiserver sends it); the caller re-lists.
        """
        response = self._request(
            "GET",
            resource,
            resource.path(),
            query={
                "watch": "true",
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": timeout_seconds,
            },
            stream=True,
            timeout=(10.0, timeout_seconds + 30.0),
        )
        try:
            for line in response:
                line = line.strip()
                if line:
                    event = orjson.loads(line)
                    yield str(event.get("type")), event.get("object") or {}
        finally:
            response.release_conn()

    def discover(self, group_version: str) -> bool:
        """Whether the API server serves a group/version (e.g. JobSet's CRD is installed)."""
        probe = Resource(group_version.split("/")[0], group_version.split("/")[1], "", "", False)
        try:
            self._request("GET", probe, f"/apis/{group_version}")
        except ApiError as err:
            if err.status == 404:
                return False
            raise
        return True

    # ----- writes -----------------------------------------------------------------------

    def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        result: Obj = self._request("POST", resource, resource.path(namespace), body=obj)
        return result

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        content_type: str = MERGE,
        subresource: str = "",
        paced: bool = True,
    ) -> Obj:
        """`paced=False` when the caller already took a token (RequestBudget.spare)."""
        result: Obj = self._request(
            "PATCH",
            resource,
            resource.path(namespace, name, subresource),
            body=patch,
            content_type=content_type,
            subresource=subresource,
            pace=paced,
        )
        return result

    def update(self, resource: Resource, obj: Obj, *, subresource: str = "") -> Obj:
        meta = obj["metadata"]
        result: Obj = self._request(
            "PUT",
            resource,
            resource.path(meta.get("namespace"), meta["name"], subresource),
            body=obj,
            subresource=subresource,
        )
        return result

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
    ) -> Obj:
        result: Obj = self._request(
            "DELETE",
            resource,
            resource.path(namespace, name),
            body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation},
        )
        return result

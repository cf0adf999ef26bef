"""The Kubernetes API as the controller sees it: the `KubeClient` protocol, its one real
implementation, the request budget, and what a failed request means.

The typed APIs of the `kubernetes` package turn every answer into model objects, which costs
more CPU than the whole scheduling cycle; the controller works on plain dicts, so
`RestClient` uses the package's configuration, authentication, TLS and connection pool and
decodes JSON itself. Every request passes a token bucket like client-go's
(`--kube-api-qps`, `--kube-api-burst`), and every write is counted.

A request fails in one of two ways, and callers treat them differently:
- `ApiError`: the server answered with an error Status (404, 409, 422, 429, 5xx, ...);
- `TransportError`: no answer came (connection refused or reset, a timeout, a TLS error).
Both say whether retrying may help (`retriable`) and, for writes, whether the server may have
committed the write although the caller saw a failure (`ambiguous`): such a write is settled
by re-reading or by repeating it conditionally, never by assuming it did not happen.
A write refused by the fence (this replica no longer leads) raises `NotLeaderError`; it was
never sent, and it is not a KubeError, so no retry can swallow it.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import orjson
import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from extender.kube.api.resources import Resource

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"

POOL_SIZE = 32
Obj = dict[str, Any]
ErrorObserver = Callable[[str, str], None]
"""Told (verb, code) of every failed request: code is the HTTP status or a transport kind."""


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


# ----- failures ----------------------------------------------------------------------------


class KubeError(Exception):
    """A request that did not succeed."""

    retriable = False
    ambiguous = False
    retry_after: float | None = None

    @property
    def code(self) -> str:
        """What metrics and logs call this failure: an HTTP status, or a transport kind."""
        return "error"


class ApiError(KubeError):
    """A request the API server refused, with its Status."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        body: Any = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.retry_after = retry_after

    @property
    def code(self) -> str:
        return str(self.status)

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
    def forbidden(self) -> bool:
        return self.status == 403

    @property
    def gone(self) -> bool:
        return self.status == 410

    @property
    def namespace_terminating(self) -> bool:
        """A create refused because its namespace is being deleted (NamespaceLifecycle): no
        retry can succeed, and the namespace's deletion takes the object's owner with it."""
        details = self.body.get("details") if isinstance(self.body, dict) else None
        causes = details.get("causes") if isinstance(details, dict) else None
        return self.status == 403 and any(
            isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes or ()
        )

    @property
    def retriable(self) -> bool:  # type: ignore[override]
        # 429 (priority and fairness) and 503 (shutting down, etcd unavailable) say "later";
        # 500, 502 and 504 may be a write that timed out inside the server.
        return self.status in (429, 500, 502, 503, 504)

    @property
    def ambiguous(self) -> bool:  # type: ignore[override]
        # kube-apiserver answers 500 or 504 when etcd did not confirm in time, and a proxy
        # 502 when the answer was lost: the write may have been committed all the same.
        return self.status in (500, 502, 504)


class TransportError(KubeError):
    """No answer: the connection was refused, reset or timed out, or TLS failed.

    `sent` is False only when the request certainly never reached the server (it could not
    connect); a write that failed after it was sent is ambiguous.
    """

    retriable = True

    def __init__(self, kind: str, detail: str, *, sent: bool) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.sent = sent

    @property
    def code(self) -> str:
        return self.kind

    @property
    def ambiguous(self) -> bool:  # type: ignore[override]
        return self.sent


class NotLeaderError(Exception):
    """A write refused before it was sent: this replica's lease may have passed to another.

    Not a KubeError on purpose: nothing that handles a failed request may swallow it; it
    ends the term as leader wherever it is raised."""


def _transport_error(err: BaseException) -> TransportError:
    """Classify what urllib3 raised: could the request have reached the server?"""
    reason: BaseException = err
    if isinstance(err, urllib3.exceptions.MaxRetryError) and err.reason is not None:
        reason = err.reason
    text = " ".join(str(reason).split())[:300]
    # NewConnectionError is a ConnectTimeoutError in urllib3's hierarchy: test it first.
    if isinstance(reason, urllib3.exceptions.NewConnectionError | ConnectionRefusedError):
        return TransportError("connection-refused", text, sent=False)
    if isinstance(reason, urllib3.exceptions.ConnectTimeoutError):
        return TransportError("connect-timeout", text, sent=False)
    if isinstance(reason, urllib3.exceptions.SSLError):
        return TransportError("tls", text, sent=False)
    if isinstance(reason, urllib3.exceptions.ReadTimeoutError | TimeoutError):
        return TransportError("timeout", text, sent=True)
    return TransportError("connection-reset", text, sent=True)


def retry_after(headers: Any) -> float | None:
    """The Retry-After header in seconds (kube-apiserver sends whole seconds)."""
    value = headers.get("Retry-After") if headers is not None else None
    try:
        seconds = float(str(value))
    except (TypeError, ValueError):
        return None
    return seconds if seconds >= 0 else None


# ----- the budget --------------------------------------------------------------------------


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
        # Told, under the lock, the moment the bucket lets each request go (a waiting one:
        # when its wait ends), as the bucket reckons it rather than when a thread wakes.
        self.released: Callable[[float], None] | None = None

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
            if self.released is not None:
                self.released(self._last + wait)
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
            if self.released is not None:
                self.released(self._last)
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


# ----- the protocol and its implementation -------------------------------------------------


class KubeClient(Protocol):
    """What the controller asks of the API server; `RestClient` is the real one, tests
    use recording fakes."""

    budget: RequestBudget

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj: ...

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        page: int = 500,
        transform: Callable[[Obj], Any] | None = None,
    ) -> tuple[list[Any], str]: ...

    def watch(
        self,
        resource: Resource,
        resource_version: str,
        *,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> Iterator[tuple[str, Obj]]: ...

    def discover(self, group_version: str) -> bool: ...

    def served(self, group_version: str) -> frozenset[str] | None: ...

    def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj: ...

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
    ) -> Obj: ...

    def update(self, resource: Resource, obj: Obj, *, subresource: str = "") -> Obj: ...

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        propagation: str = "Background",
        grace_period_seconds: int | None = None,
    ) -> Obj: ...


def _decode(data: bytes) -> Any:
    return orjson.loads(data) if data else None


class RestClient:
    """JSON in, JSON out over the `kubernetes` package's ApiClient.

    `timeout` bounds every request but watches (seconds, connect and read alike). `fence`
    is called right before a write is sent and raises NotLeaderError when this replica must not
    write; reads are never fenced. urllib3 retries nothing: the caller knows whether a
    failed write may have been committed, urllib3 does not.
    """

    def __init__(
        self,
        api_client: k8s.ApiClient,
        budget: RequestBudget,
        *,
        timeout: float = 30.0,
        fence: Callable[[], None] | None = None,
        on_error: ErrorObserver | None = None,
        watch_idle: float = 90.0,
    ) -> None:
        self.api_client = api_client
        self.budget = budget
        self.timeout = timeout
        self.fence = fence
        self.on_error = on_error
        self.watch_idle = watch_idle
        self._pool = api_client.rest_client.pool_manager
        # One connection per watch (about ten) plus requests: the default (5 per core) would
        # discard connections and pay a new TLS handshake for each.
        kw = self._pool.connection_pool_kw
        kw["maxsize"] = max(int(kw.get("maxsize") or 1), POOL_SIZE)

    def with_budget(
        self, budget: RequestBudget, *, timeout: float | None = None, fenced: bool = True
    ) -> RestClient:
        """The same connection settings on another budget (events, the lease)."""
        return RestClient(
            self.api_client,
            budget,
            timeout=self.timeout if timeout is None else timeout,
            fence=self.fence if fenced else None,
            on_error=self.on_error,
            watch_idle=self.watch_idle,
        )

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
        timeout: urllib3.Timeout | None = None,
        pace: bool = True,
    ) -> Any:
        if pace:
            self.budget.acquire()
        write = method not in ("GET", "HEAD")
        if write and self.fence is not None:
            self.fence()  # after the wait for a token: leadership may have ended meanwhile
        self.budget.count(method, resource, subresource)
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type or "application/json"
        params = [(k, v) for k, v in (query or {}).items() if v is not None]
        method, url, headers, _, _ = self.api_client.param_serialize(
            method, path, query_params=params, header_params=headers, auth_settings=["BearerToken"]
        )
        try:
            response = self._pool.request(
                method,
                url,
                body=orjson.dumps(body) if body is not None else None,
                headers=headers,
                timeout=timeout or urllib3.Timeout(connect=self.timeout, read=self.timeout),
                preload_content=False,
                retries=False,
            )
            if stream and 200 <= response.status < 300:
                return response
            data = response.read()
            response.release_conn()
        except (urllib3.exceptions.HTTPError, OSError) as err:
            failure = _transport_error(err)
            self._observe(method, failure)
            raise failure from None
        if not 200 <= response.status < 300:
            error = _api_error(response.status, str(response.reason or ""), data, response.headers)
            self._observe(method, error)
            raise error
        return _decode(data)

    def _observe(self, method: str, error: KubeError) -> None:
        if self.on_error is not None:
            self.on_error(method, error.code)

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
        transform: Callable[[Obj], Any] | None = None,
    ) -> tuple[list[Any], str]:
        """Every object (paged, each page transformed before the next is read), and the
        list's resourceVersion to watch from."""
        items: list[Any] = []
        token: str | None = None
        # Every page is served from the first page's snapshot, at its resourceVersion; the
        # watch starts there. A later page's version, were a server to give a newer one,
        # would skip what changed between the pages before the page being read.
        version: str | None = None
        while True:
            answer = self._request(
                "GET",
                resource,
                resource.path(namespace),
                query={"labelSelector": label_selector, "limit": page, "continue": token},
            )
            got = answer.get("items") or []
            items.extend(map(transform, got) if transform is not None else got)
            meta = answer.get("metadata") or {}
            if version is None:
                version = str(meta.get("resourceVersion", ""))
            token = meta.get("continue") or None
            if not token:
                return items, version

    def watch(
        self,
        resource: Resource,
        resource_version: str,
        *,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> Iterator[tuple[str, Obj]]:
        """Watch events (type, object) from `resource_version`, bookmarks included.

        An expired resourceVersion arrives as an ERROR event inside an HTTP 200 stream (as
        kube-apiserver sends it); the caller re-lists. A stream silent for `watch_idle`
        seconds (bookmarks come every minute) is taken as a dead connection.
        """
        response = self._request(
            "GET",
            resource,
            resource.path(),
            query={
                "watch": "true",
                "resourceVersion": resource_version,
                "labelSelector": label_selector,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": timeout_seconds,
            },
            stream=True,
            timeout=urllib3.Timeout(connect=self.timeout, read=self.watch_idle),
        )
        try:
            for line in response:
                line = line.strip()
                if line:
                    event = orjson.loads(line)
                    yield str(event.get("type")), event.get("object") or {}
        except (urllib3.exceptions.HTTPError, OSError) as err:
            error = _transport_error(err)
            self._observe("WATCH", error)
            raise error from None
        finally:
            response.release_conn()

    def discover(self, group_version: str) -> bool:
        """Whether the API server serves a group/version (e.g. JobSet's CRD is installed)."""
        return self.served(group_version) is not None

    def served(self, group_version: str) -> frozenset[str] | None:
        """The resources (plurals) a group/version serves; None when it serves none."""
        group, _, version = group_version.rpartition("/")
        probe = Resource(group, version, "", "", False)
        path = f"/apis/{group_version}" if group else f"/api/{version}"  # the core group
        try:
            answer = self._request("GET", probe, path)
        except ApiError as err:
            if err.status == 404:
                return None
            raise
        return frozenset(
            str(r.get("name")).split("/")[0]
            for r in (answer.get("resources") or [])
            if isinstance(r, dict)
        )

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
        grace_period_seconds: int | None = None,  # None: the object's own (a pod's spec)
    ) -> Obj:
        options: Obj = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": propagation,
        }
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        result: Obj = self._request(
            "DELETE", resource, resource.path(namespace, name), body=options
        )
        return result


def _api_error(status: int, reason: str, data: bytes, headers: Any) -> ApiError:
    try:
        body = _decode(data)
    except orjson.JSONDecodeError:
        body = None
    after = retry_after(headers)
    if isinstance(body, dict) and body.get("kind") == "Status":
        return ApiError(
            status,
            str(body.get("reason", "")),
            str(body.get("message", "")),
            body,
            retry_after=after,
        )
    text = data.decode("utf-8", "replace").strip()
    return ApiError(status, reason, text, retry_after=after)

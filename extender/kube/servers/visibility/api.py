"""The visibility API's answers, request in, response out: PendingWorkloadsSummary pages,
discovery, and Kueue's errors, as Kueue's generic API server words them.

GET /apis/visibility.kueue.x-k8s.io/{v1beta1,v1beta2}/clusterqueues/NAME/pendingworkloads
GET .../namespaces/NS/localqueues/NAME/pendingworkloads
with `limit` (default 1000; 0 means the default, as Kueue defaults it after decoding; below
0 nothing; at most 100,000) and `offset` (default 0; below 0 is 0). A value that is not a
base-10 int64 is a 400 BadRequest with Go's strconv message; an unknown queue is a 404
NotFound Status naming `clusterqueue.visibility.kueue.x-k8s.io` or `localqueue...`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs

import orjson

from extender.core.api.models import Workload
from extender.core.scheduling.visibility import PendingPositions, PendingWorkload
from extender.kube.servers.visibility import discovery

log = logging.getLogger("tower.visibility")

JSON = "application/json"
DEFAULT_LIMIT = 1000  # Kueue's constants.DefaultPendingWorkloadsLimit
MAX_LIMIT = 100_000  # Kueue's constants.MaxPendingWorkloadsLimit
_INT64 = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.ParseInt(s, 10, 64) reads
_INT64_RANGE = range(-(2**63), 2**63)
_GO_ESCAPES = {"\a": r"\a", "\b": r"\b", "\f": r"\f", "\n": r"\n", "\r": r"\r", "\t": r"\t",
               "\v": r"\v", '"': r"\"", "\\": r"\\"}  # fmt: skip
_CACHE = (("Cache-Control", "no-cache, private"),)

Positions = Callable[[], PendingPositions | None]
"""Where answers come from now (None: this replica cannot answer yet)."""
Metadata = Callable[[str], Mapping[str, Any] | None]
"""A Workload's object by namespace/name (the watch cache), for its metadata."""


@dataclass(frozen=True, slots=True)
class VisibilityRequest:
    """An authenticated, authorized request, as the front door hands it on."""

    method: str
    path: str
    query: Mapping[str, Sequence[str]] = field(default_factory=dict)
    user: str = ""
    accept: str = JSON

    @staticmethod
    def of(method: str, target: str, *, user: str = "", accept: str = JSON) -> VisibilityRequest:
        """From a request target (path?query), the query read as Go's url.Query() reads it."""
        path, _, query = target.partition("?")
        return VisibilityRequest(
            method, path, parse_qs(query, keep_blank_values=True), user, accept
        )


@dataclass(frozen=True, slots=True)
class VisibilityResponse:
    """Status, body and content type; the headers to add."""

    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = _CACHE


def _status(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> VisibilityResponse:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                            "status": "Failure", "message": message, "reason": reason}  # fmt: skip
    if details is not None:
        body["details"] = dict(details)
    body["code"] = code
    return VisibilityResponse(code, orjson.dumps(body) + b"\n")


PAGE_NOT_FOUND = VisibilityResponse(404, b"404 page not found\n", "text/plain; charset=utf-8", ())
RESOURCE_NOT_FOUND = _status(
    404, "NotFound", "the server could not find the requested resource", {}
)
METHOD_NOT_ALLOWED = _status(
    405,
    "MethodNotAllowed",
    "the server does not allow this method on the requested resource",
    {"causes": [{"reason": "UnexpectedServerResponse", "message": "405: Method Not Allowed"}]},
)
NOT_READY = _status(
    503, "ServiceUnavailable", "the controller is still building its queues; try again shortly"
)


class ParameterError(ValueError):
    """A query parameter Go's strconv would not read; the message is strconv's."""


def go_quote(text: str) -> str:
    """Go's strconv.Quote, which strconv's errors quote their input with."""
    out = []
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def parse_int64(text: str) -> int:
    """strconv.ParseInt(text, 10, 64), with its error message."""
    if not _INT64.fullmatch(text):
        raise ParameterError(f"strconv.ParseInt: parsing {go_quote(text)}: invalid syntax")
    value = int(text)
    if value not in _INT64_RANGE:
        raise ParameterError(f"strconv.ParseInt: parsing {go_quote(text)}: value out of range")
    return value


def limit_and_offset(query: Mapping[str, Sequence[str]]) -> tuple[int, int]:
    """PendingWorkloadOptions decoded, defaulted and bounded as Kueue's server does: the first
    value of each; limit 0 (or absent) is 1000, at most 100,000, never below 0; offset never
    below 0."""
    values = [query.get(name) or () for name in ("offset", "limit")]
    offset, limit = (parse_int64(v[0]) if v else 0 for v in values)
    if limit == 0:
        limit = DEFAULT_LIMIT
    return min(max(limit, 0), MAX_LIMIT), max(offset, 0)


def _resource(parts: list[str]) -> str:
    """The resource a path asks about, for the answer's metrics (few values)."""
    for resource in ("clusterqueues", "localqueues"):
        if resource in parts[3:6]:
            return resource
    return "discovery"


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class VisibilityApi:
    """`handle(request) -> response` for every path the visibility API server serves."""

    def __init__(
        self,
        positions: Positions,
        metadata: Metadata,
        *,
        observe: Callable[[str, int, float], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.positions = positions
        self.metadata = metadata
        self.observe = observe  # (resource, code, seconds) of every answer, for metrics
        self.clock = clock
        self._lists = {v: orjson.dumps(discovery.api_resource_list(v)) for v in discovery.VERSIONS}
        self._group = orjson.dumps(discovery.api_group())
        self._groups = orjson.dumps(discovery.api_group_list())
        self._aggregated = {
            v: orjson.dumps(discovery.aggregated(v)) for v in discovery.AGGREGATED_VERSIONS
        }

    def handle(self, request: VisibilityRequest) -> VisibilityResponse:
        """The answer to one request (never an exception: a failure is a 500 Status)."""
        started = self.clock()
        parts = [p for p in request.path.split("/") if p]
        try:
            response = self._route(request, parts)
        except Exception:  # a bug answers 500 and is logged, never a traceback to the caller
            log.exception("visibility: %s %s failed", request.method, request.path)
            response = _status(500, "InternalError", "an error on the server prevented the answer")
        if self.observe is not None:
            self.observe(_resource(parts), response.status, self.clock() - started)
        return response

    def _route(self, request: VisibilityRequest, parts: list[str]) -> VisibilityResponse:
        if not parts or parts[0] != "apis" or (len(parts) > 1 and parts[1] != discovery.GROUP):
            return PAGE_NOT_FOUND
        if len(parts) > 2 and parts[2] not in discovery.VERSIONS:
            return PAGE_NOT_FOUND
        if request.method != "GET":
            return METHOD_NOT_ALLOWED
        if len(parts) == 1:
            asked = discovery.aggregated_version_asked(request.accept)
            if asked is not None:
                kind = discovery.AGGREGATED.format(version=asked)
                return VisibilityResponse(
                    200, self._aggregated[asked], kind, (*_CACHE, ("Vary", "Accept"))
                )
            return VisibilityResponse(200, self._groups)
        if len(parts) == 2:
            return VisibilityResponse(200, self._group)
        version = parts[2]
        if len(parts) == 3:
            return VisibilityResponse(200, self._lists[version])
        match parts[3:]:
            case ["clusterqueues", name, "pendingworkloads"]:
                return self._pending(request, version, "clusterqueue", "", name)
            case ["namespaces", namespace, "localqueues", name, "pendingworkloads"]:
                return self._pending(request, version, "localqueue", namespace, name)
        return RESOURCE_NOT_FOUND

    def _pending(
        self, request: VisibilityRequest, version: str, kind: str, namespace: str, name: str
    ) -> VisibilityResponse:
        try:
            limit, offset = limit_and_offset(request.query)
        except ParameterError as err:
            return _status(400, "BadRequest", str(err))
        positions = self.positions()
        if positions is None:
            return NOT_READY
        if kind == "clusterqueue":
            page = positions.cluster_queue(name, offset, limit)
        else:
            page = positions.local_queue(namespace, name, offset, limit)
        if page is None:
            return _status(
                404,
                "NotFound",
                f'{kind}.{discovery.GROUP} "{name}" not found',
                {"name": name, "group": discovery.GROUP, "kind": kind},
            )
        return VisibilityResponse(200, self.summary(version, page))

    def summary(self, version: str, page: list[PendingWorkload]) -> bytes:
        """A PendingWorkloadsSummary, its fields in Kueue's order."""
        return orjson.dumps(
            {
                "kind": discovery.KIND,
                "apiVersion": f"{discovery.GROUP}/{version}",
                "metadata": {},
                "items": [self._item(p) for p in page],
            }
        )

    def _item(self, pending: PendingWorkload) -> dict[str, Any]:
        workload = pending.workload
        return {
            "metadata": self._metadata(workload),
            "priority": workload.priority,
            "localQueueName": workload.queue_name,
            "positionInClusterQueue": pending.position_in_cluster_queue,
            "positionInLocalQueue": pending.position_in_local_queue,
        }

    def _metadata(self, workload: Workload) -> dict[str, Any]:
        """Name, namespace, creation time and owners, as Kueue copies them from the Workload
        (each owner's apiVersion, kind, name and uid only)."""
        obj = self.metadata(workload.key)
        meta = obj.get("metadata") if obj is not None else None
        out: dict[str, Any] = {"name": workload.name, "namespace": workload.namespace}
        if not isinstance(meta, dict):  # gone from the cache meanwhile: what the core knows
            if workload.creation_time:
                out["creationTimestamp"] = _timestamp(workload.creation_time)
            return out
        if meta.get("creationTimestamp"):
            out["creationTimestamp"] = meta["creationTimestamp"]
        owners = [  # spelled out: a comprehension per owner costs a third of a page's time
            {
                "apiVersion": ref.get("apiVersion", ""),
                "kind": ref.get("kind", ""),
                "name": ref.get("name", ""),
                "uid": ref.get("uid", ""),
            }
            for ref in meta.get("ownerReferences") or ()
            if isinstance(ref, dict)
        ]
        if owners:
            out["ownerReferences"] = owners
        return out

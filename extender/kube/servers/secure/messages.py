"""What the HTTPS server hands its handlers, and what they answer: requests, responses, Status."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from extender.kube.servers.secure.attributes import Attributes
from extender.kube.servers.secure.identity import User

JSON = "application/json"


@dataclass(frozen=True)
class Request:
    """An authenticated, authorized request: who, what (resolved), the path and the query."""

    method: str
    path: str
    query: Mapping[str, tuple[str, ...]]
    user: User
    attributes: Attributes
    headers: tuple[tuple[str, str], ...] = ()  # without the credentials and proxy headers
    body: bytes = b""

    def param(self, name: str, default: str | None = None) -> str | None:
        """The first value of a query parameter."""
        values = self.query.get(name)
        return values[0] if values else default

    def header(self, name: str, default: str = "") -> str:
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), default)


@dataclass(frozen=True)
class Response:
    """What a handler answers: status, body and its content type."""

    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def json(obj: Any, status: int = 200) -> Response:
        return Response(status, orjson.dumps(obj))

    @staticmethod
    def failure(
        code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
    ) -> Response:
        """A Kubernetes Status, as kube-apiserver words and orders it."""
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
        }
        if details is not None:
            status["details"] = dict(details)
        status["code"] = code
        headers = (("X-Content-Type-Options", "nosniff"),) if code in (401, 403) else ()
        return Response(code, orjson.dumps(status) + b"\n", JSON, headers)


Handler = Callable[[Request], Response]

UNAUTHORIZED = Response.failure(401, "Unauthorized", "Unauthorized")
NOT_FOUND = Response(404, b"404 page not found\n", "text/plain; charset=utf-8")


def forbidden(user: User, attributes: Attributes, reason: str = "") -> Response:
    return Response.failure(
        403,
        "Forbidden",
        attributes.forbidden_message(user.name, reason),
        attributes.forbidden_details(),
    )


def internal_error(message: str) -> Response:
    return Response.failure(500, "InternalError", message)

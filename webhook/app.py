"""The webhook's HTTP layer: decode, call the pure function, echo the uid, encode."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson
from flask import Flask, Response, request

from extender.core.jobframework import registry
from extender.core.jobframework.adapter import JobAdapter
from extender.core.jobframework.parent import TemplateParent
from webhook import metrics
from webhook.convert import convert
from webhook.mutate import mutate, mutate_parent
from webhook.reviews import ReviewError, allow, request_of, review
from webhook.routes import QueueRoutes
from webhook.settings import Settings
from webhook.validate import KUEUE_PARSERS, validate_job, validate_kueue, validate_parent

log = logging.getLogger("tower.webhook")

Handler = Callable[[Mapping[str, Any]], Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
DRAIN_LIMIT_FACTOR = 4
JSON = "application/json"


def admission_routes(settings: Settings) -> dict[str, Handler]:
    """Path → pure function over the AdmissionReview request (Kueue's webhook paths): a
    mutating and a validating path for every kind of job the registry knows, then Kueue's
    own objects. A kind whose integration is not enabled is answered with a plain allow, as
    Kueue's no-op webhooks do, so a configuration that still names it never blocks it."""
    routes: dict[str, Handler] = {}
    queues = QueueRoutes(settings.kubeconfig) if settings.kubeconfig else None
    # The enabled adapter of each integration (pods only of the kinds that queue them, when
    # `pod` itself is not named: Kueue's implicit pod integration).
    active = {a.framework: a for a in registry.enabled(settings.integrations)}
    for adapter in registry.ADAPTERS.values():
        on = active.get(adapter.framework)
        for verb in ("mutate", "validate"):
            path = registry.webhook_path(adapter, verb)
            routes[path] = _job_handler(verb, on, settings, queues) if on is not None else _allow
    for parent in registry.PARENTS.values():
        enabled = parent in registry.enabled_parents(settings.integrations)
        mutate_path = registry.webhook_path(parent, "mutate")
        validate_path = registry.webhook_path(parent, "validate")
        routes[mutate_path] = _parent_handler("mutate", parent, settings) if enabled else _allow
        routes[validate_path] = _parent_handler("validate", parent, settings) if enabled else _allow
    for kind in KUEUE_PARSERS:
        path = f"/validate-kueue-x-k8s-io-v1beta2-{kind.lower()}"
        routes[path] = _kueue_validator(kind, settings.feature_gates)
    return routes


def _job_handler(
    verb: str, adapter: JobAdapter, settings: Settings, queues: QueueRoutes | None
) -> Handler:
    # The functions are looked up when called (a test replaces them to make one fail).
    if verb == "mutate":
        return lambda request: mutate(request, settings, adapter, queues)
    return lambda request: validate_job(request, adapter)


def _parent_handler(verb: str, parent: TemplateParent, settings: Settings) -> Handler:
    if verb == "mutate":
        return lambda request: mutate_parent(request, settings, parent)
    return lambda request: validate_parent(request, parent)


def _allow(request: Mapping[str, Any]) -> Any:
    return allow(str(request["uid"]))


def _kueue_validator(kind: str, gates: Mapping[str, bool]) -> Handler:
    def handler(request: Mapping[str, Any]) -> Any:
        return validate_kueue(request, kind, gates)

    return handler


def _outcome(response: Mapping[str, Any]) -> str:
    if not response.get("allowed"):
        return "denied"
    return "patched" if response.get("patch") else "allowed"


class Answerer:
    """Turns a request body into the answer for one path, and counts it."""

    def __init__(self, routes: Mapping[str, Handler]) -> None:
        self.routes = routes

    def finish(self, path: str, status: int, started: float, outcome: str) -> None:
        """Count one answer and its latency."""
        metrics.TALLY.record(path, str(status), outcome, time.perf_counter() - started)

    def respond(self, path: str, body: bytes, started: float) -> tuple[int, bytes, str]:
        """(HTTP status, payload, content type) for a POSTed JSON body."""
        if path == "/convert":
            try:
                payload = orjson.dumps(convert(_decode(body)))
            except ReviewError as err:
                log.info("rejected /convert: %s", err)
                return self.plain(path, 400, str(err), started)
            self.finish(path, 200, started, "converted")
            return 200, payload, JSON
        try:
            req = request_of(_decode(body))
        except ReviewError as err:
            log.info("rejected %s: %s", path, err)
            return self.plain(path, 400, str(err), started)
        try:
            response = self.routes[path](req)
        except Exception:  # a bug of ours must not block the user's request
            log.exception("webhook %s failed on request %s; allowing it", path, req.get("uid"))
            response = allow(
                str(req["uid"]),
                warnings=[
                    "Tower's webhook could not process this request; its controller "
                    "will queue the object instead"
                ],
            )
        self.finish(path, 200, started, _outcome(response))
        return 200, orjson.dumps(review(response)), JSON

    def plain(self, path: str, status: int, text: str, started: float) -> tuple[int, bytes, str]:
        """A one-line text answer (a refusal), counted."""
        self.finish(path, status, started, "rejected")
        return status, (text + "\n").encode(), "text/plain; charset=utf-8"


def _text(status: int, line: str) -> Response:
    """A one-line plain-text answer."""
    return Response(line + "\n", status=status, mimetype="text/plain")


def _decode(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise ReviewError(f"body is not JSON: {err}") from None


class FastAdmission:
    """WSGI middleware answering well-formed admission POSTs without Flask's request machinery.

    kube-apiserver calls these paths for every queued Job; Flask's routing and request
    context alone cost more than the whole budget of the webhook (see README), so this
    path calls the very same Answerer directly. Anything unusual (another method or
    Content-Type, no or too large Content-Length) goes to Flask, which answers it.
    """

    def __init__(self, flask_wsgi: WSGIApp, answerer: Answerer, max_body: int) -> None:
        self.flask_wsgi = flask_wsgi
        self.answerer = answerer
        self.max_body = max_body
        self.paths = frozenset(answerer.routes) | {"/convert"}

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """The WSGI entry point."""
        path = environ.get("PATH_INFO", "")
        length = environ.get("CONTENT_LENGTH")
        if (
            path not in self.paths
            or environ.get("REQUEST_METHOD") != "POST"
            or not length
            or environ.get("CONTENT_TYPE", "").split(";", 1)[0].strip() != JSON
        ):
            return self.flask_wsgi(environ, start_response)
        try:
            size = int(length)
        except ValueError:
            return self.flask_wsgi(environ, start_response)
        if size > self.max_body or size < 0:
            return self.flask_wsgi(environ, start_response)
        started = time.perf_counter()
        body = environ["wsgi.input"].read(size)
        status, payload, content_type = self.answerer.respond(path, body, started)
        start_response(
            "200 OK" if status == 200 else "400 BAD REQUEST",
            [("Content-Type", content_type), ("Content-Length", str(len(payload)))],
        )
        return [payload]


def create_app(settings: Settings) -> Flask:
    """The Flask application (with its admission fast path); dependencies via `settings`."""
    app = Flask("tower-webhook")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    answerer = Answerer(admission_routes(settings))

    def drain(length: int) -> None:
        # Read and drop a too-large body (up to a cap) so the client can read our answer
        # instead of failing mid-send on a closed connection.
        if length > DRAIN_LIMIT_FACTOR * settings.max_body_bytes:
            return
        stream = request.environ["wsgi.input"]
        left = length
        while left > 0:
            chunk = stream.read(min(left, 1 << 16))
            if not chunk:
                break
            left -= len(chunk)

    def refuse(path: str, text: str, started: float) -> Response:
        log.info("rejected %s: %s", path, text)
        status, payload, content_type = answerer.plain(path, 400, text, started)
        return Response(payload, status=status, content_type=content_type)

    def view(path: str) -> Response:
        started = time.perf_counter()
        if request.method != "POST":
            return refuse(
                path, f"method {request.method} is not allowed: webhooks are POSTed", started
            )
        if request.mimetype != JSON:
            return refuse(
                path, f"Content-Type must be application/json, got {request.mimetype!r}", started
            )
        length = request.content_length
        if length is not None and length > settings.max_body_bytes:
            drain(length)
            return refuse(
                path, f"body of {length} bytes is over the {settings.max_body_bytes} limit", started
            )
        body = request.get_data(cache=False)
        if len(body) > settings.max_body_bytes:
            return refuse(path, f"body is over the {settings.max_body_bytes} byte limit", started)
        status, payload, content_type = answerer.respond(path, body, started)
        return Response(payload, status=status, content_type=content_type)

    methods = ["POST", "GET", "PUT", "DELETE", "PATCH"]
    for path in [*answerer.routes, "/convert"]:
        app.add_url_rule(
            path, endpoint=path, methods=methods, view_func=lambda path=path: view(path)
        )

    @app.route("/healthz")
    @app.route("/readyz")
    def health() -> Response:
        return _text(200, "ok")

    @app.route("/metrics")
    def metrics_view() -> Response:
        data, content_type = metrics.render()
        return Response(data, content_type=content_type)

    @app.errorhandler(413)
    def too_large(_: Exception) -> Response:
        return _text(400, f"body is over the {settings.max_body_bytes} byte limit")

    @app.errorhandler(404)
    def not_found(_: Exception) -> Response:
        return _text(404, f"no webhook at {request.path}")

    @app.errorhandler(405)
    def wrong_method(_: Exception) -> Response:
        return _text(400, f"method {request.method} is not allowed on {request.path}")

    app.wsgi_app = FastAdmission(app.wsgi_app, answerer, settings.max_body_bytes)  # type: ignore[method-assign]
    return app

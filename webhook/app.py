"""The webhook's HTTP layer: decode, call the pure function, echo the uid, encode."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask, Response, request

from webhook import metrics
from webhook.convert import convert
from webhook.mutate import JOB, JOBSET, mutate
from webhook.reviews import ReviewError, allow, request_of, review
from webhook.settings import Settings
from webhook.validate import KUEUE_PARSERS, validate_job, validate_kueue

log = logging.getLogger("tower.webhook")

Handler = Callable[[Mapping[str, Any]], Any]
DRAIN_LIMIT_FACTOR = 4


def admission_routes(settings: Settings) -> dict[str, Handler]:
    """Path → pure function over the AdmissionReview request (Kueue's webhook paths)."""
    routes: dict[str, Handler] = {
        "/mutate-batch-v1-job": lambda r: mutate(r, settings, JOB),
        "/validate-batch-v1-job": lambda r: validate_job(r, JOB),
        "/mutate-jobset-x-k8s-io-v1alpha2-jobset": lambda r: mutate(r, settings, JOBSET),
        "/validate-jobset-x-k8s-io-v1alpha2-jobset": lambda r: validate_job(r, JOBSET),
    }
    for kind in KUEUE_PARSERS:
        routes[f"/validate-kueue-x-k8s-io-v1beta2-{kind.lower()}"] = _kueue_validator(kind)
    return routes


def _kueue_validator(kind: str) -> Handler:
    def handler(request: Mapping[str, Any]) -> Any:
        return validate_kueue(request, kind)

    return handler


def _plain(status: int, text: str) -> Response:
    return Response(text + "\n", status=status, mimetype="text/plain")


def _outcome(response: Mapping[str, Any]) -> str:
    if not response.get("allowed"):
        return "denied"
    return "patched" if response.get("patch") else "allowed"


def create_app(settings: Settings) -> Flask:
    """The Flask application; every dependency comes in through `settings`."""
    app = Flask("tower-webhook")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes
    routes = admission_routes(settings)

    def read_json() -> Any:
        if request.method != "POST":
            raise ReviewError(f"method {request.method} is not allowed: webhooks are POSTed")
        if request.mimetype != "application/json":
            raise ReviewError(f"Content-Type must be application/json, got {request.mimetype!r}")
        length = request.content_length
        if length is not None and length > settings.max_body_bytes:
            _drain(length)
            raise ReviewError(f"body of {length} bytes is over the {settings.max_body_bytes} limit")
        body = request.get_data(cache=False)
        if len(body) > settings.max_body_bytes:
            raise ReviewError(f"body is over the {settings.max_body_bytes} byte limit")
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError) as err:
            raise ReviewError(f"body is not JSON: {err}") from None

    def _drain(length: int) -> None:
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

    def answer(path: str, handler: Handler) -> Response:
        started = time.perf_counter()
        try:
            req = request_of(read_json())
        except ReviewError as err:
            log.info("rejected %s: %s", path, err)
            return _finish(path, _plain(400, str(err)), started)
        try:
            response = handler(req)
        except Exception:  # a bug of ours must not block the user's request
            log.exception("webhook %s failed on request %s; allowing it", path, req.get("uid"))
            response = allow(
                str(req["uid"]),
                warnings=[
                    "Tower's webhook could not process this request; its controller "
                    "will queue the object instead"
                ],
            )
        metrics.DECISIONS.labels(path, _outcome(response)).inc()
        body = json.dumps(review(response), separators=(",", ":"))
        return _finish(path, Response(body, mimetype="application/json"), started)

    def _finish(path: str, response: Response, started: float) -> Response:
        metrics.REQUESTS.labels(path, str(response.status_code)).inc()
        metrics.LATENCY.labels(path).observe(time.perf_counter() - started)
        return response

    for path, handler in routes.items():
        app.add_url_rule(
            path,
            endpoint=path,
            methods=["POST", "GET", "PUT", "DELETE", "PATCH"],
            view_func=lambda path=path, handler=handler: answer(path, handler),
        )

    @app.route("/convert", methods=["POST", "GET", "PUT", "DELETE", "PATCH"])
    def convert_view() -> Response:
        started = time.perf_counter()
        try:
            result = convert(read_json())
        except ReviewError as err:
            log.info("rejected /convert: %s", err)
            return _finish("/convert", _plain(400, str(err)), started)
        body = json.dumps(result, separators=(",", ":"))
        return _finish("/convert", Response(body, mimetype="application/json"), started)

    @app.route("/healthz")
    @app.route("/readyz")
    def health() -> Response:
        return _plain(200, "ok")

    @app.route("/metrics")
    def metrics_view() -> Response:
        data, content_type = metrics.render()
        return Response(data, content_type=content_type)

    @app.errorhandler(413)
    def too_large(_: Exception) -> Response:
        return _plain(400, f"body is over the {settings.max_body_bytes} byte limit")

    @app.errorhandler(404)
    def not_found(_: Exception) -> Response:
        return _plain(404, f"no webhook at {request.path}")

    @app.errorhandler(405)
    def wrong_method(_: Exception) -> Response:
        return _plain(400, f"method {request.method} is not allowed on {request.path}")

    return app

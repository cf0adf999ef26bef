"""The HTTPS server: TLS (a client certificate optional), then authentication, then
authorization, then the handler of the longest path prefix that matches.

Refusals are Kubernetes Status objects worded as kube-apiserver words them: 401 Unauthorized
without an identity, 403 naming the user and what was refused, 404 `404 page not found` past
both. Each connection is wrapped in TLS in its own thread, with the CAs trusted at that
moment, so a slow handshake never stalls the others and a rotated CA counts at once.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from extender.kube.servers.secure.attributes import resolve
from extender.kube.servers.secure.certificate import (
    CertificateError,
    ServingCertificate,
    server_context,
)
from extender.kube.servers.secure.delegated import AuthError, DelegatedAuth
from extender.kube.servers.secure.identity import ANONYMOUS
from extender.kube.servers.secure.messages import (
    NOT_FOUND,
    UNAUTHORIZED,
    Handler,
    Request,
    Response,
    forbidden,
    internal_error,
)
from extender.kube.servers.secure.trust import REFRESH

log = logging.getLogger("tower.secure")

MAX_BODY = 3 << 20  # kube-apiserver's limit on a request body
HANDSHAKE_TIMEOUT = 10.0
IDLE_TIMEOUT = 90.0  # a kept-alive connection left unused this long is closed


class SecureServer:
    """Authenticated HTTPS on HOST:PORT; `routes` maps path prefixes to handlers, `public`
    exact paths served to anyone (a page with no data, whose data is behind a route)."""

    def __init__(
        self,
        address: str,
        auth: DelegatedAuth,
        routes: Mapping[str, Handler],
        *,
        certificate: ServingCertificate,
        public: Mapping[str, Handler] | None = None,
        name: str = "https",
    ) -> None:
        self.address = address
        self.auth = auth
        self.routes = dict(routes)
        self.public = dict(public or {})
        self.certificate = certificate
        self.name = name
        self._context: tuple[str, ssl.SSLContext] | None = None
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.context()  # a certificate that does not load fails here, at start

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def context(self) -> ssl.SSLContext:
        """The TLS context for a new connection: rebuilt when the trusted CAs changed."""
        bundle = self.auth.ca_bundle()
        with self._lock:
            if self._context is None or self._context[0] != bundle:
                self._context = (bundle, server_context(self.certificate, bundle))
            return self._context[1]

    def reload_certificate(self) -> bool:
        """Serve the certificate directory's new files, if they changed (True if so)."""
        fresh = self.certificate.changed()
        if fresh is None:
            return False
        bundle = self.auth.ca_bundle()
        context = server_context(fresh, bundle)
        with self._lock:
            self.certificate = fresh
            self._context = (bundle, context)
        log.info("serving the certificate of %s again: its files changed", fresh.source)
        return True

    def mount(self, prefix: str, handler: Handler, *, public: bool = False) -> None:
        """Serve `prefix` (a public one: that exact path, to anyone) from now on."""
        (self.public if public else self.routes)[prefix] = handler

    def keep_current(self, stop: threading.Event, interval: float = REFRESH) -> None:
        """Read the cluster's trust and the certificate directory again every `interval`
        seconds until `stop` (a thread's target)."""
        while not stop.wait(interval):
            self.auth.trust.refresh()
            try:
                self.reload_certificate()
            except CertificateError as err:
                log.warning("%s; serving the certificate loaded before", err)

    def start(self) -> SecureServer:
        """Listen (OSError when the address cannot be had) and serve in background threads."""
        host, _, port = self.address.rpartition(":")
        self._server = _TlsServer((host or "0.0.0.0", int(port)), _handler(self), self)
        threading.Thread(target=self._server.serve_forever, daemon=True, name=self.name).start()
        return self

    def shutdown(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # ----- one request ------------------------------------------------------------------

    def answer(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        peer_certificate: bytes | None,
        body: bytes,
    ) -> Response:
        parts = urlsplit(target)
        path = parts.path or "/"
        query = {k: tuple(v) for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        attributes = resolve(method, path, query)
        public = self.public.get(path)
        if public is not None:
            return public(Request(method, path, query, ANONYMOUS, attributes))
        user = self.auth.authenticate(peer_certificate, headers)
        if user is None:
            return UNAUTHORIZED
        try:
            decision = self.auth.authorize(user, attributes)
        except AuthError as err:
            return internal_error(str(err))
        if not decision.allowed:
            return forbidden(user, attributes, decision.reason)
        handler = self._route(path)
        if handler is None:
            return NOT_FOUND
        request = Request(method, path, query, user, attributes, self._passed_on(headers), body)
        try:
            return handler(request)
        except Exception as err:
            log.exception("%s %s failed", method, path)
            return internal_error(f"{method} {path}: {type(err).__name__}: {err}")

    def _route(self, path: str) -> Handler | None:
        matching = [
            prefix
            for prefix in self.routes
            if path in (prefix, prefix.rstrip("/")) or path.startswith(prefix.rstrip("/") + "/")
        ]
        return self.routes[max(matching, key=len)] if matching else None

    def _passed_on(self, headers: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
        """The headers a handler sees: not the credentials, not the front proxy's."""
        trust = self.auth.trust.current
        hidden = {"authorization"} | {
            h.lower() for h in (*trust.username_headers, *trust.uid_headers, *trust.group_headers)
        }
        prefixes = tuple(p.lower() for p in trust.extra_prefixes)
        return tuple(
            (k, v)
            for k, v in headers
            if k.lower() not in hidden and not (prefixes and k.lower().startswith(prefixes))
        )


class _TlsServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any, owner: SecureServer) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # In the connection's own thread: the handshake of one client never holds up another.
        request.settimeout(HANDSHAKE_TIMEOUT)
        try:
            tls = self.owner.context().wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as err:
            log.debug("TLS handshake with %s failed: %s", client_address[0], err)
            return
        try:
            handler: Any = self.RequestHandlerClass
            handler(tls, client_address, self)
        finally:
            with contextlib.suppress(OSError):
                tls.shutdown(socket.SHUT_RDWR)
            tls.close()


def _handler(server: SecureServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True
        timeout = IDLE_TIMEOUT

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_GET(self) -> None:
            self._serve("GET")

        def do_HEAD(self) -> None:
            self._serve("HEAD")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def _serve(self, method: str) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                self.close_connection = True
                self._send(
                    method,
                    Response.failure(
                        413, "RequestEntityTooLarge", "request body: a Content-Length up to 3 MiB"
                    ),
                )
                return
            body = self.rfile.read(length) if length else b""
            connection: Any = self.connection
            peer = connection.getpeercert(binary_form=True)
            response = server.answer(method, self.path, list(self.headers.items()), peer, body)
            self._send(method, response)

        def _send(self, method: str, response: Response) -> None:
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            self.send_header("Cache-Control", "no-cache, private")
            for key, value in response.headers:
                self.send_header(key, value)
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(response.body)

    return Handler

"""An SSLContext that follows its certificate files, so a rotated certificate is served at once."""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
from collections.abc import Callable

log = logging.getLogger("tower.webhook.tls")


def server_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """A server-side context: TLS 1.2 or newer, the given certificate chain and key."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certfile=certfile, keyfile=keyfile)
    return context


class ReloadingContext:
    """Hands out one SSLContext per certificate version, rebuilt when the files change.

    gunicorn asks for a context for every new connection; open connections keep the
    context they were made with, so a rotation drops nothing. Files are checked at most
    once per `interval` seconds. A half-written rotation (new certificate, old key) fails
    to load and the previous context stays in use until the pair matches again.
    """

    def __init__(
        self,
        certfile: str,
        keyfile: str,
        *,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.certfile, self.keyfile = certfile, keyfile
        self._interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._next_check = 0.0
        self._stamp: tuple[int, ...] | None = None
        self._context: ssl.SSLContext | None = None
        self.loads = 0

    def _files_stamp(self) -> tuple[int, ...]:
        cert, key = os.stat(self.certfile), os.stat(self.keyfile)
        return (
            cert.st_mtime_ns,
            cert.st_size,
            cert.st_ino,
            key.st_mtime_ns,
            key.st_size,
            key.st_ino,
        )

    def context(self) -> ssl.SSLContext:
        """The context for a new connection."""
        now = self._clock()
        if self._context is not None and now < self._next_check:
            return self._context
        with self._lock:
            if self._context is not None and now < self._next_check:
                return self._context
            self._next_check = now + self._interval
            try:
                stamp = self._files_stamp()
                if stamp != self._stamp or self._context is None:
                    self._context = server_context(self.certfile, self.keyfile)
                    self._stamp = stamp
                    self.loads += 1
                    if self.loads > 1:
                        log.info("serving the rotated certificate from %s", self.certfile)
            except (OSError, ssl.SSLError) as err:
                if self._context is None:
                    raise
                log.warning(
                    "keeping the current certificate: cannot load %s: %s", self.certfile, err
                )
            return self._context

"""The HTTPS server's certificate: a given tls.crt/tls.key, or a self-signed one made at start.

As controller-runtime's metrics server: without a certificate directory it makes its own in
memory (a CA and a certificate for localhost, 127.0.0.1 and the pod's hostname), which a
scraper that skips verification (Kueue's ServiceMonitor does) accepts. A given directory is
re-read when its files change, so a certificate rotated by cert-manager is served without a
restart.
"""

from __future__ import annotations

import os
import socket
import ssl
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from certs import pki

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"


class CertificateError(ValueError):
    """A certificate the server cannot serve with; the message is one line."""


@dataclass(frozen=True)
class ServingCertificate:
    """PEM bytes of the certificate (with its chain) and its key, and where they came from."""

    cert: bytes
    key: bytes
    source: str  # the directory, or "self-signed"
    stamp: tuple[float, float] = (0.0, 0.0)  # the files' modification times

    @staticmethod
    def self_signed(now: datetime, names: tuple[str, ...] = ()) -> ServingCertificate:
        """A new CA and a certificate for localhost, 127.0.0.1, this host and `names`."""
        host = socket.gethostname()
        dns = ["localhost", *([host] if host and host != "localhost" else []), *names]
        bundle = pki.generate(dns, ["127.0.0.1"], now=now)
        return ServingCertificate(bundle.cert + bundle.ca_cert, bundle.key, "self-signed")

    @staticmethod
    def from_dir(directory: str) -> ServingCertificate:
        """tls.crt and tls.key of `directory`, or CertificateError naming the file."""
        files = [Path(directory, CERT_FILE), Path(directory, KEY_FILE)]
        try:
            stamp = (files[0].stat().st_mtime, files[1].stat().st_mtime)
            cert, key = files[0].read_bytes(), files[1].read_bytes()
        except OSError as err:
            raise CertificateError(f"{err.filename}: {err.strerror or err}") from None
        return ServingCertificate(cert, key, directory, stamp)

    def changed(self) -> ServingCertificate | None:
        """The directory's certificate when its files changed since read, else None."""
        if self.source == "self-signed":
            return None
        try:
            again = ServingCertificate.from_dir(self.source)
        except CertificateError:
            return None  # mid-rotation: keep serving the one loaded
        return again if again.stamp != self.stamp else None


def server_context(certificate: ServingCertificate, client_cas: str) -> ssl.SSLContext:
    """A TLS 1.2+ server context with this certificate; a client certificate is asked for
    and verified when `client_cas` (PEM) names CAs, and optional all the same."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # ssl loads a certificate and key only from files: written for the call, private to
    # this process, and gone right after ($TMPDIR must be writable, an emptyDir in a pod).
    with tempfile.TemporaryDirectory(prefix="tower-tls-") as scratch:
        cert_path, key_path = os.path.join(scratch, CERT_FILE), os.path.join(scratch, KEY_FILE)
        for path, data in ((cert_path, certificate.cert), (key_path, certificate.key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        try:
            context.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as err:
            raise CertificateError(
                f"{certificate.source}: the certificate and key do not load ({err.reason or err})"
            ) from None
    if client_cas:
        context.load_verify_locations(cadata=client_cas)
        context.verify_mode = ssl.CERT_OPTIONAL
    else:
        context.verify_mode = ssl.CERT_NONE
    return context

"""The certificates the cluster vouches for: kube-system/extension-apiserver-authentication.

kube-apiserver publishes there the CA of its front proxy (the aggregator's client
certificate), the names that certificate may carry, the headers it names the user in, and
the CA of ordinary client certificates. An aggregated API server trusts exactly that; so
does Tower's HTTPS server, which reads it again every minute (a rotated CA counts).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from extender.kube.api.client import ApiError, KubeClient, KubeError
from extender.kube.api.resources import Resource

log = logging.getLogger("tower.secure")

CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
NAMESPACE = "kube-system"
NAME = "extension-apiserver-authentication"
WHERE = f"{NAMESPACE}/{NAME}"
REFRESH = 60.0  # seconds between reads of the ConfigMap


class TrustError(ValueError):
    """The ConfigMap holds something unusable; the message names the key."""


@dataclass(frozen=True)
class ProxyTrust:
    """Whom to believe: the front proxy (its CA, names and headers) and client certificates."""

    proxy_cas: tuple[x509.Certificate, ...] = ()
    allowed_names: tuple[str, ...] = ()  # empty: any name the proxy CA signed
    username_headers: tuple[str, ...] = ()
    uid_headers: tuple[str, ...] = ()
    group_headers: tuple[str, ...] = ()
    extra_prefixes: tuple[str, ...] = ()
    client_cas: tuple[x509.Certificate, ...] = ()

    @property
    def ca_bundle(self) -> str:
        """Every CA a client certificate may come from, PEM, for the TLS handshake."""
        return "".join(
            ca.public_bytes(serialization.Encoding.PEM).decode()
            for ca in (*self.proxy_cas, *self.client_cas)
        )

    def from_proxy(self, certificate: x509.Certificate) -> bool:
        """Whether the front proxy's CA issued it, with a name it may carry."""
        if not _issued_by(certificate, self.proxy_cas):
            return False
        if not self.allowed_names:
            return True
        names = certificate.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
        return any(n.value in self.allowed_names for n in names)

    def from_client_ca(self, certificate: x509.Certificate) -> bool:
        return _issued_by(certificate, self.client_cas)


NO_TRUST = ProxyTrust()


def _issued_by(certificate: x509.Certificate, cas: tuple[x509.Certificate, ...]) -> bool:
    # The TLS handshake verified the chain, its dates and its purpose against every CA
    # together; this only tells which CA it was. A chain through an intermediate is not
    # attributed (Python's ssl module does not hand over the verified chain).
    for ca in cas:
        try:
            certificate.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return True
    return False


def parse(data: Mapping[str, Any]) -> ProxyTrust:
    """The ConfigMap's data as kube-apiserver writes it, or TrustError naming the key."""
    return ProxyTrust(
        proxy_cas=_cas(data, "requestheader-client-ca-file"),
        allowed_names=_names(data, "requestheader-allowed-names"),
        username_headers=_names(data, "requestheader-username-headers"),
        uid_headers=_names(data, "requestheader-uid-headers"),
        group_headers=_names(data, "requestheader-group-headers"),
        extra_prefixes=_names(data, "requestheader-extra-headers-prefix"),
        client_cas=_cas(data, "client-ca-file"),
    )


def _cas(data: Mapping[str, Any], key: str) -> tuple[x509.Certificate, ...]:
    pem = data.get(key)
    if not pem:
        return ()
    try:
        return tuple(x509.load_pem_x509_certificates(str(pem).encode()))
    except ValueError:
        raise TrustError(f"{WHERE}: data.{key}: not PEM certificates") from None


def _names(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    raw = data.get(key)
    if not raw:
        return ()
    try:
        names = json.loads(raw)
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise TrustError(f"{WHERE}: data.{key}: not a JSON list of strings")
    return tuple(n.strip() for n in names if n.strip())


class TrustSource:
    """The current ProxyTrust, read from the API server (none until read, or when it cannot
    be read: bearer tokens then still work)."""

    def __init__(self, client: KubeClient | None, *, interval: float = REFRESH) -> None:
        self.client = client
        self.interval = interval
        self.current = NO_TRUST
        self._problem = ""

    def refresh(self) -> ProxyTrust:
        """Read the ConfigMap once; keep the last good trust when it holds something bad."""
        if self.client is None:
            return self.current
        try:
            obj = self.client.get(CONFIGMAPS, NAME, NAMESPACE)
            trust = parse(obj.get("data") or {})
        except TrustError as err:
            self._say(f"{err}; keeping what was read before")
            return self.current
        except ApiError as err:
            if err.not_found:  # a cluster whose API server names no client CA at all
                if self._problem != "absent":
                    log.info("no %s: bearer tokens only, no client certificates", WHERE)
                self._problem, self.current = "absent", NO_TRUST
                return self.current
            if err.forbidden:
                self.current = NO_TRUST
            self._say(
                f"cannot read {WHERE} ({err.code}): front-proxy and client certificates are "
                "not trusted, bearer tokens still are"
                + (
                    " (the controller's RoleBinding to extension-apiserver-authentication-reader "
                    "in kube-system gives it)"
                    if err.forbidden
                    else ""
                )
            )
            return self.current
        except KubeError as err:
            self._say(f"cannot read {WHERE} ({err.code}); trying again in a minute")
            return self.current
        if self._problem:
            log.info("read %s again: front-proxy and client certificates trusted", WHERE)
        self._problem = ""
        self.current = trust
        return trust

    def _say(self, problem: str) -> None:
        if problem != self._problem:
            log.warning("%s", problem)
        self._problem = problem

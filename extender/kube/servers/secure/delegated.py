"""Authentication and authorization delegated to the API server, as aggregated servers do it.

A request's identity comes, in this order, from the front proxy's client certificate and its
X-Remote-User/-Group/-Extra- headers (the proxy's CA and names from trust.py), from a client
certificate the cluster's client CA issued (its CN and O), or from a bearer token
(TokenReview); headers without the proxy's certificate count for nothing. Then a
SubjectAccessReview decides; the group system:masters is allowed without asking.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from urllib.parse import unquote

from cryptography import x509

from extender.kube.api.client import KubeClient, KubeError
from extender.kube.servers.secure.attributes import Attributes
from extender.kube.servers.secure.identity import ANONYMOUS, MASTERS, User
from extender.kube.servers.secure.reviews import AccessReviewer, Decision, TokenReviewer
from extender.kube.servers.secure.trust import ProxyTrust, TrustSource

log = logging.getLogger("tower.secure")

Headers = Sequence[tuple[str, str]]  # every header line, in order (a name may repeat)
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
SAY_AGAIN_AFTER = 60.0  # seconds before the same failure to review is logged again


class AuthError(Exception):
    """The API server could not answer a review; the message is one line."""


class DelegatedAuth:
    """Who a request comes from, and whether they may do what it asks."""

    def __init__(
        self,
        client: KubeClient,
        trust: TrustSource,
        *,
        clock: Callable[[], float],
        anonymous: bool = False,
        always_allow_groups: tuple[str, ...] = (MASTERS,),
    ) -> None:
        self.trust = trust
        self.clock = clock
        self.anonymous = anonymous
        self.always_allow_groups = frozenset(always_allow_groups)
        self.tokens = TokenReviewer(client, clock)
        self.access = AccessReviewer(client, clock)
        self._said: dict[str, float] = {}
        self._lock = threading.Lock()

    def ca_bundle(self) -> str:
        """The CAs a client certificate may come from, for the TLS handshake (PEM)."""
        return self.trust.current.ca_bundle

    # ----- authentication ----------------------------------------------------------------

    def authenticate(self, peer_certificate: bytes | None, headers: Headers) -> User | None:
        """The request's user, or None (401): no identity, or none the cluster vouches for.
        `peer_certificate` is the client's certificate (DER) as the TLS handshake verified it
        against ca_bundle(), if it sent one."""
        trust = self.trust.current
        certificate = _load(peer_certificate)
        if certificate is not None:
            if trust.from_proxy(certificate):
                user = _proxied_user(trust, headers)
                if user is not None:
                    return user.with_authenticated_group()
            if trust.from_client_ca(certificate):
                user = _certificate_user(certificate, peer_certificate or b"")
                if user is not None:
                    return user.with_authenticated_group()
        token = _bearer_token(headers)
        if token:
            try:
                user = self.tokens.review(token)
            except KubeError as err:
                self._say("tokenreviews", f"cannot review a bearer token: {err}")
                return None
            if user is not None:
                return user.with_authenticated_group()
            return None
        return ANONYMOUS if self.anonymous else None

    # ----- authorization -----------------------------------------------------------------

    def authorize(self, user: User, attributes: Attributes) -> Decision:
        """Whether `user` may; AuthError when the API server cannot say."""
        if self.always_allow_groups.intersection(user.groups):
            return Decision(True)
        try:
            return self.access.review(user, attributes)
        except KubeError as err:
            message = f"cannot review access: {err}"
            self._say("subjectaccessreviews", message)
            raise AuthError(message) from None

    def _say(self, what: str, message: str) -> None:
        """Log a failed review once a minute, with what would fix a refusal."""
        now = self.clock()
        with self._lock:
            if now < self._said.get(what, float("-inf")) + SAY_AGAIN_AFTER:
                return
            self._said[what] = now
        if " 403 " in f" {message} ":
            message += (
                f" (the controller needs create on {what}: its ClusterRoleBinding to "
                "system:auth-delegator, deploy/rbac/controller.yaml)"
            )
        log.warning("%s", message)


def _load(der: bytes | None) -> x509.Certificate | None:
    if not der:
        return None
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError:
        return None


def _proxied_user(trust: ProxyTrust, headers: Headers) -> User | None:
    """The user the front proxy names in its headers (k8s.io/apiserver's requestheader)."""
    name = _first(headers, trust.username_headers)
    if not name:
        return None
    groups = [
        value
        for header in trust.group_headers
        for key, value in headers
        if key.lower() == header.lower() and value
    ]
    extra: dict[str, list[str]] = {}
    for prefix in trust.extra_prefixes:
        for key, value in headers:
            if key.lower().startswith(prefix.lower()):
                extra.setdefault(unquote(key[len(prefix) :].lower()), []).append(value)
    return User.of(name, _first(headers, trust.uid_headers), groups, extra)


def _first(headers: Headers, names: tuple[str, ...]) -> str:
    for name in names:
        for key, value in headers:
            if key.lower() == name.lower() and value:
                return value
    return ""


def _certificate_user(certificate: x509.Certificate, der: bytes) -> User | None:
    """A client certificate's user: CN the name, O the groups (as kube-apiserver's x509)."""
    subject = certificate.subject
    names = subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
    name = str(names[0].value) if names else ""
    if not name:
        return None
    groups = [str(o.value) for o in subject.get_attributes_for_oid(x509.NameOID.ORGANIZATION_NAME)]
    fingerprint = hashlib.sha256(der).hexdigest()
    return User.of(name, groups=groups, extra={CREDENTIAL_ID: [f"X509SHA256={fingerprint}"]})


def _bearer_token(headers: Headers) -> str:
    """The token of `Authorization: Bearer TOKEN` (the scheme in any case), or ""."""
    value = _first(headers, ("Authorization",)).strip()
    parts = value.split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return ""
    return parts[1]

"""Authenticated HTTPS, as Kubernetes' delegated servers serve: Kueue's metrics endpoint and
the front door of an aggregated API.

`certificate` (the serving certificate), `trust` (kube-system/extension-apiserver-
authentication: the front proxy's CA, names and headers), `reviews` (TokenReview and
SubjectAccessReview, cached), `identity` and `attributes` (who asks, and for what, as
RequestInfo resolves it), `delegated` (DelegatedAuth: authenticate, then authorize),
`messages` (Request, Response, Status) and `server` (SecureServer). Imports the API room.
"""

from extender.kube.servers.secure.attributes import Attributes, resolve
from extender.kube.servers.secure.certificate import CertificateError, ServingCertificate
from extender.kube.servers.secure.delegated import AuthError, DelegatedAuth
from extender.kube.servers.secure.identity import ANONYMOUS, User
from extender.kube.servers.secure.messages import Handler, Request, Response
from extender.kube.servers.secure.reviews import Decision
from extender.kube.servers.secure.server import SecureServer
from extender.kube.servers.secure.trust import ProxyTrust, TrustSource

__all__ = [
    "ANONYMOUS",
    "Attributes",
    "AuthError",
    "CertificateError",
    "Decision",
    "DelegatedAuth",
    "Handler",
    "ProxyTrust",
    "Request",
    "Response",
    "SecureServer",
    "ServingCertificate",
    "TrustSource",
    "User",
    "resolve",
]

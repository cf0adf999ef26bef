"""DelegatedAuth: who a request comes from (front proxy, client certificate, bearer token),
whether they may (SubjectAccessReview), and how long an answer is remembered."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from extender.kube.api.client import ApiError, TransportError
from extender.kube.servers.secure import AuthError, DelegatedAuth, TrustSource, User, resolve
from extender.kube.servers.secure.identity import ANONYMOUS
from extender.kube.servers.secure.trust import NO_TRUST, ProxyTrust, TrustError, parse
from tests.client_pki import authority, client
from tests.fakes import Clock

RECORDED = Path(__file__).resolve().parents[2] / "data" / "delegated-auth"
SCRAPER = "system:serviceaccount:metrics-demo:scraper"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / name).read_text())


class Reviews:
    """The API server as the reviews see it: answers from the recordings, every body kept."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.failure: Exception | None = None
        self.configmap: dict[str, Any] | Exception = recorded(
            "configmap-extension-apiserver-authentication.json"
        )["response"]["body"]
        self.allowed: set[str] = {SCRAPER}

    def create(self, resource: Any, obj: dict[str, Any], namespace: str | None = None) -> Any:
        self.sent.append((resource.plural, copy.deepcopy(obj)))
        if self.failure is not None:
            raise self.failure
        if resource.plural == "tokenreviews":
            if obj["spec"]["token"] == "scraper-token":
                return recorded("tokenreview-authenticated.json")["response"]["body"]
            return recorded("tokenreview-unauthenticated.json")["response"]["body"]
        name = "allowed" if obj["spec"]["user"] in self.allowed else "denied"
        return recorded(f"subjectaccessreview-nonresource-{name}.json")["response"]["body"]

    def get(self, resource: Any, name: str, namespace: str | None = None) -> Any:
        if isinstance(self.configmap, Exception):
            raise self.configmap
        return self.configmap

    def asked(self, plural: str) -> int:
        return sum(1 for p, _ in self.sent if p == plural)


@pytest.fixture
def kube() -> Reviews:
    return Reviews()


@pytest.fixture
def clock() -> Clock:
    return Clock()


def auth_of(kube: Reviews, clock: Clock, trust: ProxyTrust = NO_TRUST, **kw: Any) -> DelegatedAuth:
    source = TrustSource(None)
    source.current = trust
    return DelegatedAuth(kube, source, clock=clock, **kw)  # type: ignore[arg-type]


def bearer(token: str) -> list[tuple[str, str]]:
    return [("Authorization", f"Bearer {token}")]


METRICS = resolve("GET", "/metrics", {})


# ----- bearer tokens ---------------------------------------------------------------------


def test_a_token_is_reviewed_once_and_its_user_remembered_ten_seconds(kube, clock):
    auth = auth_of(kube, clock)
    user = auth.authenticate(None, bearer("scraper-token"))
    assert user is not None
    assert user.name == SCRAPER
    assert user.groups == (
        "system:serviceaccounts",
        "system:serviceaccounts:metrics-demo",
        "system:authenticated",
    )
    assert kube.sent[0][1] == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "scraper-token"},
    }
    clock.advance(9.9)
    assert auth.authenticate(None, bearer("scraper-token")) == user
    assert kube.asked("tokenreviews") == 1
    clock.advance(0.2)
    assert auth.authenticate(None, bearer("scraper-token")) == user
    assert kube.asked("tokenreviews") == 2


def test_an_unknown_token_is_refused_and_asked_again_after_five_seconds(kube, clock):
    auth = auth_of(kube, clock)
    assert auth.authenticate(None, bearer("made-up")) is None
    assert auth.authenticate(None, [("authorization", "bearer made-up")]) is None
    assert kube.asked("tokenreviews") == 1
    clock.advance(5.1)
    assert auth.authenticate(None, bearer("made-up")) is None
    assert kube.asked("tokenreviews") == 2


def test_no_credentials_is_no_identity_unless_anonymous_is_allowed(kube, clock):
    assert auth_of(kube, clock).authenticate(None, []) is None
    assert auth_of(kube, clock).authenticate(None, [("Authorization", "Basic dTpw")]) is None
    assert auth_of(kube, clock, anonymous=True).authenticate(None, []) == ANONYMOUS
    # A token that fails is refused even where anonymous is allowed (as kube-apiserver).
    assert auth_of(kube, clock, anonymous=True).authenticate(None, bearer("made-up")) is None
    assert kube.asked("tokenreviews") == 1


def test_a_review_the_api_server_refuses_is_not_remembered_and_says_what_to_grant(
    kube, clock, caplog
):
    kube.failure = ApiError(403, "Forbidden", "tokenreviews.authentication.k8s.io is forbidden")
    auth = auth_of(kube, clock)
    with caplog.at_level(logging.WARNING, logger="tower.secure"):
        assert auth.authenticate(None, bearer("scraper-token")) is None
        assert auth.authenticate(None, bearer("scraper-token")) is None
    assert kube.asked("tokenreviews") == 2
    assert [r.getMessage() for r in caplog.records] == [
        "cannot review a bearer token: 403 Forbidden: tokenreviews.authentication.k8s.io is "
        "forbidden (the controller needs create on tokenreviews: its ClusterRoleBinding to "
        "system:auth-delegator, deploy/rbac/controller.yaml)"
    ]
    kube.failure = None
    assert auth.authenticate(None, bearer("scraper-token")) is not None


# ----- SubjectAccessReview -----------------------------------------------------------------


def test_access_is_asked_with_the_users_fields_as_a_real_review_was_sent(kube, clock):
    auth = auth_of(kube, clock)
    user = auth.authenticate(None, bearer("scraper-token"))
    assert auth.authorize(user, METRICS).allowed
    sent = kube.sent[-1][1]
    want = recorded("subjectaccessreview-nonresource-allowed.json")["request"]["body"]
    assert sent == want
    assert auth.authorize(user, METRICS).reason.startswith("RBAC: allowed by ClusterRoleBinding")
    assert kube.asked("subjectaccessreviews") == 1


def test_a_denial_is_remembered_five_seconds_an_allowance_ten(kube, clock):
    auth = auth_of(kube, clock)
    nobody = User("system:serviceaccount:metrics-demo:nobody", groups=("system:authenticated",))
    assert not auth.authorize(nobody, METRICS).allowed
    clock.advance(4.9)
    assert not auth.authorize(nobody, METRICS).allowed
    assert kube.asked("subjectaccessreviews") == 1
    kube.allowed.add(nobody.name)  # a role just granted counts after at most 5 s
    clock.advance(0.2)
    assert auth.authorize(nobody, METRICS).allowed
    assert kube.asked("subjectaccessreviews") == 2


def test_system_masters_are_allowed_without_a_review(kube, clock):
    admin = User("kubernetes-admin", groups=("system:masters", "system:authenticated"))
    assert auth_of(kube, clock).authorize(admin, METRICS).allowed
    assert kube.sent == []


def test_a_review_that_cannot_be_had_is_an_error_not_a_denial(kube, clock):
    kube.failure = TransportError("connect", "connection refused", sent=False)
    with pytest.raises(AuthError, match=r"^cannot review access: connect: connection refused$"):
        auth_of(kube, clock).authorize(User("u"), METRICS)


# ----- the front proxy and client certificates ----------------------------------------------


@pytest.fixture(scope="module")
def pki() -> dict[str, Any]:
    proxy_ca, client_ca, other_ca = authority("proxy-ca"), authority("client-ca"), authority("x")
    return {
        "proxy_ca": proxy_ca,
        "client_ca": client_ca,
        "proxy": client(proxy_ca, "front-proxy-client"),
        "proxy_other_name": client(proxy_ca, "someone-else"),
        "proxy_from_other_ca": client(other_ca, "front-proxy-client"),
        "alice": client(client_ca, "alice", ("team-a", "devs")),
    }


def trust_of(pki: dict[str, Any]) -> ProxyTrust:
    return parse(
        {
            "requestheader-client-ca-file": pki["proxy_ca"].cert.decode(),
            "requestheader-allowed-names": '["front-proxy-client"]',
            "requestheader-username-headers": '["X-Remote-User"]',
            "requestheader-group-headers": '["X-Remote-Group"]',
            "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]',
            "client-ca-file": pki["client_ca"].cert.decode(),
        }
    )


PROXIED = [
    ("X-Remote-User", "bob"),
    ("X-Remote-Group", "team-b"),
    ("X-Remote-Group", "system:authenticated"),
    ("X-Remote-Extra-Reason", "on-call"),
    ("x-remote-extra-acme.com%2Fproject", "tower"),
]


def test_the_front_proxys_certificate_makes_its_headers_the_user(kube, clock, pki):
    user = auth_of(kube, clock, trust_of(pki)).authenticate(pki["proxy"].der, PROXIED)
    assert user == User.of(
        "bob",
        groups=["team-b", "system:authenticated"],
        extra={"reason": ["on-call"], "acme.com/project": ["tower"]},
    )
    assert kube.sent == []  # no TokenReview for a proxied request


@pytest.mark.parametrize(
    ("certificate", "want"),
    [(None, None), ("proxy_other_name", None), ("proxy_from_other_ca", None), ("alice", "alice")],
    ids=["no certificate", "a name not allowed", "another CA", "a client CA's certificate"],
)
def test_the_proxy_headers_without_the_proxys_certificate_count_for_nothing(
    kube, clock, pki, certificate, want
):
    der = pki[certificate].der if certificate else None
    user = auth_of(kube, clock, trust_of(pki)).authenticate(der, PROXIED)
    assert (user.name if user else None) == want  # never "bob", whom the headers name


def test_the_proxys_certificate_without_a_user_header_falls_back_to_the_token(kube, clock, pki):
    auth = auth_of(kube, clock, trust_of(pki))
    assert auth.authenticate(pki["proxy"].der, []) is None
    assert auth.authenticate(pki["proxy"].der, bearer("scraper-token")).name == SCRAPER


def test_a_client_certificate_is_its_cn_and_organizations(kube, clock, pki):
    user = auth_of(kube, clock, trust_of(pki)).authenticate(pki["alice"].der, [])
    assert (user.name, user.groups) == ("alice", ("team-a", "devs", "system:authenticated"))
    [(key, (credential,))] = user.extra
    assert key == "authentication.kubernetes.io/credential-id"
    assert credential.startswith("X509SHA256=")


# ----- kube-system/extension-apiserver-authentication --------------------------------------


def test_the_recorded_configmap_is_read_as_kube_apiserver_wrote_it(kube):
    source = TrustSource(kube)  # type: ignore[arg-type]
    trust = source.refresh()
    assert trust.allowed_names == ("front-proxy-client",)
    assert trust.username_headers == ("X-Remote-User",)
    assert trust.group_headers == ("X-Remote-Group",)
    assert trust.extra_prefixes == ("X-Remote-Extra-",)
    assert trust.uid_headers == ()
    assert [c.subject.rfc4514_string() for c in trust.proxy_cas] == ["CN=realk8s-front-proxy-ca"]
    assert [c.subject.rfc4514_string() for c in trust.client_cas] == ["CN=realk8s-ca"]
    assert trust.ca_bundle.count("BEGIN CERTIFICATE") == 2


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "requestheader-allowed-names",
            "front-proxy-client",
            "kube-system/extension-apiserver-authentication: data.requestheader-allowed-names: "
            "not a JSON list of strings",
        ),
        (
            "client-ca-file",
            "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n",
            "kube-system/extension-apiserver-authentication: data.client-ca-file: not PEM "
            "certificates",
        ),
    ],
)
def test_a_bad_key_is_named_and_the_last_good_trust_kept(kube, caplog, key, value, message):
    with pytest.raises(TrustError, match=f"^{message}$"):
        parse({key: value})
    source = TrustSource(kube)  # type: ignore[arg-type]
    good = source.refresh()
    kube.configmap = copy.deepcopy(kube.configmap)
    kube.configmap["data"][key] = value
    with caplog.at_level(logging.WARNING, logger="tower.secure"):
        assert source.refresh() is good
    assert [r.getMessage() for r in caplog.records] == [f"{message}; keeping what was read before"]


def test_a_configmap_it_may_not_read_leaves_bearer_tokens_only(kube, caplog):
    kube.configmap = ApiError(403, "Forbidden", "configmaps is forbidden")
    with caplog.at_level(logging.WARNING, logger="tower.secure"):
        assert TrustSource(kube).refresh() == NO_TRUST  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records] == [
        "cannot read kube-system/extension-apiserver-authentication (403): front-proxy and "
        "client certificates are not trusted, bearer tokens still are (the controller's "
        "RoleBinding to extension-apiserver-authentication-reader in kube-system gives it)"
    ]

"""Tower's HTTPS server over real TLS, with the API double answering TokenReview and
SubjectAccessReview: who is refused (401, 403, a failed handshake) and who is served."""

from __future__ import annotations

import http.client
import json
import ssl
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from kubernetes import config as k8s_config

from extender.kube.api.client import RequestBudget, RestClient
from extender.kube.runtime import Readiness, serve_health
from extender.kube.servers.secure import (
    DelegatedAuth,
    Response,
    SecureServer,
    ServingCertificate,
    TrustSource,
)
from tests.apidouble import ApiDouble
from tests.apidouble.reviews import publish_authentication
from tests.client_pki import Pair, authority, client
from tests.controller.conftest import CONTROLLER_USER
from tests.controller.test_api_double_reviews import AUTH_DELEGATOR, NOBODY, SCRAPER
from tests.controller.test_rbac import BASIC_USER

RECORDED = Path(__file__).resolve().parents[1] / "data" / "delegated-auth"
METRICS_READER = [*BASIC_USER, {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
SAMPLE = b"# HELP tower_demo_total a demo\n# TYPE tower_demo_total counter\ntower_demo_total 1.0\n"


def recorded_body(name: str) -> bytes:
    return json.loads((RECORDED / name).read_text())["response"]["rawBody"].encode()


class World:
    """The double, the cluster's CAs and certificates, and a SecureServer serving /metrics."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.api = ApiDouble()
        self.api.start()
        self.proxy_ca, self.client_ca, self.stranger_ca = (
            authority("front-proxy-ca"),
            authority("client-ca"),
            authority("some-other-ca"),
        )
        publish_authentication(self.api, self.proxy_ca.cert.decode(), self.client_ca.cert.decode())
        users = {
            "tower": (CONTROLLER_USER, [*AUTH_DELEGATOR, *BASIC_USER, _reads_authentication()]),
            "scraper-token": (SCRAPER, METRICS_READER),
            "nobody-token": (NOBODY, list(BASIC_USER)),
        }
        for token, (name, rules) in users.items():
            self.api.users[token] = {"username": name, "groups": ["system:authenticated"]}
            self.api.rbac[name] = rules
        self.api.rbac["alice"] = METRICS_READER  # named by the front proxy
        self.api.rbac["bob"] = list(BASIC_USER)
        self.api.rbac["carol"] = list(BASIC_USER)  # by a client certificate
        config = self.api.kubeconfig(str(tmp / "tower.kubeconfig"), token="tower")
        kube = RestClient(k8s_config.new_client_from_config(config), RequestBudget(100, 100))
        trust = TrustSource(kube)
        trust.refresh()
        self.auth = DelegatedAuth(kube, trust, clock=time.monotonic)
        self.certificate = ServingCertificate.self_signed(datetime.now(UTC))
        self.server = SecureServer(
            "127.0.0.1:0",
            self.auth,
            {"/metrics": lambda _: Response(200, SAMPLE, "text/plain; version=0.0.4"),
             "/broken": lambda _: 1 / 0},
            certificate=self.certificate,
            public={"/page": lambda _: Response(200, b"<p>no data here</p>", "text/html")},
        ).start()  # fmt: skip

    def get(
        self, path: str, headers: dict[str, str] | None = None, certificate: Pair | None = None
    ) -> tuple[int, bytes, http.client.HTTPResponse]:
        # The client checks the server as a scraper given its CA would: the chain's last PEM.
        ca = x509.load_pem_x509_certificates(self.certificate.cert)[-1]
        context = ssl.create_default_context(cadata=ca.public_bytes(Encoding.PEM).decode())
        if certificate is not None:
            context.load_cert_chain(*certificate.write(self.tmp, "client"))
        conn = http.client.HTTPSConnection("127.0.0.1", self.server.port, context=context)
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        body = response.read()
        conn.close()
        return response.status, body, response

    def reviews(self, plural: str) -> int:
        return sum(1 for method, path, _ in self.api.requests if path.endswith(plural))


def _reads_authentication() -> dict:
    return {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "verbs": ["get"],
        "namespaces": ["kube-system"],
    }


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    world = World(tmp_path_factory.mktemp("secure"))
    yield world
    world.server.shutdown()
    world.api.stop()


PROXIED_ALICE = {"X-Remote-User": "alice", "X-Remote-Group": "team-a"}


def test_an_anonymous_scrape_is_refused_as_kube_apiserver_refuses_it(world):
    status, body, response = world.get("/metrics")
    assert status == 401
    assert body == recorded_body("apiserver-401-bad-token.json")
    assert response.getheader("Content-Type") == "application/json"


def test_a_made_up_token_is_refused(world):
    status, body, _ = world.get("/metrics", {"Authorization": "Bearer made-up"})
    assert (status, json.loads(body)["message"]) == (401, "Unauthorized")


def test_a_token_without_the_role_is_forbidden_by_name(world):
    status, body, _ = world.get("/metrics", {"Authorization": "Bearer nobody-token"})
    assert status == 403
    # The same user, refused the same path by the real kube-apiserver: the same bytes.
    assert body == recorded_body("apiserver-403-nonresource.json")


def test_a_token_allowed_get_on_metrics_is_served_and_reviewed_once(world):
    before = world.reviews("tokenreviews"), world.reviews("subjectaccessreviews")
    for _ in range(5):
        status, body, _ = world.get("/metrics", {"Authorization": "Bearer scraper-token"})
        assert (status, body) == (200, SAMPLE)
    after = world.reviews("tokenreviews"), world.reviews("subjectaccessreviews")
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1)


def test_the_front_proxys_certificate_names_the_user_in_headers(world):
    proxy = client(world.proxy_ca, "front-proxy-client")
    assert world.get("/metrics", PROXIED_ALICE, proxy)[:2] == (200, SAMPLE)
    status, body, _ = world.get("/metrics", {"X-Remote-User": "bob"}, proxy)
    assert (status, json.loads(body)["message"]) == (
        403,
        'forbidden: User "bob" cannot get path "/metrics"',
    )


def test_the_proxys_headers_without_its_certificate_are_not_believed(world):
    assert world.get("/metrics", PROXIED_ALICE)[0] == 401
    not_allowed = client(world.proxy_ca, "not-the-front-proxy")
    assert world.get("/metrics", PROXIED_ALICE, not_allowed)[0] == 401
    # A client certificate of the cluster's client CA is its own user, never the header's.
    carol = client(world.client_ca, "carol")
    status, body, _ = world.get("/metrics", PROXIED_ALICE, carol)
    assert (status, json.loads(body)["message"]) == (
        403,
        'forbidden: User "carol" cannot get path "/metrics"',
    )


def test_a_certificate_from_a_ca_the_cluster_does_not_vouch_for_fails_the_handshake(world):
    stranger = client(world.stranger_ca, "front-proxy-client")
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        world.get("/metrics", PROXIED_ALICE, stranger)


def test_past_authorization_an_unknown_path_is_404_and_a_failing_handler_500(world):
    token = {"Authorization": "Bearer scraper-token"}
    world.api.rbac[SCRAPER] = [*METRICS_READER, {"nonResourceURLs": ["/*"], "verbs": ["get"]}]
    try:
        assert world.get("/nothing-here", token)[:2] == (404, b"404 page not found\n")
        status, body, _ = world.get("/broken", token)
    finally:
        world.api.rbac[SCRAPER] = METRICS_READER
    assert (status, json.loads(body)["message"]) == (
        500,
        "GET /broken: ZeroDivisionError: division by zero",
    )


def test_a_public_path_is_served_to_anyone(world):
    assert world.get("/page")[:2] == (200, b"<p>no data here</p>")


def test_the_served_certificate_names_localhost_and_127_0_0_1(world):
    leaf = x509.load_pem_x509_certificate(world.certificate.cert)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_health_and_readiness_stay_plain_and_open_and_metrics_are_not_there():
    server = serve_health("127.0.0.1:0", Readiness())
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=5)
        conn.request("GET", "/healthz")
        assert conn.getresponse().read() == b"ok\n"
        conn.request("GET", "/metrics")
        assert conn.getresponse().status == 404
        conn.close()
    finally:
        server.shutdown()

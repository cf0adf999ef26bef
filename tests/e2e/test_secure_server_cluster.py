"""Tower's HTTPS server with a real kube-apiserver deciding: its TokenReview and
SubjectAccessReview, its kube-system/extension-apiserver-authentication, and (on a
shared/realk8s plane, whose run folder holds it beside the kubeconfig) its front proxy's
client certificate.

The server runs in this process, as the controller runs it, with the kubeconfig's identity
for the reviews; the callers are service accounts of the cluster with tokens it issued. An
APIService cannot reach a process on 127.0.0.1 (kube-apiserver refuses loopback Endpoints),
so the front proxy's certificate and headers are sent here directly, as the aggregator
sends them.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from kubernetes import config as k8s_config

from extender.kube.api.client import RequestBudget, RestClient
from extender.kube.servers.secure import (
    DelegatedAuth,
    Response,
    SecureServer,
    ServingCertificate,
    TrustSource,
)
from tests.e2e.conftest import KUBECONFIG, kubectl

pytestmark = pytest.mark.e2e
SUFFIX = uuid.uuid4().hex[:6]
NS = f"tower-metrics-{SUFFIX}"
ROLE = f"tower-e2e-metrics-reader-{SUFFIX}"
SAMPLE = b"tower_demo_total 1.0\n"


def setup_manifest() -> str:
    return f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {NS}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: scraper, namespace: {NS}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: nobody, namespace: {NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ROLE}}}
rules:
- nonResourceURLs: ["/metrics"]
  verbs: ["get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ROLE}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ROLE}}}
subjects:
- {{kind: ServiceAccount, name: scraper, namespace: {NS}}}
"""


class Served:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        kube = RestClient(k8s_config.new_client_from_config(KUBECONFIG), RequestBudget(20, 50))
        trust = TrustSource(kube)
        self.trust = trust.refresh()
        auth = DelegatedAuth(kube, trust, clock=time.monotonic)
        self.server = SecureServer(
            "127.0.0.1:0",
            auth,
            {"/metrics": lambda _: Response(200, SAMPLE, "text/plain")},
            certificate=ServingCertificate.self_signed(datetime.now(UTC)),
        ).start()

    def get(
        self, headers: dict[str, str] | None = None, cert: tuple[str, str] | None = None
    ) -> tuple[int, bytes]:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if cert is not None:
            context.load_cert_chain(*cert)
        conn = http.client.HTTPSConnection("127.0.0.1", self.server.port, context=context)
        conn.request("GET", "/metrics", headers=headers or {})
        answer = conn.getresponse()
        body = answer.read()
        conn.close()
        return answer.status, body


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    kubectl("apply", "-f", "-", input=setup_manifest())
    try:
        served = Served(tmp_path_factory.mktemp("secure"))
        time.sleep(2)  # RBAC's caches see the new binding
        yield served
        served.server.shutdown()
    finally:
        kubectl("delete", "namespace", NS, "--wait=false", check=False)
        kubectl("delete", "clusterrolebinding,clusterrole", ROLE, check=False)


def token(name: str) -> str:
    return kubectl("create", "token", name, "-n", NS).strip()


def test_an_anonymous_scrape_is_refused(served):
    assert served.get()[0] == 401


def test_a_token_the_api_server_never_issued_is_refused(served):
    assert served.get({"Authorization": "Bearer not-a-token"})[0] == 401


def test_a_service_account_without_the_role_is_forbidden_by_name(served):
    status, body = served.get({"Authorization": f"Bearer {token('nobody')}"})
    assert status == 403
    assert json.loads(body)["message"] == (
        f'forbidden: User "system:serviceaccount:{NS}:nobody" cannot get path "/metrics"'
    )


def test_a_service_account_bound_to_get_metrics_is_served(served):
    assert served.get({"Authorization": f"Bearer {token('scraper')}"}) == (200, SAMPLE)


def test_the_kubeconfigs_client_certificate_is_its_user(served, tmp_path):
    user = yaml.safe_load(Path(KUBECONFIG or "").read_text())["users"][0]["user"]
    if "client-certificate-data" not in user:
        pytest.skip("the kubeconfig's user has no client certificate")
    cert, key = tmp_path / "c.crt", tmp_path / "c.key"
    cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
    key.write_bytes(base64.b64decode(user["client-key-data"]))
    assert served.get(cert=(str(cert), str(key))) == (200, SAMPLE)  # system:masters


def front_proxy() -> tuple[str, str]:
    pki = Path(KUBECONFIG or "").parent / "pki"
    cert, key = pki / "front-proxy-client.crt", pki / "front-proxy-client.key"
    if not cert.exists():
        pytest.skip(f"no front-proxy client certificate beside the kubeconfig ({pki})")
    return str(cert), str(key)


def test_the_front_proxys_certificate_names_the_user_in_its_headers(served):
    assert served.trust.allowed_names == ("front-proxy-client",)
    scraper = {
        "X-Remote-User": f"system:serviceaccount:{NS}:scraper",
        "X-Remote-Group": "system:serviceaccounts",
    }
    assert served.get(scraper, front_proxy()) == (200, SAMPLE)
    status, body = served.get({"X-Remote-User": "mallory"}, front_proxy())
    assert (status, json.loads(body)["message"]) == (
        403,
        'forbidden: User "mallory" cannot get path "/metrics"',
    )


def test_the_front_proxys_headers_without_its_certificate_count_for_nothing(served):
    headers = {"X-Remote-User": f"system:serviceaccount:{NS}:scraper"}
    assert served.get(headers)[0] == 401

"""The API double answers TokenReview and SubjectAccessReview as the real kube-apiserver did
(tests/data/delegated-auth/, recorded from a real v1.32)."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.apidouble import ApiDouble
from tests.controller.test_rbac import BASIC_USER

RECORDED = Path(__file__).resolve().parents[1] / "data" / "delegated-auth"
CONTROLLER = "system:serviceaccount:tower-system:tower-controller"
NOBODY = "system:serviceaccount:metrics-demo:nobody"
SCRAPER = "system:serviceaccount:metrics-demo:scraper"
AUTH_DELEGATOR = [  # Kubernetes' system:auth-delegator ClusterRole
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["subjectaccessreviews"],
        "verbs": ["create"],
    },
]
TOKENS = {  # the redacted tokens of the recording, as the double knows them
    "<tower-system/tower-controller's token, redacted>": "controller-token",
    "<metrics-demo/scraper's token, redacted>": "scraper-token",
    "<metrics-demo/nobody's token, redacted>": "nobody-token",
}


def recorded(name: str) -> dict:
    return json.loads((RECORDED / name).read_text())


@pytest.fixture(scope="module")
def api():
    double = ApiDouble()
    double.start()
    scraper = recorded("tokenreview-authenticated.json")["response"]["body"]["status"]["user"]
    double.users["scraper-token"] = scraper
    double.users["nobody-token"] = {"username": NOBODY, "groups": ["system:authenticated"]}
    double.users["controller-token"] = {"username": CONTROLLER, "groups": []}
    double.rbac[CONTROLLER] = AUTH_DELEGATOR + BASIC_USER
    double.rbac[NOBODY] = list(BASIC_USER)
    double.rbac["alice"] = list(BASIC_USER)  # the front proxy's user, given no role
    double.rbac[SCRAPER] = [
        *BASIC_USER,
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
        {
            "apiGroups": ["visibility.kueue.x-k8s.io"],
            "resources": ["localqueues/pendingworkloads"],
            "verbs": ["get"],
            "namespaces": ["metrics-demo"],
        },
    ]
    yield double
    double.stop()


def replay(api: ApiDouble, name: str) -> tuple[int, dict, dict]:
    """The recording's request sent to the double; (status, body) and what was recorded."""
    exchange = recorded(name)
    text = json.dumps(exchange["request"])
    for redacted, token in TOKENS.items():
        text = text.replace(redacted, token)
    request = json.loads(text)
    parts = urlsplit(api.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    conn.request(
        request["method"],
        request["path"],
        body=json.dumps(request["body"]).encode(),
        headers=request["headers"],
    )
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    want = json.loads(
        json.dumps(exchange["response"]["body"]).replace(
            "<metrics-demo/scraper's token, redacted>", "scraper-token"
        )
    )
    return response.status, body, {"status": exchange["response"]["status"], "body": want}


@pytest.mark.parametrize(
    "name",
    [
        "tokenreview-authenticated.json",
        "tokenreview-unauthenticated.json",
        "subjectaccessreview-nonresource-denied.json",
        "subjectaccessreview-resource-denied.json",
        "subjectaccessreview-user-from-front-proxy.json",
    ],
)
def test_a_review_is_answered_as_kube_apiserver_answered_it(api, name):
    status, body, want = replay(api, name)
    assert status == want["status"] == 201
    want["body"]["metadata"].pop("managedFields")  # the double keeps none
    assert body == want["body"]


@pytest.mark.parametrize(
    "name",
    [
        "subjectaccessreview-nonresource-allowed.json",
        "subjectaccessreview-resource-allowed.json",
    ],
)
def test_an_allowed_review_says_allowed_without_the_bindings_name(api, name):
    status, body, want = replay(api, name)
    assert status == want["status"] == 201
    assert want["body"]["status"].pop("reason").startswith("RBAC: allowed by ")
    want["body"]["metadata"].pop("managedFields")
    assert body == want["body"]


@pytest.mark.parametrize(
    "name", ["tokenreview-forbidden.json", "subjectaccessreview-forbidden.json"]
)
def test_a_caller_without_auth_delegator_is_refused_as_kube_apiserver_refuses_it(api, name):
    status, body, want = replay(api, name)
    assert (status, body) == (want["status"], want["body"])

"""The HTTP layer: every bad input gets one clear line and a 400, never a 5xx."""

import contextlib
import io
import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures import admission_review
from webhook.app import admission_routes, create_app
from webhook.settings import Settings

SEED = admission_review("01-mutate.job-CREATE-generateName.seed-job")


@pytest.fixture(scope="module")
def client():
    return create_app(Settings(max_body_bytes=64 * 1024)).test_client()


def post(client, path="/mutate-batch-v1-job", body=None, **kw):
    data = json.dumps(SEED if body is None else body) if not isinstance(body, bytes) else body
    return client.post(
        path, data=data, content_type=kw.pop("content_type", "application/json"), **kw
    )


def test_the_seed_review_is_answered(client):
    response = post(client)
    assert response.status_code == 200
    answer = response.get_json()
    assert answer["kind"] == "AdmissionReview"
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["response"]["uid"] == SEED["request"]["uid"]


BAD = [
    (
        "wrong method",
        lambda c: c.get("/mutate-batch-v1-job"),
        "method GET is not allowed: webhooks are POSTed",
    ),
    (
        "wrong content type",
        lambda c: post(c, content_type="text/plain"),
        "Content-Type must be application/json, got 'text/plain'",
    ),
    (
        "body over the limit",
        lambda c: post(c, body=b"{" + b" " * 70_000 + b"}"),
        "body of 70002 bytes is over the 65536 limit",
    ),
    ("not JSON", lambda c: post(c, body=b"{nope"), "body is not JSON"),
    (
        "not an AdmissionReview",
        lambda c: post(c, body={"kind": "Pod", "apiVersion": "v1"}),
        "expected kind AdmissionReview, apiVersion admission.k8s.io/v1; got kind 'Pod'",
    ),
    (
        "no request.uid",
        lambda c: post(
            c, body={**SEED, "request": {k: v for k, v in SEED["request"].items() if k != "uid"}}
        ),
        "AdmissionReview request has no uid",
    ),
    ("a JSON array", lambda c: post(c, body=[1, 2]), "body is not a JSON object"),
]


@pytest.mark.parametrize(("call", "want"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_is_a_one_line_400(client, call, want):
    response = call(client)
    assert response.status_code == 400
    text = response.get_data(as_text=True)
    assert text.count("\n") == 1
    assert text.startswith(want)


def test_an_object_of_another_kind_is_answered_not_allowed(client):
    review = json.loads(json.dumps(SEED))
    review["request"]["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    answer = post(client, body=review).get_json()["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 400
    assert answer["status"]["message"] == "this endpoint handles Job.batch, got Pod.core"


def test_every_kueue_path_is_served(client):
    assert {p for p in admission_routes(Settings()) if "kueue" in p} == {
        f"/validate-kueue-x-k8s-io-v1beta2-{k}"
        for k in (
            "clusterqueue",
            "localqueue",
            "resourceflavor",
            "cohort",
            "workloadpriorityclass",
            "workload",
        )
    }


def test_health_and_metrics(client):
    assert client.get("/healthz").data == b"ok\n"
    assert client.get("/readyz").data == b"ok\n"
    post(client)
    text = client.get("/metrics").get_data(as_text=True)
    assert (
        'tower_webhook_requests_total{code="200",outcome="patched",path="/mutate-batch-v1-job"}'
    ) in text


def test_a_bug_of_ours_fails_open_with_a_warning(monkeypatch, client, caplog):
    import webhook.app as app_module

    def broken(*_):
        raise RuntimeError("boom")

    monkeypatch.setattr(app_module, "mutate", broken)
    app = create_app(Settings())
    answer = app.test_client().post("/mutate-batch-v1-job", json=SEED).get_json()["response"]
    assert answer["allowed"] is True
    assert "controller will queue the object instead" in answer["warnings"][0]


def test_client_mistakes_are_not_logged_as_errors(client, caplog):
    post(client, body=b"{nope")
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


@contextlib.contextmanager
def _errors_logged():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.ERROR:
                records.append(record.getMessage())

    handler = Keep()
    logger = logging.getLogger("tower.webhook")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
PATHS = [*sorted(admission_routes(Settings())), "/convert"]


def _mutated(value, path, replacement):
    """SEED with one nested field replaced by an arbitrary JSON value."""
    review = json.loads(json.dumps(SEED))
    node = review
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = replacement
    return review


FIELD_PATHS = [
    ("request",),
    ("request", "uid"),
    ("request", "kind"),
    ("request", "object"),
    ("request", "object", "metadata"),
    ("request", "object", "spec"),
    ("request", "object", "metadata", "labels"),
    ("request", "operation"),
    ("request", "oldObject"),
    ("request", "userInfo"),
    ("request", "namespace"),
    ("request", "object", "spec", "template"),
]


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(path=st.sampled_from(PATHS), body=json_values)
def test_random_json_never_gets_a_5xx(client, path, body):
    with _errors_logged() as errors:
        assert post(client, path, body=body).status_code < 500
    assert errors == []


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    path=st.sampled_from(PATHS),
    field=st.sampled_from(FIELD_PATHS),
    value=json_values,
    operation=st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"]),
)
def test_mutated_reviews_never_get_a_5xx(client, path, field, value, operation):
    review = _mutated(SEED, ("request", "operation"), operation)
    review = _mutated(review, field, value) if field != ("request", "operation") else review
    with _errors_logged() as errors:
        response = post(client, path, body=review)
    assert response.status_code < 500
    assert errors == [], "the pure functions crashed (answered by the fail-open catch-all)"
    if response.status_code == 200 and path != "/convert":
        assert response.get_json()["response"]["uid"] == review["request"]["uid"]


@pytest.mark.parametrize(
    "body",
    [
        json.dumps(SEED).encode(),
        b"{nope",
        b"[]",
        json.dumps(admission_review("05-mutate.job-UPDATE-kubectl-patch-suspend-false")).encode(),
    ],
    ids=["seed CREATE", "not JSON", "not an object", "kubectl patch UPDATE"],
)
@pytest.mark.parametrize("path", ["/mutate-batch-v1-job", "/validate-batch-v1-job", "/convert"])
def test_the_fast_path_answers_exactly_as_flask_does(body, path):
    app = create_app(Settings())
    fast = app.wsgi_app
    answers = []
    for wsgi in (fast, fast.flask_wsgi):
        environ = {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "SERVER_NAME": "x",
            "SERVER_PORT": "9443",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.input": io.BytesIO(body),
            "wsgi.url_scheme": "https",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.errors": io.StringIO(),
        }
        seen = {}

        def start_response(status, headers, seen=seen):
            seen["status"] = status.split()[0]
            seen["type"] = dict(headers)["Content-Type"]

        payload = b"".join(wsgi(environ, start_response))
        answers.append((seen["status"], seen["type"].split(";")[0], payload))
    assert answers[0] == answers[1]

"""The API double answers as kube-apiserver did in shared/fixtures/real-apiserver/api/."""

from __future__ import annotations

import base64
import http.client
import json
import time
from urllib.parse import urlsplit

import pytest
from kubernetes import config as k8s_config

from extender.kube.api import resources as r
from extender.kube.api.client import RequestBudget, RestClient
from tests.apidouble import ApiDouble, JobRunner
from tests.fixtures import load


@pytest.fixture
def api():
    double = ApiDouble(bookmark_interval=0.3)
    double.start()
    runner = JobRunner(double)
    yield double
    runner.stop()
    double.stop()


def send(api, method, path, body=None, content_type="application/json", accept=None):
    parts = urlsplit(api.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {"Content-Type": content_type}
    if accept:
        headers["Accept"] = accept
    data = None if body is None else json.dumps(body).encode()
    conn.request(method, path, body=data, headers=headers)
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    kind = response.getheader("Content-Type") or ""
    return response.status, (json.loads(raw) if "json" in kind else raw.decode()), kind


def replay(api, name):
    """Send a fixture's request as it was sent; return (status, body) and the fixture."""
    fixture = load(f"api/{name}.json")
    request = fixture["request"]
    status, body, _ = send(
        api,
        request["method"],
        request["path"],
        request["body"],
        request["headers"].get("Content-Type", "application/json"),
    )
    return status, body, fixture["response"]


def create_api_job(api):
    body = load("api/create-job-201.json")["request"]["body"]
    status, created, _ = send(api, "POST", "/apis/batch/v1/namespaces/default/jobs", body)
    assert status == 201
    return created


@pytest.mark.parametrize(
    ("name", "needs_job"),
    [
        ("get-job-404-notfound", False),
        ("delete-job-404-notfound", False),
        ("patch-job-404-notfound", False),
        ("create-job-in-missing-namespace-404", False),
        ("create-job-again-409-alreadyexists", True),
        ("patch-job-unsupported-content-type-415", True),
        ("patch-job-json-patch-test-fails-422", True),
    ],
)
def test_error_bodies_are_kube_apiservers(api, name, needs_job):
    if needs_job:
        create_api_job(api)
    status, body, want = replay(api, name)
    assert status == want["status"]
    assert body == want["body"]


def test_a_stale_update_is_409_conflict_with_the_same_body(api):
    job = create_api_job(api)
    job["metadata"]["resourceVersion"] = "1"
    status, body, _ = send(api, "PUT", "/apis/batch/v1/namespaces/default/jobs/api-job", job)
    want = load("api/put-job-stale-rv-409-conflict.json")["response"]
    assert (status, body) == (want["status"], want["body"])


def test_an_unknown_group_is_a_plain_text_404(api):
    status, body, kind = send(api, "GET", "/apis/nosuch.example.com/v1/namespaces/default/things")
    want = load("api/get-unknown-group-404.json")["response"]
    assert status == want["status"] == 404
    assert body == want["bodyText"]
    assert kind.startswith("text/plain")


def test_list_items_carry_no_kind_or_api_version(api):
    create_api_job(api)
    _, body, _ = send(api, "GET", "/apis/batch/v1/namespaces/default/jobs")
    want = load("api/list-jobs-default.json")["response"]["body"]
    assert body["kind"] == want["kind"]
    assert body["apiVersion"] == want["apiVersion"]
    for item, real in zip(body["items"], want["items"], strict=False):
        assert "kind" not in item
        assert "apiVersion" not in item
        assert "kind" not in real


def watch_lines(api, path, seconds):
    parts = urlsplit(api.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=seconds + 5)
    conn.request("GET", path)
    response = conn.getresponse()
    lines = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    conn.close()
    return response.status, lines


def test_an_expired_watch_is_a_200_stream_with_one_error_event(api):
    create_api_job(api)
    api.expire_watches("jobs")
    status, lines = watch_lines(
        api, "/apis/batch/v1/namespaces/default/jobs?watch=1&resourceVersion=1&timeoutSeconds=5", 5
    )
    want = load("api/compaction/13-watch-jobs-from-rv-1-expired-410-in-200-stream.json")
    real = [json.loads(line["raw"]) for line in want["response"]["rawLines"]]
    assert status == want["response"]["status"] == 200
    assert len(lines) == len(real) == 1
    ours, theirs = lines[0], real[0]
    assert ours["type"] == theirs["type"] == "ERROR"
    assert {k: v for k, v in ours["object"].items() if k != "message"} == {
        k: v for k, v in theirs["object"].items() if k != "message"
    }
    assert ours["object"]["message"].startswith("too old resource version: 1 (")


def test_watch_events_and_bookmarks_have_the_real_shape(api):
    _, listed, _ = send(api, "GET", "/apis/batch/v1/namespaces/default/jobs")
    rv = listed["metadata"]["resourceVersion"]
    create_api_job(api)
    status, lines = watch_lines(
        api,
        "/apis/batch/v1/namespaces/default/jobs?watch=1"
        f"&resourceVersion={rv}&allowWatchBookmarks=true"
        "&timeoutSeconds=1",
        1,
    )
    assert status == 200
    kinds = [line["type"] for line in lines]
    assert kinds[0] == "ADDED"
    assert "BOOKMARK" in kinds
    real = load("api/watch-jobs-added-modified-deleted-bookmark.json")["response"]["rawLines"]
    real_bookmark = next(json.loads(x["raw"]) for x in real if '"BOOKMARK"' in x["raw"])
    ours = next(line for line in lines if line["type"] == "BOOKMARK")
    assert set(ours["object"]["metadata"]) == set(real_bookmark["object"]["metadata"])
    assert ours["object"]["kind"] == real_bookmark["object"]["kind"]


def test_a_resuspended_job_keeps_start_time_and_its_template_stays_immutable(api):
    create_api_job(api)
    path = "/apis/batch/v1/namespaces/default/jobs/api-job"
    merge = "application/merge-patch+json"
    send(api, "PATCH", path, {"spec": {"suspend": False}}, merge)
    deadline = time.monotonic() + 5
    while not (api.get("jobs", "api-job", "default").get("status") or {}).get("active"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    send(api, "PATCH", path, {"spec": {"suspend": True}}, merge)
    job = api.get("jobs", "api-job", "default")
    assert job["status"]["startTime"]  # kept, as kube-controller-manager keeps it
    status, body, _ = send(
        api, "PATCH", path, {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}}}}}, merge
    )
    want = load("api/patch-job-merge-patch-nodeselector-after-resuspend.json")["response"]
    assert status == want["status"] == 422
    assert body["reason"] == want["body"]["reason"]
    assert body["message"].startswith('Job.batch "api-job" is invalid: spec.template: ')
    status, _, _ = send(api, "PATCH", path + "/status", {"status": {"startTime": None}}, merge)
    assert status == 200
    status, body, _ = send(
        api, "PATCH", path, {"spec": {"template": {"spec": {"nodeSelector": {"pool": "a"}}}}}, merge
    )
    assert status == 200
    assert body["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "a"}


def test_status_is_dropped_on_create_and_spec_ignored_on_status_writes(api):
    from extender.kube.generators.crds import custom_resource_definitions

    for crd in custom_resource_definitions():
        send(api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    base = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
        "spec": {"cohortName": "a"},
        "status": {"pendingWorkloads": 3},
    }
    status, created, _ = send(api, "POST", base, body)
    assert status == 201
    assert "status" not in created  # as in crd-status-and-table/01
    created["status"] = {"pendingWorkloads": 2}
    created["spec"]["cohortName"] = "b"
    status, updated, _ = send(api, "PUT", f"{base}/cq/status", created)
    assert status == 200
    assert updated["status"]["pendingWorkloads"] == 2
    assert updated["spec"]["cohortName"] == "a"  # as in crd-status-and-table/04
    assert updated["metadata"]["generation"] == created["metadata"]["generation"]


def test_a_finalizer_holds_a_delete_until_it_is_removed(api):
    """As kube-apiserver: DELETE sets deletionTimestamp and keeps the object while finalizers
    remain; no new finalizer may be added; removing the last one completes the deletion."""
    base = "/apis/batch/v1/namespaces/default/jobs"
    body = load("api/create-job-201.json")["request"]["body"]
    body["metadata"]["finalizers"] = ["example.com/hold"]
    status, created, _ = send(api, "POST", base, body)
    assert status == 201
    name = created["metadata"]["name"]

    status, _, _ = send(api, "DELETE", f"{base}/{name}")
    assert status in (200, 202)
    status, held, _ = send(api, "GET", f"{base}/{name}")
    assert status == 200
    assert held["metadata"]["deletionTimestamp"]
    assert held["metadata"]["finalizers"] == ["example.com/hold"]

    status, _, _ = send(
        api,
        "PATCH",
        f"{base}/{name}",
        {"metadata": {"finalizers": ["example.com/hold", "example.com/late"]}},
        "application/merge-patch+json",
    )
    assert status == 422

    status, _, _ = send(
        api,
        "PATCH",
        f"{base}/{name}",
        {"metadata": {"finalizers": []}},
        "application/merge-patch+json",
    )
    assert status == 200
    status, _, _ = send(api, "GET", f"{base}/{name}")
    assert status == 404


def continue_token(token: str) -> dict:
    return json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))


def test_every_page_of_a_list_is_its_first_pages_snapshot(api):
    """kube-apiserver serves a paged list from one snapshot: page 2 carries page 1's
    resourceVersion, and what changed between the pages is not in it."""
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    body = load("api/create-job-201.json")["request"]["body"]
    for name in ("job-b", "job-d", "job-f"):
        assert send(api, "POST", jobs, {**body, "metadata": {"name": name}})[0] == 201
    status, first, _ = send(api, "GET", jobs + "?limit=1")
    real = load("api/list-jobs-limit1-page1.json")["response"]["body"]
    assert status == 200
    assert set(continue_token(first["metadata"]["continue"])) == set(
        continue_token(real["metadata"]["continue"])
    )
    snapshot = first["metadata"]["resourceVersion"]
    assert [i["metadata"]["name"] for i in first["items"]] == ["job-b"]

    assert send(api, "POST", jobs, {**body, "metadata": {"name": "job-c"}})[0] == 201
    assert send(api, "DELETE", jobs + "/job-d")[0] == 200
    patched = {"metadata": {"labels": {"changed": "yes"}}}
    status, _, _ = send(api, "PATCH", jobs + "/job-f", patched, "application/merge-patch+json")
    assert status == 200

    names, labels, token = [], {}, first["metadata"]["continue"]
    while token:
        status, page, _ = send(api, "GET", f"{jobs}?limit=1&continue={token}")
        assert status == 200
        assert page["metadata"]["resourceVersion"] == snapshot
        for item in page["items"]:
            names.append(item["metadata"]["name"])
            labels[item["metadata"]["name"]] = item["metadata"].get("labels") or {}
        token = page["metadata"].get("continue")
    assert names == ["job-d", "job-f"]
    assert "changed" not in labels["job-f"]


def test_a_continue_token_older_than_the_history_is_410_as_after_compaction(api):
    create_api_job(api)
    body = load("api/create-job-201.json")["request"]["body"]
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    assert send(api, "POST", jobs, {**body, "metadata": {"name": "job-z"}})[0] == 201
    _, first, _ = send(api, "GET", jobs + "?limit=1")
    api.expire_watches("jobs")
    status, body, _ = send(api, "GET", f"{jobs}?limit=1&continue={first['metadata']['continue']}")
    want = load("api/compaction/06-list-continue-token-after-compaction-410.json")["response"]
    assert status == want["status"] == 410
    for field in ("kind", "status", "reason", "code", "message"):
        assert body[field] == want["body"][field]


def test_an_object_created_while_a_paged_list_is_read_reaches_the_informer(api, tmp_path):
    """The watch starts from the list's snapshot, so what was created between two pages,
    before the page being read, arrives as a watch event instead of being lost."""
    client = RestClient(
        k8s_config.new_client_from_config(config_file=api.kubeconfig(str(tmp_path / "k"))),
        RequestBudget(1000, 1000),
    )
    body = load("api/create-job-201.json")["request"]["body"]
    for name in ("job-m", "job-n"):
        client.create(r.JOBS, {**body, "metadata": {"name": name}}, "default")
    created: list[str] = []

    def transform(obj: dict) -> dict:
        if not created:  # between page 1 and page 2: a name that sorts before both pages
            created.append("job-a")
            client.create(r.JOBS, {**body, "metadata": {"name": "job-a"}}, "default")
        return obj

    items, version = client.list(r.JOBS, page=1, transform=transform)
    assert sorted(i["metadata"]["name"] for i in items) == ["job-m", "job-n"]
    events = client.watch(r.JOBS, version, timeout_seconds=1)
    added = [obj["metadata"]["name"] for kind, obj in events if kind == "ADDED"]
    assert added == ["job-a"]

"""The visibility API's answers through its handler, on a state built from Kueue's objects by
the builder the controller uses: Kueue's PendingWorkloadsSummary (positions, priority,
LocalQueue name, owners), limit and offset as Kueue's server reads them, both versions,
Kueue's errors, and the discovery documents kube-aggregator and kubectl read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from extender.core.scheduling.builder import StateBuilder
from extender.core.scheduling.cycle import ClusterState
from extender.kube.api import resources as r
from extender.kube.api.snapshot import pending_in
from extender.kube.api.store import Store
from extender.kube.servers.visibility import CachedPositions, VisibilityApi, VisibilityRequest
from extender.kube.servers.visibility.api import go_quote, parse_int64
from tests import yamlc

ROOT = Path(__file__).resolve().parents[3]
GROUP = "/apis/visibility.kueue.x-k8s.io"
QUEUES = list(
    yamlc.safe_load_all((ROOT / "examples" / "quickstart" / "01-queues.yaml").read_text())
)


def workload(name, *, queue="user-queue", namespace="default", priority=0, second=0, cpu="3"):
    """A Workload as Kueue's job controller makes one for a Job (v1beta2)."""
    job = name.removeprefix("job-")
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": f"2023-12-05T15:42:{second:02d}Z",
            "labels": {"kueue.x-k8s.io/job-uid": f"job-uid-{job}"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job,
                    "uid": f"job-uid-{job}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "busybox",
                                    "resources": {"requests": {"cpu": cpu}},
                                }
                            ]
                        }
                    },
                }
            ],
        },
    }


def team_b_queue():
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
            "metadata": {"namespace": "team-b", "name": "other"},
            "spec": {"clusterQueue": "cluster-queue"}}  # fmt: skip


WORKLOADS = [
    workload("job-sample-job-jrjfr-8d56e", second=3),
    workload("job-sample-job-jg9dw-5f1a3", second=4),
    workload("job-urgent-1a2b3", namespace="team-b", queue="other", priority=100, second=9),
    workload("job-sample-job-t9b8m-4e770", second=5),
    workload("job-later-9f8e7", namespace="team-b", queue="other", second=7),
]


@pytest.fixture
def objects():
    return {f"{w['metadata']['namespace']}/{w['metadata']['name']}": w for w in WORKLOADS}


@pytest.fixture
def state(objects):
    s = ClusterState()
    StateBuilder(s).build([*QUEUES, team_b_queue(), *objects.values()], now=0.0)
    s.queues.keep_positions()
    return s


@pytest.fixture
def api(state, objects):
    return VisibilityApi(lambda: state.queues.positions, objects.get)


def get(api, target, accept="application/json"):
    response = api.handle(VisibilityRequest.of("GET", target, user="alice", accept=accept))
    return response, json.loads(response.body) if response.content_type.startswith(
        "application/json"
    ) else response.body.decode()


def names(body):
    return [i["metadata"]["name"] for i in body["items"]]


def test_the_cluster_queue_answer_is_kueues_summary(api):
    response, body = get(api, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads")
    assert response.status == 200
    assert response.content_type == "application/json"
    assert list(body) == ["kind", "apiVersion", "metadata", "items"]
    assert body["kind"] == "PendingWorkloadsSummary"
    assert body["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta2"
    assert body["metadata"] == {}
    assert body["items"][0] == {
        "metadata": {
            "name": "job-urgent-1a2b3",
            "namespace": "team-b",
            "creationTimestamp": "2023-12-05T15:42:09Z",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "urgent-1a2b3",
                    "uid": "job-uid-urgent-1a2b3",
                }
            ],
        },
        "priority": 100,
        "localQueueName": "other",
        "positionInClusterQueue": 0,
        "positionInLocalQueue": 0,
    }
    assert [(i["metadata"]["name"], i["localQueueName"], i["positionInClusterQueue"],
             i["positionInLocalQueue"]) for i in body["items"]] == [
        ("job-urgent-1a2b3", "other", 0, 0),
        ("job-sample-job-jrjfr-8d56e", "user-queue", 1, 0),
        ("job-sample-job-jg9dw-5f1a3", "user-queue", 2, 1),
        ("job-sample-job-t9b8m-4e770", "user-queue", 3, 2),
        ("job-later-9f8e7", "other", 4, 1),
    ]  # fmt: skip


def test_the_documented_page_limit_1_offset_1(api):
    """Kueue's "Pending workloads on-demand" page: ?limit=1&offset=1, for both queues."""
    _, body = get(
        api, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads?limit=1&offset=1"
    )
    assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
            for i in body["items"]] == [("job-sample-job-jrjfr-8d56e", 1, 0)]  # fmt: skip
    _, body = get(
        api,
        f"{GROUP}/v1beta2/namespaces/default/localqueues/user-queue/pendingworkloads?limit=1&offset=1",
    )
    assert [(i["metadata"]["name"], i["positionInClusterQueue"], i["positionInLocalQueue"])
            for i in body["items"]] == [("job-sample-job-jg9dw-5f1a3", 2, 1)]  # fmt: skip


def test_a_local_queue_lists_only_its_own_with_both_positions(api):
    _, body = get(api, f"{GROUP}/v1beta2/namespaces/team-b/localqueues/other/pendingworkloads")
    assert [(i["metadata"]["name"], i["metadata"]["namespace"], i["positionInClusterQueue"],
             i["positionInLocalQueue"]) for i in body["items"]] == [
        ("job-urgent-1a2b3", "team-b", 0, 0),
        ("job-later-9f8e7", "team-b", 4, 1),
    ]  # fmt: skip


def test_v1beta1_answers_the_same_under_its_own_version(api):
    _, beta2 = get(api, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads")
    _, beta1 = get(api, f"{GROUP}/v1beta1/clusterqueues/cluster-queue/pendingworkloads")
    assert beta1["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    assert beta1["items"] == beta2["items"]
    _, lq = get(api, f"{GROUP}/v1beta1/namespaces/team-b/localqueues/other/pendingworkloads")
    assert lq["apiVersion"] == "visibility.kueue.x-k8s.io/v1beta1"
    assert names(lq) == ["job-urgent-1a2b3", "job-later-9f8e7"]


def test_the_answer_is_what_kubectl_tower_queue_lists(api, state):
    """Both come from the same code: the CLI's `pending_in` and the API's handler."""
    _, body = get(api, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads")
    cli = [(p.workload.name, p.position_in_cluster_queue, p.position_in_local_queue)
           for p in pending_in(state, "cluster-queue")]  # fmt: skip
    assert cli == [(i["metadata"]["name"], i["positionInClusterQueue"],
                    i["positionInLocalQueue"]) for i in body["items"]]  # fmt: skip


ALL = ["job-urgent-1a2b3", "job-sample-job-jrjfr-8d56e", "job-sample-job-jg9dw-5f1a3",
       "job-sample-job-t9b8m-4e770", "job-later-9f8e7"]  # fmt: skip


@pytest.mark.parametrize(
    ("query", "want"),
    [
        ("", ALL),
        ("?limit=2", ALL[:2]),
        ("?offset=3", ALL[3:]),
        ("?limit=0", ALL),  # 0 is defaulted to 1000 after decoding, as Kueue's defaulter does
        ("?limit=-1", []),  # bounded to 0
        ("?offset=-4&limit=1", ALL[:1]),  # bounded to 0
        ("?offset=5", []),
        ("?limit=%2B2&offset=001", ALL[1:3]),  # strconv.ParseInt reads a sign and zeros
        ("?limit=2&limit=abc", ALL[:2]),  # the first value counts
        ("?limit=1000000000", ALL),  # at most 100,000
        ("?pretty=true", ALL),
    ],
    ids=["defaults", "limit", "offset", "limit-0", "limit-negative", "offset-negative",
         "past-the-end", "sign-and-zeros", "first-value", "huge-limit", "other-parameter"],
)  # fmt: skip
def test_limit_and_offset_as_kueues_server_reads_them(api, query, want):
    response, body = get(
        api, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads{query}"
    )
    assert response.status == 200
    assert names(body) == want


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("?limit=abc", 'strconv.ParseInt: parsing "abc": invalid syntax'),
        ("?limit=", 'strconv.ParseInt: parsing "": invalid syntax'),
        ("?offset=1.5", 'strconv.ParseInt: parsing "1.5": invalid syntax'),
        ("?offset=%201", 'strconv.ParseInt: parsing " 1": invalid syntax'),
        ("?limit=+2", 'strconv.ParseInt: parsing " 2": invalid syntax'),  # "+" is a space
        ("?limit=1_000", 'strconv.ParseInt: parsing "1_000": invalid syntax'),
        ("?offset=9223372036854775808",
         'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
    ],
    ids=["word", "empty", "decimal", "space", "plus-is-space", "underscore", "past-int64"],
)  # fmt: skip
def test_a_limit_or_offset_go_cannot_read_is_a_bad_request(api, query, message):
    for path in ("clusterqueues/cluster-queue", "namespaces/default/localqueues/user-queue"):
        response, body = get(api, f"{GROUP}/v1beta1/{path}/pendingworkloads{query}")
        assert response.status == 400
        assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Failure", "message": message, "reason": "BadRequest",
                        "code": 400}  # fmt: skip


def test_an_unknown_queue_is_kueues_not_found(api):
    response, body = get(api, f"{GROUP}/v1beta2/clusterqueues/nope/pendingworkloads")
    assert response.status == 404
    assert body == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'clusterqueue.visibility.kueue.x-k8s.io "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "group": "visibility.kueue.x-k8s.io", "kind": "clusterqueue"},
        "code": 404,
    }  # fmt: skip
    for path in (
        "namespaces/default/localqueues/nope",
        "namespaces/elsewhere/localqueues/user-queue",
    ):
        response, body = get(api, f"{GROUP}/v1beta2/{path}/pendingworkloads")
        assert response.status == 404
        name = path.rsplit("/", 1)[1]
        assert body["message"] == f'localqueue.visibility.kueue.x-k8s.io "{name}" not found'
        assert body["details"] == {"name": name, "group": "visibility.kueue.x-k8s.io",
                                   "kind": "localqueue"}  # fmt: skip


def test_other_paths_and_methods_answer_as_the_generic_api_server_does(api):
    response, body = get(api, f"{GROUP}/v1beta2/clusterqueues/cluster-queue")
    assert (response.status, body["reason"], body["details"]) == (404, "NotFound", {})
    assert body["message"] == "the server could not find the requested resource"
    for target in ("/apis/other.example.com", f"{GROUP}/v1", "/healthz"):
        response, text = get(api, target)
        assert (response.status, text) == (404, "404 page not found\n")
        assert response.content_type == "text/plain; charset=utf-8"
    posted = api.handle(
        VisibilityRequest.of(
            "POST", f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads"
        )
    )
    assert posted.status == 405
    assert json.loads(posted.body)["reason"] == "MethodNotAllowed"


def test_before_the_queues_are_built_the_answer_is_service_unavailable(objects):
    api = VisibilityApi(lambda: None, objects.get)
    response, body = get(api, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads")
    assert (response.status, body["reason"]) == (503, "ServiceUnavailable")
    response, _ = get(api, f"{GROUP}/v1beta2")  # discovery needs no queues
    assert response.status == 200


def test_a_failure_inside_is_a_500_status_and_no_traceback(objects):
    def broken():
        raise RuntimeError("boom")

    seen = []
    api = VisibilityApi(broken, objects.get, observe=lambda *a: seen.append(a[:2]))
    response, body = get(api, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads")
    assert (response.status, body["reason"]) == (500, "InternalError")
    assert "boom" not in body["message"]
    assert seen == [("clusterqueues", 500)]


def test_a_workload_gone_from_the_cache_meanwhile_keeps_what_the_core_knows(state):
    api = VisibilityApi(lambda: state.queues.positions, {}.get)
    _, body = get(api, f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads?limit=1")
    assert body["items"][0]["metadata"] == {
        "name": "job-urgent-1a2b3",
        "namespace": "team-b",
        "creationTimestamp": "2023-12-05T15:42:09Z",
    }


# ----- discovery ------------------------------------------------------------------------------


RESOURCES = [
    {"name": "clusterqueues", "singularName": "clusterqueue", "namespaced": False,
     "kind": "PendingWorkloadsSummary", "verbs": []},
    {"name": "clusterqueues/pendingworkloads", "singularName": "", "namespaced": False,
     "kind": "PendingWorkloadsSummary", "verbs": ["get"]},
    {"name": "localqueues", "singularName": "localqueue", "namespaced": True,
     "kind": "PendingWorkloadsSummary", "verbs": []},
    {"name": "localqueues/pendingworkloads", "singularName": "", "namespaced": True,
     "kind": "PendingWorkloadsSummary", "verbs": ["get"]},
]  # fmt: skip


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_each_version_lists_its_resources_as_kubectl_and_the_aggregator_read_them(api, version):
    response, body = get(api, f"{GROUP}/{version}")
    assert response.status == 200
    assert body == {"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": f"visibility.kueue.x-k8s.io/{version}",
                    "resources": RESOURCES}  # fmt: skip


def test_the_group_prefers_v1beta2(api):
    versions = [{"groupVersion": f"visibility.kueue.x-k8s.io/{v}", "version": v}
                for v in ("v1beta2", "v1beta1")]  # fmt: skip
    _, group = get(api, GROUP)
    assert group == {"kind": "APIGroup", "apiVersion": "v1", "name": "visibility.kueue.x-k8s.io",
                     "versions": versions, "preferredVersion": versions[0]}  # fmt: skip
    _, groups = get(api, "/apis")
    assert groups == {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
        {"name": "visibility.kueue.x-k8s.io", "versions": versions,
         "preferredVersion": versions[0]}]}  # fmt: skip


# What client-go 1.30+ and kube-aggregator send first (shared/fixtures/real-apiserver/api/
# discovery/aggregated-v2-apis.json).
AGGREGATED_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


def test_aggregated_discovery_is_served_to_whoever_asks_for_it(api):
    response, body = get(api, "/apis", accept=AGGREGATED_ACCEPT)
    assert response.content_type == (
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    )
    assert ("Vary", "Accept") in response.headers
    assert (body["kind"], body["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    [group] = body["items"]
    assert group["metadata"] == {"name": "visibility.kueue.x-k8s.io"}
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    kind = {"group": "", "version": "", "kind": "PendingWorkloadsSummary"}
    assert group["versions"][0] == {
        "version": "v1beta2",
        "resources": [
            {"resource": "clusterqueues", "responseKind": kind, "scope": "Cluster",
             "singularResource": "clusterqueue", "verbs": [],
             "subresources": [{"subresource": "pendingworkloads", "responseKind": kind,
                               "verbs": ["get"]}]},
            {"resource": "localqueues", "responseKind": kind, "scope": "Namespaced",
             "singularResource": "localqueue", "verbs": [],
             "subresources": [{"subresource": "pendingworkloads", "responseKind": kind,
                               "verbs": ["get"]}]},
        ],
        "freshness": "Current",
    }  # fmt: skip
    older, body = get(api, "/apis", accept=AGGREGATED_ACCEPT.split(",", 1)[1])
    assert body["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    assert "v=v2beta1" in older.content_type
    _, plain = get(api, "/apis", accept="application/json, */*")
    assert plain["kind"] == "APIGroupList"


def test_go_quoting_and_parsing_as_strconv():
    assert go_quote('a"b\\c\n\x01é') == '"a\\"b\\\\c\\n\\x01é"'
    assert parse_int64("-9223372036854775808") == -(2**63)
    with pytest.raises(ValueError, match="value out of range"):
        parse_int64("-9223372036854775809")


# ----- a standby's answers --------------------------------------------------------------------


def test_a_standby_answers_from_its_caches_and_reads_them_again_in_the_background(objects):
    """The first answer waits for a read; later ones get the last read at once, and a new
    read starts once `interval` (or five times the last read's time) has passed."""
    store = Store()
    for resource in (r.RESOURCE_FLAVORS, r.CLUSTER_QUEUES, r.LOCAL_QUEUES):
        kind = resource.kind
        store.register(resource)
        store.replace(resource, [o for o in [*QUEUES, team_b_queue()] if o["kind"] == kind])
    store.register(r.WORKLOADS)
    now = [100.0]
    spawned = []
    source = CachedPositions(store, interval=2.0, monotonic=lambda: now[0], spawn=spawned.append)
    assert source() is None  # the Workloads were never listed: 503, not an empty queue
    store.replace(r.WORKLOADS, WORKLOADS_LISTED[:2])
    api = VisibilityApi(source, objects.get)
    path = f"{GROUP}/v1beta2/clusterqueues/cluster-queue/pendingworkloads"
    assert len(get(api, path)[1]["items"]) == 2
    store.replace(r.WORKLOADS, WORKLOADS_LISTED)
    now[0] += 1.0
    assert len(get(api, path)[1]["items"]) == 2
    assert spawned == []  # not due yet
    now[0] += 1.5
    assert len(get(api, path)[1]["items"]) == 2  # due: the read starts, the old answer now
    assert len(spawned) == 1
    get(api, path)
    assert len(spawned) == 1  # one read at a time
    spawned.pop()()  # the read runs
    _, body = get(api, path)
    assert names(body) == ALL
    assert source() is source()


WORKLOADS_LISTED = [
    {k: v for k, v in w.items() if k not in ("apiVersion", "kind")} for w in WORKLOADS
]  # as a list answers them, without kind


# ----- the documented pages ---------------------------------------------------------------


def test_the_pages_docs_visibility_md_shows_are_what_the_handler_answers():
    """docs/visibility.md shows Kueue's two kubectl get --raw pages; the handler, given the
    Workloads of the first, answers both byte for byte (once formatted)."""
    text = (ROOT / "docs" / "visibility.md").read_text()
    shown = []
    for block in re.findall(r"```text\n(.*?)```", text, re.DOTALL):
        first, _, rest = block.partition("\n")
        if first.startswith("$ kubectl get --raw "):
            shown.append((first.split('"')[1], json.loads(rest)))
    assert len(shown) == 2
    objects = {}
    for uid, item in enumerate(shown[0][1]["items"]):  # uids in the order shown (one second)
        meta = item["metadata"]
        owners = [{**o, "controller": True} for o in meta["ownerReferences"]]
        obj = workload(meta["name"], queue=item["localQueueName"], priority=item["priority"])
        obj["metadata"].update(uid=f"uid-{uid}", creationTimestamp=meta["creationTimestamp"],
                               ownerReferences=owners)  # fmt: skip
        objects[f"{meta['namespace']}/{meta['name']}"] = obj
    s = ClusterState()
    StateBuilder(s).build([*QUEUES, *objects.values()], now=0.0)
    s.queues.keep_positions()
    api = VisibilityApi(lambda: s.queues.positions, objects.get)
    for target, body in shown:
        assert get(api, target)[1] == body, target

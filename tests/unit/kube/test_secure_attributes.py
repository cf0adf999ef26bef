"""What a request asks, as kube-apiserver's RequestInfo resolves it for authorization."""

from __future__ import annotations

import pytest

from extender.kube.servers.secure.attributes import Attributes, resolve

VIS = "visibility.kueue.x-k8s.io"
CASES = {
    "a scrape is the non-resource URL /metrics, verb get": (
        "GET", "/metrics", {},
        Attributes("get", "/metrics"),
    ),
    "a path outside /api and /apis keeps the method as its verb": (
        "POST", "/dashboard/api/state", {},
        Attributes("post", "/dashboard/api/state"),
    ),
    "discovery of a group is not a resource": (
        "GET", f"/apis/{VIS}/v1beta2", {},
        Attributes("get", f"/apis/{VIS}/v1beta2"),
    ),
    "/api/v1 alone is not a resource": ("GET", "/api/v1", {}, Attributes("get", "/api/v1")),
    "Kueue's documented command: a ClusterQueue's pending workloads": (
        "GET", f"/apis/{VIS}/v1beta2/clusterqueues/cluster-queue/pendingworkloads", {},
        Attributes("get", f"/apis/{VIS}/v1beta2/clusterqueues/cluster-queue/pendingworkloads",
                   True, VIS, "v1beta2", "", "clusterqueues", "pendingworkloads", "cluster-queue"),
    ),
    "a LocalQueue's pending workloads, in its namespace": (
        "GET", f"/apis/{VIS}/v1beta2/namespaces/team-a/localqueues/user-queue/pendingworkloads",
        {"limit": ["10"], "offset": ["20"]},
        Attributes("get",
                   f"/apis/{VIS}/v1beta2/namespaces/team-a/localqueues/user-queue/pendingworkloads",
                   True, VIS, "v1beta2", "team-a", "localqueues", "pendingworkloads", "user-queue"),
    ),
    "a GET without a name is a list": (
        "GET", "/api/v1/namespaces/default/pods", {},
        Attributes("list", "/api/v1/namespaces/default/pods", True, "", "v1", "default", "pods"),
    ),
    "watch=true makes it a watch": (
        "GET", "/api/v1/pods", {"watch": ["true"]},
        Attributes("watch", "/api/v1/pods", True, "", "v1", "", "pods"),
    ),
    "watch=1 too, as Go's ParseBool reads it": (
        "GET", "/api/v1/pods", {"watch": ["1"]},
        Attributes("watch", "/api/v1/pods", True, "", "v1", "", "pods"),
    ),
    "watch=false stays a list": (
        "GET", "/api/v1/pods", {"watch": ["false"]},
        Attributes("list", "/api/v1/pods", True, "", "v1", "", "pods"),
    ),
    "a watch value Go cannot parse still counts as a watch": (
        "GET", "/api/v1/pods", {"watch": ["yes"]},
        Attributes("watch", "/api/v1/pods", True, "", "v1", "", "pods"),
    ),
    "the old /watch/ path prefix is the verb": (
        "GET", "/api/v1/watch/namespaces/default/pods", {},
        Attributes("watch", "/api/v1/watch/namespaces/default/pods", True, "", "v1", "default",
                   "pods"),
    ),
    "proxy takes no subresource": (
        "GET", "/api/v1/proxy/namespaces/default/pods/p/extra", {},
        Attributes("proxy", "/api/v1/proxy/namespaces/default/pods/p/extra", True, "", "v1",
                   "default", "pods", "", "p"),
    ),
    "a fieldSelector on metadata.name names the object listed": (
        "GET", "/api/v1/namespaces/default/pods", {"fieldSelector": ["metadata.name=p1"]},
        Attributes("list", "/api/v1/namespaces/default/pods", True, "", "v1", "default", "pods",
                   "", "p1"),
    ),
    "... but not with !=": (
        "GET", "/api/v1/namespaces/default/pods", {"fieldSelector": ["metadata.name!=p1"]},
        Attributes("list", "/api/v1/namespaces/default/pods", True, "", "v1", "default", "pods"),
    ),
    "a namespace's status is the namespace's subresource": (
        "PUT", "/api/v1/namespaces/team-a/status", {},
        Attributes("update", "/api/v1/namespaces/team-a/status", True, "", "v1", "team-a",
                   "namespaces", "status", "team-a"),
    ),
    "the namespaces collection": (
        "GET", "/api/v1/namespaces", {},
        Attributes("list", "/api/v1/namespaces", True, "", "v1", "", "namespaces"),
    ),
    "POST creates, PATCH patches, in a group": (
        "PATCH", "/apis/batch/v1/namespaces/default/jobs/j/status", {},
        Attributes("patch", "/apis/batch/v1/namespaces/default/jobs/j/status", True, "batch",
                   "v1", "default", "jobs", "status", "j"),
    ),
    "DELETE without a name deletes a collection": (
        "DELETE", "/apis/batch/v1/namespaces/default/jobs", {},
        Attributes("deletecollection", "/apis/batch/v1/namespaces/default/jobs", True, "batch",
                   "v1", "default", "jobs"),
    ),
    "HEAD is a get": (
        "HEAD", "/api/v1/namespaces/default/pods/p", {},
        Attributes("get", "/api/v1/namespaces/default/pods/p", True, "", "v1", "default", "pods",
                   "", "p"),
    ),
}  # fmt: skip


@pytest.mark.parametrize(("method", "path", "query", "want"), CASES.values(), ids=CASES.keys())
def test_resolve(method, path, query, want):
    assert resolve(method, path, query) == want


FORBIDDEN = {
    "a path, as kube-apiserver worded it (tests/data/delegated-auth/apiserver-403-nonresource)": (
        resolve("GET", "/metrics", {}),
        'forbidden: User "system:serviceaccount:metrics-demo:nobody" cannot get path "/metrics"',
        {},
    ),
    "a namespaced subresource, as kube-apiserver worded it (apiserver-403-resource-subresource)": (
        resolve("GET", "/api/v1/namespaces/metrics-demo/pods/p/log", {}),
        'pods "p" is forbidden: User "system:serviceaccount:metrics-demo:nobody" cannot get '
        'resource "pods/log" in API group "" in the namespace "metrics-demo"',
        {"name": "p", "kind": "pods"},
    ),
    "a cluster-scoped resource in a group": (
        resolve("GET", f"/apis/{VIS}/v1beta2/clusterqueues/cq/pendingworkloads", {}),
        f'clusterqueues.{VIS} "cq" is forbidden: User "system:serviceaccount:metrics-demo:nobody" '
        f'cannot get resource "clusterqueues/pendingworkloads" in API group "{VIS}" at the '
        "cluster scope",
        {"name": "cq", "group": VIS, "kind": "clusterqueues"},
    ),
}


@pytest.mark.parametrize(
    ("attributes", "message", "details"), FORBIDDEN.values(), ids=FORBIDDEN.keys()
)
def test_forbidden_is_worded_as_kube_apiserver_words_it(attributes, message, details):
    assert attributes.forbidden_message("system:serviceaccount:metrics-demo:nobody") == message
    assert attributes.forbidden_details() == details


def test_a_path_that_reads_as_html_is_escaped_and_the_reason_follows():
    attributes = resolve("GET", "/<b>", {})
    assert attributes.forbidden_message("u", "no RBAC rule") == (
        'forbidden: User "u" cannot get path "/&lt;b&gt;": no RBAC rule'
    )


def test_the_review_fields_drop_what_is_empty():
    assert resolve("GET", "/metrics", {}).review_fields() == {
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"}
    }
    assert resolve("GET", f"/apis/{VIS}/v1beta2/clusterqueues", {}).review_fields() == {
        "resourceAttributes": {
            "verb": "list", "group": VIS, "version": "v1beta2", "resource": "clusterqueues"
        }
    }  # fmt: skip

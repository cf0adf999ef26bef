"""A job in a namespace being deleted, through the API double: kube-apiserver refuses its
Workload (403, NamespaceTerminating, as recorded in tests/data/namespace-terminating/), and the
controller asks once per change of the job instead of retrying a create that cannot succeed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from extender.kube.api import resources as r
from extender.kube.api.client import ApiError
from tests.controller.conftest import eventually
from tests.controller.test_seed import CQ, FLAVOR

RECORDED = Path(__file__).resolve().parents[1] / "data" / "namespace-terminating"
NS = "doomed"


def workload_posts(cluster) -> int:
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"
    return sum(1 for method, p, _ in list(cluster.api.requests) if method == "POST" and p == path)


def terminating(cluster) -> None:
    """The namespace deleted while a finalizer holds it, as content held by finalizers keeps a
    real one Terminating."""
    cluster.admin.patch(r.NAMESPACES, NS, {"metadata": {"finalizers": ["example.com/hold"]}})
    cluster.admin.delete(r.NAMESPACES, NS)


def test_the_double_refuses_a_create_in_a_terminating_namespace_as_kube_apiserver_does(cluster):
    cluster.admin.create(r.NAMESPACES, {"metadata": {"name": "lead-term"}})
    cluster.admin.patch(r.NAMESPACES, "lead-term", {"metadata": {"finalizers": ["example.com/h"]}})
    cluster.admin.delete(r.NAMESPACES, "lead-term")
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                }
            ],
        },
    }
    with pytest.raises(ApiError) as refused:
        cluster.admin.create(r.WORKLOADS, body, "lead-term")
    assert refused.value.status == 403
    assert refused.value.namespace_terminating
    assert refused.value.body == json.loads((RECORDED / "create-workload.403.json").read_text())


def test_a_job_in_a_terminating_namespace_is_not_retried_in_a_loop(cluster, start_controller):
    cluster.admin.create(r.NAMESPACES, {"metadata": {"name": NS}})
    cluster.apply(FLAVOR, CQ)
    queue = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "user-queue", "namespace": NS},
             "spec": {"clusterQueue": CQ["metadata"]["name"]}}  # fmt: skip
    cluster.apply(queue)
    cluster.job("late", "1", namespace=NS)  # suspended by the webhook, no Workload yet
    terminating(cluster)
    start_controller()
    eventually(lambda: workload_posts(cluster) >= 1, what="the Workload asked for")
    time.sleep(3)  # a retry with backoff would have asked again several times by now
    assert workload_posts(cluster) == 1
    assert cluster.get("jobs", "late", NS)["spec"]["suspend"] is True

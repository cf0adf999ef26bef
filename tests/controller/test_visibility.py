"""The visibility API answered from the controller's own queues, against the API double: the
leader's live positions as Jobs queue, are admitted and finish; a standby's answer from its
caches; and `kubectl tower`'s snapshot, which lists the same through the same code."""

from __future__ import annotations

import json
import time
from pathlib import Path

from extender.kube.api.resources import WORKLOADS
from extender.kube.api.snapshot import load, pending_in
from extender.kube.servers.visibility import (
    CachedPositions,
    VisibilityApi,
    VisibilityRequest,
    leader_or_cached,
)
from tests import yamlc
from tests.controller.conftest import eventually
from tests.controller.test_seed import complete_job

ROOT = Path(__file__).resolve().parents[2]
QUEUES = list(
    yamlc.safe_load_all((ROOT / "examples" / "quickstart" / "01-queues.yaml").read_text())
)
CQ_PATH = "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cluster-queue/pendingworkloads"
LQ_PATH = (
    "/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/default/localqueues/user-queue/"
    "pendingworkloads"
)


def answer(api: VisibilityApi, target: str) -> dict:
    response = api.handle(VisibilityRequest.of("GET", target, user="alice"))
    assert response.status == 200, response.body
    return json.loads(response.body)


def lines(body: dict) -> list[tuple[str, int, int]]:
    return [
        (i["metadata"]["ownerReferences"][0]["name"], i["positionInClusterQueue"],
         i["positionInLocalQueue"])
        for i in body["items"]
    ]  # fmt: skip


def test_the_leaders_answers_follow_its_queues_and_a_standby_answers_from_its_caches(
    cluster, start_controller
):
    cluster.apply(*QUEUES)
    running = start_controller()
    store = running.cache.store
    api = VisibilityApi(lambda: running.controller.positions, lambda key: store.get(WORKLOADS, key))
    cluster.job("first", "3", duration="600s")
    eventually(lambda: cluster.get("jobs", "first", "default")["spec"]["suspend"] is False)
    jobs = {name: cluster.job(name, "3", duration="600s") for name in ("second", "third", "fourth")}
    eventually(lambda: len(answer(api, CQ_PATH)["items"]) == 3, what="three pending")

    body = answer(api, CQ_PATH)
    assert {line[0] for line in lines(body)} == {"second", "third", "fourth"}
    assert [line[1:] for line in lines(body)] == [(0, 0), (1, 1), (2, 2)]
    item = body["items"][0]
    owner = item["metadata"]["ownerReferences"][0]["name"]
    workload = cluster.workload_of(jobs[owner])
    assert item["metadata"] == {
        "name": workload["metadata"]["name"],
        "namespace": "default",
        "creationTimestamp": workload["metadata"]["creationTimestamp"],
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": owner,
                             "uid": jobs[owner]["metadata"]["uid"]}],
    }  # fmt: skip
    assert (item["priority"], item["localQueueName"]) == (0, "user-queue")
    order = [line[0] for line in lines(body)]
    assert lines(answer(api, LQ_PATH)) == lines(body)

    # `kubectl tower`'s snapshot reads the cluster and lists the same, with the same code.
    snapshot = load(cluster.controller_client(), time.time())
    cli = [(p.workload.owner_name, p.position_in_cluster_queue, p.position_in_local_queue)
           for p in pending_in(snapshot.state, "cluster-queue")]  # fmt: skip
    assert cli == lines(body)

    # A standby replica answers the same from its caches.
    standby = VisibilityApi(
        leader_or_cached(lambda: None, CachedPositions(store)),
        lambda key: store.get(WORKLOADS, key),
    )
    assert answer(standby, CQ_PATH) == body

    # The first finishes: the head the list named is the one admitted; the others move up.
    complete_job(cluster, "first")
    eventually(lambda: len(answer(api, CQ_PATH)["items"]) == 2, what="the head admitted")
    assert lines(answer(api, CQ_PATH)) == [(order[1], 0, 0), (order[2], 1, 1)]
    assert lines(answer(api, CQ_PATH + "?offset=1")) == [(order[2], 1, 1)]

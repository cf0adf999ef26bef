"""`kubectl tower queue -n NS` through Kueue's visibility API, and without it.

The double serves no aggregated API, so each test that wants one serves a minimal
`visibility.kueue.x-k8s.io/v1beta2` itself (discovery and a LocalQueue's pendingworkloads,
in Kueue's order, with RBAC for the users the double knows) on the double's `routes` hook.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from extender.kube.api import resources as r
from extender.kube.plugin.cli import main
from tests import yamlc

ROOT = Path(__file__).resolve().parents[2]
FLAVOR, CQ, LQ = yamlc.safe_load_all(
    (ROOT / "examples" / "quickstart" / "01-queues.yaml").read_text()
)
LATER = time.time() + 10 * 86400 + 12 * 3600  # every AGE is then "10d"
GROUP = "visibility.kueue.x-k8s.io"
PREFIX = f"/apis/{GROUP}/v1beta2"
ALICE = [  # a batch user's rights in namespace default, as Kueue's batch-user role grants
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["localqueues", "workloads"],
     "verbs": ["get", "list"], "namespaces": ["default"]},
    {"apiGroups": [GROUP], "resources": ["localqueues/pendingworkloads"], "verbs": ["get"],
     "namespaces": ["default"]},
]  # fmt: skip


def status(code: int, reason: str, message: str, details: Any = None) -> dict[str, Any]:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip
    return body | ({"details": details} if details else {})


def serve_visibility(api: Any, *, broken: int | None = None) -> None:
    """A minimal visibility API on the double (`broken`: the status every call gets, as from
    an APIService whose backend is down)."""

    def pending(namespace: str, queue: str) -> list[dict[str, Any]]:
        out = []
        for wl in api.list("workloads", namespace):
            conditions = (wl.get("status") or {}).get("conditions") or []
            reserved = any(c["type"] == "QuotaReserved" and c["status"] == "True"
                           for c in conditions)  # fmt: skip
            if wl["spec"]["queueName"] == queue and not reserved:
                out.append(wl)
        return out

    def route(method: str, path: str, query: dict[str, str], user: str) -> Any:
        if method != "GET" or not path.startswith(PREFIX):
            return None
        if broken:
            return broken, status(broken, "ServiceUnavailable", "the server is currently unable "
                                  "to handle the request")  # fmt: skip
        if path == PREFIX:
            names = ["clusterqueues", "clusterqueues/pendingworkloads", "localqueues",
                     "localqueues/pendingworkloads"]  # fmt: skip
            return 200, {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": f"{GROUP}/v1beta2",
                "resources": [
                    {
                        "name": n,
                        "namespaced": n.startswith("local"),
                        "kind": "LocalQueue",
                        "verbs": ["get"],
                    }
                    for n in names
                ],
            }
        match = re.fullmatch(f"{PREFIX}/namespaces/([^/]+)/localqueues/([^/]+)/pendingworkloads",
                             path)  # fmt: skip
        if match is None:
            return None
        namespace, queue = match.groups()
        if not api.permits(user, GROUP, "localqueues/pendingworkloads", "get", namespace):
            return 403, status(
                403,
                "Forbidden",
                f'localqueues.{GROUP} "{queue}" is forbidden: '
                f'User "{user}" cannot get resource "localqueues/pendingworkloads"'
                f' in API group "{GROUP}" in the namespace "{namespace}"',
            )
        lq = api.get("localqueues", queue, namespace)
        if lq is None:
            return 404, status(
                404,
                "NotFound",
                f'localqueue.{GROUP} "{queue}" not found',
                {"name": queue, "group": GROUP, "kind": "localqueue"},
            )
        order = sorted(pending(namespace, queue),
                       key=lambda w: (-w["spec"].get("priority", 0),
                                      w["metadata"]["creationTimestamp"]))  # fmt: skip
        offset, limit = int(query.get("offset", 0)), int(query.get("limit", 1000))
        items = [
            {"metadata": {"name": w["metadata"]["name"], "namespace": namespace,
                          "creationTimestamp": w["metadata"]["creationTimestamp"],
                          "ownerReferences": w["metadata"].get("ownerReferences", [])},
             "priority": w["spec"].get("priority", 0), "localQueueName": queue,
             "positionInClusterQueue": i, "positionInLocalQueue": i}
            for i, w in enumerate(order)
        ][offset : offset + limit]  # fmt: skip
        return 200, {"kind": "PendingWorkloadsSummary", "apiVersion": f"{GROUP}/v1beta2",
                     "metadata": {}, "items": items}  # fmt: skip

    api.routes.append(route)


def workload(name: str, priority: int, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": name.removeprefix("wl-"),
             "uid": f"uid-{name}", "controller": True}]},
        "spec": {"queueName": "user-queue", "priority": priority, "podSets": [
            {"name": "main", "count": 1, "template": {"spec": {"restartPolicy": "Never",
             "containers": [{"name": "c", "image": "busybox:1.36",
                             "resources": {"requests": {"cpu": cpu}}}]}}}]},
    }  # fmt: skip


@pytest.fixture
def queued(cluster) -> Any:
    """The quick-start's queues and three pending Workloads of different priorities."""
    cluster.apply(FLAVOR, CQ, LQ)
    for name, priority, cpu in (("wl-low", 1, "1"), ("wl-high", 100, "2"), ("wl-mid", 50, "500m")):
        cluster.admin.create(r.WORKLOADS, workload(name, priority, cpu), "default")
    return cluster


def tower(capsys: Any, config: str, *args: str) -> tuple[int, str, str]:
    code = main(["--kubeconfig", config, *args], clock=lambda: LATER)
    out, err = capsys.readouterr()
    return code, out, err


EXPECTED = [
    "POSITION              CLUSTERQUEUE    WORKLOAD          JOB        PRIORITY   AGE   REQUESTS   "
    "REASON",
    "1 (1 in user-queue)   cluster-queue   default/wl-high   Job/high   100        10d   cpu=2",
    "2 (2 in user-queue)   cluster-queue   default/wl-mid    Job/mid    50         10d   cpu=500m",
    "3 (3 in user-queue)   cluster-queue   default/wl-low    Job/low    1          10d   cpu=1",
]


def test_queue_in_a_namespace_asks_the_visibility_api(queued, capsys):
    serve_visibility(queued.api)
    code, out, err = tower(capsys, queued.admin_config, "queue", "-n", "default", "user-queue",
                           "-v")  # fmt: skip
    assert code == 0, err
    assert out.splitlines() == [*EXPECTED]
    assert "positions from Kueue's visibility API" in err
    asked = [c for c in queued.api.calls if c[1].endswith("/pendingworkloads")]
    assert [(c[1], c[2]) for c in asked] == [
        (f"{PREFIX}/namespaces/default/localqueues/user-queue/pendingworkloads",
         {"limit": "1000", "offset": "0"})
    ]  # fmt: skip
    # Nothing cluster-wide was read: no ClusterQueue, no other namespace's Workloads.
    assert not [plural for _, plural in queued.api.lists if plural == "clusterqueues"]
    without = tower(capsys, queued.admin_config, "queue", "-n", "default", "user-queue")
    assert without[2] == ""  # the source is said with -v only


def test_a_namespace_user_sees_their_line_with_namespace_rights_only(queued, capsys, tmp_path):
    serve_visibility(queued.api)
    queued.api.rbac["alice"] = ALICE
    alice = queued.api.kubeconfig(str(tmp_path / "alice"), token="alice", username="alice")
    code, out, err = tower(capsys, alice, "queue", "-n", "default")
    assert code == 0, err
    assert out.splitlines() == [*EXPECTED]
    code, _, err = tower(capsys, alice, "queue", "-n", "kube-public", "user-queue")
    assert code == 1
    assert err.startswith("error: no access: 403 Forbidden: localqueues.visibility.kueue.x-k8s.io")
    assert err.count("\n") == 1
    # Without the API, the client-side way needs the whole cluster, which Alice may not read.
    queued.api.routes.clear()
    code, _, err = tower(capsys, alice, "queue", "-n", "default", "user-queue")
    assert code == 1
    assert err.startswith("error: no access: 403 Forbidden:")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "serve",
    [
        pytest.param(None, id="discovery without the group"),
        pytest.param(503, id="an APIService that answers 503"),
    ],
)
def test_without_the_api_the_same_order_is_computed_client_side(queued, capsys, serve):
    if serve:
        serve_visibility(queued.api, broken=serve)
    code, out, err = tower(capsys, queued.admin_config, "queue", "-n", "default", "user-queue",
                           "-v", "-o", "json")  # fmt: skip
    assert code == 0, err
    assert "computed client-side" in err
    rows = json.loads(out)
    # The order and the numbers the visibility API gives (EXPECTED), and the core's reason.
    assert [(r["workload"], r["positionInClusterQueue"], r["positionInLocalQueue"],
             r["priority"], r["requests"]) for r in rows] == [
        ("wl-high", 1, 1, 100, "cpu=2"), ("wl-mid", 2, 2, 50, "cpu=500m"),
        ("wl-low", 3, 3, 1, "cpu=1"),
    ]  # fmt: skip


def test_the_api_and_the_client_side_way_print_the_same_table(queued, capsys):
    _, client_side, _ = tower(capsys, queued.admin_config, "queue", "-n", "default")
    serve_visibility(queued.api)
    _, from_api, _ = tower(capsys, queued.admin_config, "queue", "-n", "default")
    assert from_api.splitlines() == EXPECTED
    # Client-side adds the core's reason for waiting (no controller wrote one here).
    width = len(EXPECTED[0]) - len("REASON")
    assert [line[:width].rstrip() for line in client_side.splitlines()] == [
        line[:width].rstrip() for line in EXPECTED
    ]
    assert all(line[width:] for line in client_side.splitlines())


def test_an_unknown_localqueue_is_one_line(queued, capsys):
    serve_visibility(queued.api)
    code, _, err = tower(capsys, queued.admin_config, "queue", "-n", "default", "nope")
    assert (code, err) == (1, "error: LocalQueue nope not found in namespace default\n")


def test_against_towers_own_visibility_api_the_numbers_are_the_client_side_ones(
    cluster, capsys, start_controller
):
    """The controller's visibility handler (extender/kube/servers/visibility/, fed by the
    leader's queues) served on the double in place of the aggregated API server."""
    from urllib.parse import urlencode

    from extender.kube.servers.visibility import VisibilityApi, VisibilityRequest

    for name, value in (("low", 1), ("high", 100)):
        cluster.apply({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
                       "metadata": {"name": name}, "value": value})  # fmt: skip
    cluster.apply(FLAVOR, CQ, LQ)
    running = start_controller()
    cluster.job("blocker", "4", duration="600s")
    for name, klass in (("a", "low"), ("b", "high"), ("c", "low")):
        cluster.job(name, "1", labels={"kueue.x-k8s.io/priority-class": klass})
        time.sleep(1.05)  # creation timestamps have one-second resolution

    def metadata(key: str) -> Any:
        namespace, name = key.split("/", 1)
        return cluster.api.get("workloads", name, namespace)

    handler = VisibilityApi(lambda: running.controller.positions, metadata)

    def route(method: str, path: str, query: dict[str, str], user: str) -> Any:
        if not path.startswith(f"/apis/{GROUP}"):
            return None
        target = f"{path}?{urlencode(query)}" if query else path
        answer = handler.handle(VisibilityRequest.of(method, target, user=user))
        return answer.status, json.loads(answer.body)

    def rows() -> list[tuple[str, int, int, int]]:
        code, out, err = tower(capsys, cluster.admin_config, "queue", "-n", "default", "-o",
                               "json", "-v")  # fmt: skip
        assert code == 0, err
        return [(r["job"], r["positionInClusterQueue"], r["positionInLocalQueue"], r["priority"])
                for r in json.loads(out)]  # fmt: skip

    want = [("Job/b", 1, 1, 100), ("Job/a", 2, 2, 1), ("Job/c", 3, 3, 1)]
    deadline = time.monotonic() + 30
    while rows() != want and time.monotonic() < deadline:  # until the controller has them all
        time.sleep(0.2)
    assert rows() == want  # computed client-side
    cluster.api.routes.append(route)
    assert rows() == want  # from Tower's visibility API
    _, _, err = tower(capsys, cluster.admin_config, "queue", "-n", "default", "-v")
    assert "positions from Kueue's visibility API" in err
    _, _, err = tower(capsys, cluster.admin_config, "queue", "-n", "default", "nope")
    assert err == "error: LocalQueue nope not found in namespace default\n"

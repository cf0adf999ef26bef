"""The scheduler extender over real HTTP, fed the bytes a real kube-scheduler v1.32 sent.

The requests are fixtures/real-apiserver/scheduler/*: ExtenderArgs for a GPU pod with
nodeCacheCapable true (NodeNames) and false (full Nodes). The capture's own dump server
answered with the shapes kube-scheduler then accepted; Tower's answers are compared with them.
"""

from __future__ import annotations

import copy
import json
import ssl
from collections.abc import Iterator
from http.client import HTTPConnection, HTTPSConnection
from pathlib import Path
from typing import Any

import pytest

from extender.core.api.models import ResourceFlavor
from extender.core.placement.fit import Plan, PlannedPodSet
from extender.kube.api.placement import Placement, node_view
from extender.kube.servers.scheduler_extender import SchedulerExtender, serve
from tests.fixtures import load
from tests.servers import generate

GPU = "nvidia.com/gpu"
FILTER_NAMES = load("scheduler/01-extender-filter.nodeCacheCapable-true.json")
PRIORITIZE_NAMES = load("scheduler/02-extender-prioritize.nodeCacheCapable-true.json")
FILTER_NODES = load("scheduler/03-extender-filter.nodeCacheCapable-false-full-nodes.json")
PRIORITIZE_NODES = load("scheduler/04-extender-prioritize.nodeCacheCapable-false-full-nodes.json")
POOL = ResourceFlavor("gpu-pool", {"capture.example.com/pool": "gpu"})


class Extender:
    def __init__(self, placement: Placement, port: int, tls: ssl.SSLContext | None) -> None:
        self.placement, self.port, self.tls = placement, port, tls
        self.synced = True

    def connect(self) -> HTTPConnection:
        if self.tls is not None:
            return HTTPSConnection("127.0.0.1", self.port, context=self.tls, timeout=10)
        return HTTPConnection("127.0.0.1", self.port, timeout=10)

    def post(self, path: str, body: Any, conn: HTTPConnection | None = None) -> tuple[int, Any]:
        own = conn is None
        conn = conn or self.connect()
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            conn.request("POST", path, data, {"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            if own:
                conn.close()


def started(placement: Placement, **kw: Any) -> tuple[Extender, Any]:
    holder: dict[str, Extender] = {}
    server = serve(SchedulerExtender(placement, lambda: holder["x"].synced), "127.0.0.1:0", **kw)
    tls = None
    if kw.get("cert_file"):
        tls = ssl.create_default_context(cafile=str(Path(kw["cert_file"]).parent / "ca.crt"))
    holder["x"] = Extender(placement, server.server_address[1], tls)
    return holder["x"], server


def capture_nodes() -> Placement:
    """The inventory as the capture's cluster had it: two GPU nodes of 4, a CPU node."""
    placement = Placement()
    with placement.lock:
        placement.inventory.set_flavors([POOL])
    for node in FILTER_NODES["request"]["body"]["Nodes"]["items"]:
        placement._on_node(node["metadata"]["name"], None, node_view(copy.deepcopy(node)))
    return placement


@pytest.fixture
def extender() -> Iterator[Extender]:
    x, server = started(capture_nodes())
    yield x
    server.shutdown()


def request(fixture: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(fixture["request"]["body"])


def managed(args: dict[str, Any], workload: str = "train", pod_set: str = "main") -> Any:
    meta = args["Pod"]["metadata"]
    meta.setdefault("annotations", {})["kueue.x-k8s.io/workload"] = workload
    meta.setdefault("labels", {})["kueue.x-k8s.io/podset"] = pod_set
    return args


def hold(placement: Placement, nodes: dict[str, int], gpus: int = 1) -> None:
    plan = Plan("default/train", {"main": PlannedPodSet({GPU: gpus}, nodes, ("gpu-pool",))})
    with placement.lock:
        placement.inventory.record(plan.workload, plan)


# ----- the wire format -----------------------------------------------------------------------


def test_filter_with_node_names_answers_as_kube_scheduler_expects(extender: Extender) -> None:
    status, answer = extender.post("/scheduler/filter", request(FILTER_NAMES))
    assert status == 200
    # An unmanaged GPU pod with nothing reserved passes everywhere: exactly the answer the
    # capture's extender gave, which kube-scheduler accepted and bound the pod with.
    assert answer == FILTER_NAMES["dumpServerResponse"]["body"]
    assert list(answer) == [
        "Nodes",
        "NodeNames",
        "FailedNodes",
        "FailedAndUnresolvableNodes",
        "Error",
    ]


def test_filter_with_full_nodes_echoes_the_same_node_objects(extender: Extender) -> None:
    args = request(FILTER_NODES)
    status, answer = extender.post("/scheduler/filter", args)
    assert status == 200
    assert answer["NodeNames"] is None
    assert answer["Nodes"] == {"metadata": {}, "items": args["Nodes"]["items"]}
    assert answer == FILTER_NODES["dumpServerResponse"]["body"] | {"Nodes": answer["Nodes"]}


@pytest.mark.parametrize("fixture", [PRIORITIZE_NAMES, PRIORITIZE_NODES], ids=["names", "nodes"])
def test_prioritize_answers_a_host_priority_list(extender: Extender, fixture: Any) -> None:
    status, answer = extender.post("/scheduler/prioritize", request(fixture))
    assert status == 200
    assert [set(entry) for entry in answer] == [{"Host", "Score"}] * 2
    assert [entry["Host"] for entry in answer] == ["gpu-node-1", "gpu-node-2"]
    assert all(0 <= entry["Score"] <= 10 for entry in answer)


# ----- decisions -----------------------------------------------------------------------------


def test_a_planned_pod_goes_only_where_its_plan_has_room(extender: Extender) -> None:
    hold(extender.placement, {"gpu-node-2": 1})
    status, answer = extender.post("/scheduler/filter", managed(request(FILTER_NAMES)))
    assert status == 200
    assert answer["NodeNames"] == ["gpu-node-2"]
    assert answer["FailedNodes"] == {"gpu-node-1": "planned for other pods of this workload"}
    assert answer["Error"] == ""
    _, scores = extender.post("/scheduler/prioritize", managed(request(PRIORITIZE_NAMES)))
    assert scores == [{"Host": "gpu-node-1", "Score": 0}, {"Host": "gpu-node-2", "Score": 10}]


def test_a_planned_pod_in_full_nodes_mode_gets_its_node_object_back(extender: Extender) -> None:
    hold(extender.placement, {"gpu-node-1": 1})
    args = managed(request(FILTER_NODES))
    _, answer = extender.post("/scheduler/filter", args)
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["gpu-node-1"]
    assert answer["Nodes"]["items"][0] == args["Nodes"]["items"][0]
    assert answer["FailedNodes"] == {"gpu-node-2": "planned for other pods of this workload"}


def test_other_gpu_pods_stay_off_what_a_plan_holds(extender: Extender) -> None:
    hold(extender.placement, {"gpu-node-1": 1}, gpus=4)
    _, answer = extender.post("/scheduler/filter", request(FILTER_NAMES))
    assert answer["NodeNames"] == ["gpu-node-2"]
    assert answer["FailedNodes"] == {"gpu-node-1": "reserved for workload default/train"}


def test_a_pod_without_checked_resources_passes_untouched(extender: Extender) -> None:
    hold(extender.placement, {"gpu-node-1": 1, "gpu-node-2": 1}, gpus=4)
    args = request(FILTER_NAMES)
    for container in args["Pod"]["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": "1"}}
    _, answer = extender.post("/scheduler/filter", args)
    assert answer["NodeNames"] == ["gpu-node-1", "gpu-node-2"]
    assert answer["FailedNodes"] == {}


def test_a_cold_cache_lets_every_pod_through_and_tells_only_about_tower_pods(
    extender: Extender,
) -> None:
    extender.synced = False
    _, answer = extender.post("/scheduler/filter", request(FILTER_NAMES))
    assert answer["NodeNames"] == ["gpu-node-1", "gpu-node-2"]
    assert answer["Error"] == ""
    _, answer = extender.post("/scheduler/filter", managed(request(FILTER_NAMES)))
    assert answer["NodeNames"] == ["gpu-node-1", "gpu-node-2"]
    assert answer["Error"] == "tower: the node cache is not synced yet"


# ----- bad input: 400 with a reason, never a 5xx ----------------------------------------------


def _bad_quantity() -> dict[str, Any]:
    args = request(FILTER_NAMES)
    args["Pod"]["spec"]["containers"][0]["resources"]["requests"][GPU] = "lots"
    return args


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not json", "ExtenderArgs: not JSON"),
        (b"[]", "ExtenderArgs: must be a JSON object"),
        ({"NodeNames": ["a"]}, "ExtenderArgs.Pod: must be an object (a v1.Pod)"),
        (
            {**request(FILTER_NAMES), "NodeNames": "gpu-node-1"},
            "ExtenderArgs.NodeNames: must be a list of node names",
        ),
        (
            {**request(FILTER_NAMES), "NodeNames": None, "Nodes": {"items": [{}]}},
            "ExtenderArgs.Nodes.items[0].metadata.name: is required",
        ),
        (_bad_quantity(), "ExtenderArgs.Pod.spec.containers[0].resources.requests"),
    ],
    ids=["not-json", "not-object", "no-pod", "names-not-list", "node-without-name", "quantity"],
)
def test_malformed_input_is_a_400_that_says_why(extender: Extender, body: Any, reason: str) -> None:
    for path in ("/scheduler/filter", "/scheduler/prioritize"):
        status, answer = extender.post(path, body)
        assert status == 400
        assert answer["Error"].startswith(reason), answer


def test_an_unknown_path_is_a_404_and_get_a_405(extender: Extender) -> None:
    status, answer = extender.post("/scheduler/bind", request(FILTER_NAMES))
    assert status == 404
    assert "/scheduler/filter" in answer["Error"]
    conn = extender.connect()
    conn.request("GET", "/scheduler/filter")
    assert conn.getresponse().status == 405


def test_connections_are_kept_alive(extender: Extender) -> None:
    conn = extender.connect()
    for _ in range(3):
        status, _ = extender.post("/scheduler/filter", request(FILTER_NAMES), conn)
        assert status == 200
    assert conn.sock is not None  # one connection served all three
    conn.close()


def test_served_over_tls(tmp_path: Path) -> None:
    generate(tmp_path)
    x, server = started(
        capture_nodes(),
        cert_file=str(tmp_path / "tls.crt"),
        key_file=str(tmp_path / "tls.key"),
    )
    try:
        status, answer = x.post("/scheduler/filter", request(FILTER_NAMES))
        assert status == 200
        assert answer["NodeNames"] == ["gpu-node-1", "gpu-node-2"]
    finally:
        server.shutdown()

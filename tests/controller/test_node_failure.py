"""A failed TAS node as Kueue v0.19.2 handles it at its default gates, on the API double with
Tower's controller in this process and a clock the test moves (no sleeping through delays).

A node of an admitted Workload's topology assignment that turns NotReady while the Workload's
pods there still run changes nothing, however long it stays so; once they have terminated, the
host is recorded in status.unhealthyNodes and, a second later (Kueue's second pass), replaced
within the Workload's domain, the record cleared; with no room, the Workload is evicted with
NodeFailures. The fixed-time behaviour (45 s in Tower before) is behind Kueue's deprecated gate.
The cases named `tas_test.go: ...` are Kueue's own, from
test/integration/singlecluster/tas/tas_test.go, with its Workloads, nodes and steps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from extender.core.jobframework import registry
from extender.core.placement.model import Node
from extender.kube.api import objects as o
from extender.kube.api import resources as r
from extender.kube.api.cache import Cache
from extender.kube.api.placement import Placement
from extender.kube.controller.context import Settings
from extender.kube.controller.loop import Controller
from extender.kube.controller.topology import replacement
from tests.builders import ready_node
from tests.controller.conftest import Cluster, eventually

BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"
HOSTNAME = "kubernetes.io/hostname"
NODE_GROUP = "node-group"
FIXED_TIME = "TASReplaceNodeDueToNotReadyOverFixedTime"


class SkipClock:
    """Real time, plus whatever the test skips ahead: wall and monotonic time move together, so
    the controller's waits pass when the test says, and its queues never see time go back."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def now(self) -> float:
        return time.time() + self.skipped

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped

    def advance(self, seconds: float) -> None:
        self.skipped += seconds


class Tower:
    """The controller in a thread, with placement (nodes and pods watched) and the test's
    clock; `turns` counts its loop's turns, so a test knows it looked."""

    def __init__(self, cluster: Cluster, clock: SkipClock, settings: Settings) -> None:
        client = cluster.controller_client()
        self.stop = threading.Event()
        self.cache = Cache(
            client,
            adapters=registry.enabled(settings.integrations),
            group_parents=registry.group_parents(settings.integrations),
            placement=Placement(),
        )
        self.cache.discover_kinds()
        self.cache.discover_optional()
        self.cache.start(self.stop)
        self.clock = clock
        self.controller = Controller(
            client, self.cache, settings=settings, clock=clock.now, monotonic=clock.monotonic
        )
        self.turns = 0
        turn = self.controller.turn

        def counted() -> None:
            turn()
            self.turns += 1

        self.controller.turn = counted  # type: ignore[method-assign]
        self.thread = threading.Thread(target=self.controller.run, args=(self.stop,), daemon=True)
        self.thread.start()
        assert self.controller.ready.wait(10), "the controller's caches never synced"

    def settle(self, turns: int = 5) -> None:
        """Wait until the loop has taken a few more turns (what was watched is acted on)."""
        until = self.turns + turns
        eventually(lambda: self.turns >= until, 10, f"{turns} turns of the loop")

    def node_seen(self, name: str, check: Callable[[Node | None], bool] = bool) -> None:
        """Wait until the controller's cache sees the node so, then until its loop has looked."""
        placement = self.cache.placement
        assert placement is not None

        def seen() -> bool:
            with placement.lock:
                return check(placement.topology.nodes.get(name))

        eventually(seen, 10, f"node {name} seen as the test made it")
        self.settle()

    def second_pass(self) -> None:
        """Kueue's second pass is due: the clock moved past it."""
        self.clock.advance(SECOND_PASS + 1)
        self.settle()

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(10)


def not_ready(node: Node | None) -> bool:
    return node is not None and not node.ready


def tainted(node: Node | None) -> bool:
    return node is not None and bool(node.taints)


def gone(node: Node | None) -> bool:
    return node is None


# Kueue's second pass comes a second after a host is recorded; here it comes when the test
# moves the clock past this, so what is recorded in between can be looked at.
SECOND_PASS = 600.0


class Towers:
    """The test's clock, and controllers started with it (`start`), halted at the end."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.clock = SkipClock()
        self.started: list[Tower] = []

    def start(self, **settings: Any) -> Tower:
        settings.setdefault("status_interval", 0.05)
        self.started.append(Tower(self.cluster, self.clock, Settings(**settings)))
        return self.started[-1]

    def halt(self) -> None:
        for item in self.started:
            item.halt()


@contextmanager
def towers(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Towers]:
    monkeypatch.setattr(replacement, "SECOND_PASS_DELAY", SECOND_PASS)
    running = Towers(cluster)
    try:
        yield running
    finally:
        running.halt()


@pytest.fixture
def env(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[Towers]:
    with towers(cluster, monkeypatch) as running:
        yield running


# ----- Kueue's integration setup (tas_test.go, "the hostname being the lowest level") ---------


def tas_node(name: str, block: str, rack: str, cpu: str = "1") -> dict[str, Any]:
    labels = {NODE_GROUP: "tas", BLOCK: block, RACK: rack, HOSTNAME: name}
    return ready_node(name, labels, {"cpu": cpu, "memory": "1Gi", "pods": "10"})


def two_blocks() -> list[dict[str, Any]]:
    """b1: r1 x3, r2 x1; b2: r1 x4, r2 x2 (1 cpu each)."""
    return [
        tas_node("x3", "b1", "r1"),
        tas_node("x1", "b1", "r2"),
        tas_node("x4", "b2", "r1"),
        tas_node("x2", "b2", "r2"),
    ]


def one_block() -> list[dict[str, Any]]:
    """b1: r1 x3 x1, r2 x4 x2 (the FailFast context)."""
    return [
        tas_node("x3", "b1", "r1"),
        tas_node("x1", "b1", "r1"),
        tas_node("x4", "b1", "r2"),
        tas_node("x2", "b1", "r2"),
    ]


def set_up(cluster: Cluster, nodes: list[dict[str, Any]]) -> None:
    for obj in nodes:
        cluster.admin.create(r.NODES, obj)
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {
                "levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "tas-flavor"},
            "spec": {"nodeLabels": {NODE_GROUP: "tas"}, "topologyName": "default"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cluster-queue"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {
                                "name": "tas-flavor",
                                "resources": [{"name": "cpu", "nominalQuota": "5"}],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "local-queue", "namespace": "default"},
            "spec": {"clusterQueue": "cluster-queue"},
        },
    )


def make_workload(
    cluster: Cluster,
    name: str,
    count: int,
    topology: dict[str, Any],
    *,
    tolerations: list[dict[str, Any]] | None = None,
    owner: dict[str, Any] | None = None,
    cpu: str = "1",
    pod_spec: dict[str, Any] | None = None,
) -> None:
    """Kueue's MakeWorkload(name).PodSets(MakePodSet("worker", count).<topology>)
    .Queue("local-queue").Request(cpu, "1")."""
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}],
        "restartPolicy": "Never",
        **(pod_spec or {}),
    }
    if tolerations:
        spec["tolerations"] = tolerations
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    cluster.admin.create(
        r.WORKLOADS,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": meta,
            "spec": {
                "queueName": "local-queue",
                "podSets": [
                    {
                        "name": "worker",
                        "count": count,
                        "topologyRequest": topology,
                        "template": {"spec": spec},
                    }
                ],
            },
        },
        "default",
    )


def workload(cluster: Cluster, name: str) -> dict[str, Any]:
    obj = cluster.get("workloads", name, "default")
    assert obj is not None
    return obj


def hosts(cluster: Cluster, name: str) -> list[str] | None:
    """The hosts of the Workload's assignment, in its order, one per pod (None: not admitted)."""
    obj = workload(cluster, name)
    admission = o.admission_of(obj) if o.is_true(obj, o.ADMITTED) else None
    if admission is None:
        return None
    (psa,) = admission.pod_set_assignments
    assert psa.topology is not None
    assert psa.topology.levels == (HOSTNAME,)
    return [d.values[-1] for d in psa.topology.domains for _ in range(d.count)]


def unhealthy(cluster: Cluster, name: str) -> list[str]:
    entries = (workload(cluster, name).get("status") or {}).get("unhealthyNodes") or []
    return [e["name"] for e in entries]


def evicted(cluster: Cluster, name: str) -> dict[str, Any] | None:
    condition = o.condition(workload(cluster, name), o.EVICTED)
    return condition if condition and condition.get("status") == "True" else None


def admitted_to(cluster: Cluster, name: str, want: list[str], what: str = "") -> None:
    eventually(lambda: hosts(cluster, name) == want, 20, what or f"{name} on {want}")


def set_ready(
    cluster: Cluster, name: str, status: str | None, since: float, reason: str = "Test"
) -> None:
    """The node's Ready condition set (None: taken away), as util.SetNodeCondition does."""
    node = cluster.admin.get(r.NODES, name)
    conditions = [c for c in node["status"].get("conditions") or [] if c["type"] != "Ready"]
    if status is not None:
        conditions.append(
            {
                "type": "Ready",
                "status": status,
                "reason": reason,
                "lastTransitionTime": o.rfc3339(since),
            }
        )
    node["status"]["conditions"] = conditions
    cluster.admin.update(r.NODES, node, subresource="status")


def taint(cluster: Cluster, name: str, *taints: dict[str, str]) -> None:
    node = cluster.admin.get(r.NODES, name)
    node.setdefault("spec", {})["taints"] = list(taints)
    cluster.admin.update(r.NODES, node)


def pod(
    cluster: Cluster,
    name: str,
    wl: str,
    *,
    node: str | None = None,
    selector_host: str | None = None,
    phase: str = "Running",
    finalizer: bool = False,
    gated: bool = False,
) -> dict[str, Any]:
    """A pod of the Workload as Tower starts them (its podSet label and workload annotation),
    bound to `node` or held to `selector_host` by its nodeSelector, in `phase`; `gated`: behind
    the topology gate."""
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]
    }
    if node is not None:
        spec["nodeName"] = node
    if selector_host is not None:
        spec["nodeSelector"] = {HOSTNAME: selector_host}
    if gated:
        spec["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": {o.PODSET_LABEL: "worker"},
        "annotations": {
            "kueue.x-k8s.io/workload": wl,
            "kueue.x-k8s.io/podset-unconstrained-topology": "true",
        },
    }
    if finalizer:
        meta["finalizers"] = ["kueue.x-k8s.io/integration-test"]
    cluster.admin.create(r.PODS, {"metadata": meta, "spec": spec}, "default")
    # A patch, not an update: the ungater may have let the pod through meanwhile.
    patch = {"status": {"phase": phase}}
    return cluster.admin.patch(r.PODS, name, patch, "default", subresource="status")


def delete_pod(cluster: Cluster, name: str) -> None:
    cluster.admin.delete(r.PODS, name, "default")


def release_pod(cluster: Cluster, name: str) -> None:
    """Its test finalizer taken off, so a deleted pod goes."""
    current = cluster.get("pods", name, "default")
    if current is not None:
        current["metadata"]["finalizers"] = []
        cluster.admin.update(r.PODS, current)


PREFERRED_BLOCK = {"preferred": BLOCK}


# ----- Tower's own cases -------------------------------------------------------------------


def test_a_notready_node_whose_pods_still_run_moves_nothing_past_the_old_45s(
    cluster: Cluster, env: Towers
) -> None:
    set_up(cluster, two_blocks())
    running, clock = env.start(), env.clock
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    pod(cluster, "wl1-0", "wl1", node="x3", finalizer=True)
    pod(cluster, "wl1-1", "wl1", node="x1")

    set_ready(cluster, "x3", "False", clock.now())
    running.node_seen("x3", not_ready)
    for _ in range(4):  # two minutes NotReady, looked at on the way
        clock.advance(30)
        running.settle()
    assert hosts(cluster, "wl1") == ["x3", "x1"]
    assert unhealthy(cluster, "wl1") == []

    # Its pod there is deleted (terminating: the kubelet that would confirm it is down).
    delete_pod(cluster, "wl1-0")
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    assert hosts(cluster, "wl1") == ["x3", "x1"]  # the second pass comes a second later
    running.second_pass()
    admitted_to(cluster, "wl1", ["x1", "x4"], "x3's pod moved to x4")
    assert unhealthy(cluster, "wl1") == []
    release_pod(cluster, "wl1-0")


def test_the_fixed_time_gate_moves_a_notready_nodes_pods_after_30s(
    cluster: Cluster, env: Towers
) -> None:
    set_up(cluster, two_blocks())
    running, clock = env.start(feature_gates={FIXED_TIME: True}), env.clock
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    pod(cluster, "wl1-0", "wl1", node="x3")
    pod(cluster, "wl1-1", "wl1", node="x1")

    set_ready(cluster, "x3", "False", clock.now())
    running.node_seen("x3", not_ready)
    clock.advance(20)
    running.settle()
    assert (hosts(cluster, "wl1"), unhealthy(cluster, "wl1")) == (["x3", "x1"], [])
    clock.advance(11)  # 31 s NotReady: failed, whatever its pods do
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    running.second_pass()
    admitted_to(cluster, "wl1", ["x1", "x4"], "x3's pod moved to x4")


def test_a_gated_pod_waits_while_its_host_is_recorded_then_goes_to_the_replacement(
    cluster: Cluster, env: Towers
) -> None:
    # As Kueue's hotswap e2e case "Should replace a node when it becomes NotReady and pods
    # are Pending": no pod is let through to a recorded host; the same pod goes to its
    # replacement once it is written.
    set_up(cluster, two_blocks())
    running = env.start()
    make_workload(cluster, "wl1", 2, PREFERRED_BLOCK)
    admitted_to(cluster, "wl1", ["x3", "x1"])
    set_ready(cluster, "x3", "False", env.clock.now())
    running.node_seen("x3", not_ready)
    eventually(lambda: unhealthy(cluster, "wl1") == ["x3"], 10, "x3 recorded")
    for name in ("wl1-0", "wl1-1"):
        pod(cluster, name, "wl1", phase="Pending", gated=True)

    def selectors() -> list[str | None]:
        out = []
        for name in ("wl1-0", "wl1-1"):
            spec = (cluster.get("pods", name, "default") or {}).get("spec") or {}
            gated = any(
                g["name"] == "kueue.x-k8s.io/topology" for g in spec.get("schedulingGates") or []
            )
            out.append(None if gated else (spec.get("nodeSelector") or {}).get(HOSTNAME))
        return out

    eventually(lambda: "x1" in selectors(), 10, "the pod for x1 let through")
    running.settle()
    assert sorted(selectors(), key=str) == [None, "x1"]  # the other waits behind its gate
    running.second_pass()
    admitted_to(cluster, "wl1", ["x1", "x4"])
    eventually(lambda: sorted(selectors(), key=str) == ["x1", "x4"], 10, "the same pod on x4")

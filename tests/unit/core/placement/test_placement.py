"""The placement planner, the inventory behind it and the scheduler extender's decisions."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.core.api.labels import Taint
from extender.core.api.models import Admission, PodSetAssignment, ResourceFlavor, Workload
from extender.core.placement.fit import (
    Inventory,
    Node,
    PlacementCheck,
    Plan,
    PlannedPodSet,
    Pod,
    checked_resources,
    is_extended_resource,
)
from extender.core.scheduling.cycle import INADMISSIBLE
from tests.builders import CQ, WL, state_with

GPU = "nvidia.com/gpu"
A100 = ResourceFlavor("a100", {"gpu": "a100"})


def gpu_node(name: str, gpus: int = 4, **kw: Any) -> Node:
    labels = {"gpu": "a100", **kw.pop("labels", {})}
    return Node(name, labels, allocatable={GPU: gpus, "cpu": 16000}, **kw)


def inventory(*nodes: Node, flavors: tuple[ResourceFlavor, ...] = (A100,)) -> Inventory:
    inv = Inventory()
    inv.set_flavors(flavors)
    for node in nodes:
        inv.set_node(node)
    return inv


def busy(inv: Inventory, node: str, gpus: int, name: str | None = None) -> None:
    inv.set_pod(Pod(f"other/{name or node}", node, {GPU: gpus}))


def workload(*pod_sets: tuple[str, int, int], name: str = "train", **extra: Any) -> Workload:
    wl = WL(name)
    for ps_name, count, gpus in pod_sets:
        wl.pod_set(ps_name, count, cpu="1").request(GPU, str(gpus))
    for key, value in extra.items():
        getattr(wl, key)(**value)
    return wl.obj()


def admission(wl: Workload, flavor: str = "a100") -> Admission:
    return Admission(
        "cq",
        tuple(
            PodSetAssignment(ps.name, {r: flavor for r in ps.requests}, dict(ps.totals), ps.count)
            for ps in wl.pod_sets
        ),
    )


def nodes_of(plan: Plan | str) -> dict[str, dict[str, int]]:
    assert isinstance(plan, Plan), plan
    return plan.as_annotation()


# ----- which resources are checked ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "extended"),
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("google.com/tpu", True),
        ("example.com/rdma", True),
        ("cpu", False),
        ("memory", False),
        ("hugepages-2Mi", False),
        ("ephemeral-storage", False),
        ("kubernetes.io/batch-cpu", False),
        ("scheduling.kubernetes.io/x", False),
    ],
)
def test_every_extended_resource_is_checked_by_default(name: str, extended: bool) -> None:
    assert is_extended_resource(name) is extended
    assert checked_resources(None)(name) is extended


def test_physical_resources_flag_lists_what_is_checked() -> None:
    chosen = checked_resources("nvidia.com/gpu, cpu")
    assert chosen("cpu")
    assert chosen("nvidia.com/gpu")
    assert not chosen("google.com/tpu")


# ----- the planner -------------------------------------------------------------------------


PLANS: list[tuple[str, list[Node], dict[str, int], Workload, dict[str, dict[str, int]] | str]] = [
    (
        "fragmented GPUs: one 8-GPU pod does not fit on 4 + 4",
        [gpu_node("node-3"), gpu_node("node-7")],
        {},
        workload(("main", 1, 8)),
        "needs 8 nvidia.com/gpu on one node; the nodes of flavor a100 have at most 4 free "
        "(node-3: 4, node-7: 4)",
    ),
    (
        "two 4-GPU pods go one to each node",
        [gpu_node("node-3"), gpu_node("node-7")],
        {},
        workload(("main", 2, 4)),
        {"main": {"node-3": 1, "node-7": 1}},
    ),
    (
        "tightest node first: the pod of 2 takes the node with 2 free",
        [gpu_node("big", 8), gpu_node("mid", 4), gpu_node("small", 2)],
        {},
        workload(("main", 1, 2)),
        {"main": {"small": 1}},
    ),
    (
        "used GPUs count: the node with room is chosen",
        [gpu_node("node-1"), gpu_node("node-2")],
        {"node-1": 3},
        workload(("main", 1, 2)),
        {"main": {"node-2": 1}},
    ),
    (
        "pods fill a node before the next one",
        [gpu_node("node-1", 8), gpu_node("node-2", 8)],
        {},
        workload(("main", 3, 2)),
        {"main": {"node-1": 3}},
    ),
    (
        "several pods that do not all fit",
        [gpu_node("node-1"), gpu_node("node-2")],
        {"node-2": 3},
        workload(("main", 3, 2)),
        "needs 3 pods of 2 nvidia.com/gpu each; the nodes of flavor a100 hold 2 of them "
        "(node-1: 4 free, node-2: 1 free)",
    ),
    (
        "a tainted node is not used by pods that do not tolerate it",
        [gpu_node("tainted", taints=(Taint("dedicated", "x", "NoSchedule"),)), gpu_node("plain")],
        {},
        workload(("main", 2, 4)),
        "needs 2 pods of 4 nvidia.com/gpu each; the nodes of flavor a100 hold 1 of them "
        "(plain: 4 free)",
    ),
    (
        "a tolerated taint is fine; PreferNoSchedule never excludes",
        [
            gpu_node("tainted", taints=(Taint("dedicated", "x", "NoSchedule"),)),
            gpu_node("soft", taints=(Taint("busy", "", "PreferNoSchedule"),)),
        ],
        {},
        workload(("main", 2, 4), toleration={"key": "dedicated", "value": "x"}),
        {"main": {"soft": 1, "tainted": 1}},
    ),
    (
        "unschedulable and NotReady nodes are not used",
        [gpu_node("cordoned", 8, unschedulable=True), gpu_node("down", 8, ready=False)],
        {},
        workload(("main", 1, 1)),
        "no Ready, schedulable node that the pods tolerate carries the labels of flavor a100 "
        "(gpu=a100)",
    ),
    (
        "a node without the flavor's labels is not the flavor's",
        [Node("cpu-only", {"gpu": "none"}, allocatable={GPU: 8})],
        {},
        workload(("main", 1, 1)),
        "no Ready, schedulable node that the pods tolerate carries the labels of flavor a100 "
        "(gpu=a100)",
    ),
    (
        "the pod's own nodeSelector narrows the nodes",
        [gpu_node("zone-a", labels={"zone": "a"}), gpu_node("zone-b", labels={"zone": "b"})],
        {},
        workload(("main", 1, 4), node_selector={"zone": "b"}),
        {"main": {"zone-b": 1}},
    ),
    (
        "many podSets: the biggest pods are placed first",
        [gpu_node("n1", 8), gpu_node("n2", 4)],
        {},
        workload(("driver", 1, 4), ("workers", 2, 4)),
        {"driver": {"n2": 1}, "workers": {"n1": 2}},
    ),
]


@pytest.mark.parametrize(
    ("nodes", "used", "wl", "expected"), [p[1:] for p in PLANS], ids=[p[0] for p in PLANS]
)
def test_planner(
    nodes: list[Node], used: dict[str, int], wl: Workload, expected: dict[str, Any] | str
) -> None:
    inv = inventory(*nodes)
    for node, gpus in used.items():
        busy(inv, node, gpus)
    plan = inv.plan(wl, admission(wl))
    if isinstance(expected, str):
        assert plan == expected
    else:
        assert nodes_of(plan) == expected


TOPOLOGY = ResourceFlavor("a100", {"gpu": "a100"}, topology_key="rack")


def racks() -> Inventory:
    return inventory(
        gpu_node("a-1", labels={"rack": "a"}),
        gpu_node("a-2", labels={"rack": "a"}),
        gpu_node("b-1", labels={"rack": "b"}),
        gpu_node("b-2", 2, labels={"rack": "b"}),
        flavors=(TOPOLOGY,),
    )


def test_topology_puts_every_pod_in_the_tightest_domain_that_holds_them() -> None:
    wl = workload(("main", 3, 2))
    # Rack b has 6 free, rack a 8: six GPUs fit in b.
    assert nodes_of(racks().plan(wl, admission(wl))) == {"main": {"b-1": 2, "b-2": 1}}


def test_topology_refuses_when_no_domain_holds_the_workload() -> None:
    wl = workload(("main", 3, 4))
    assert racks().plan(wl, admission(wl)) == (
        "needs 12 nvidia.com/gpu in one rack domain of flavor a100; the domains have at most "
        "a: 8, b: 6 free"
    )


def test_a_plan_holds_its_nodes_until_its_pods_are_bound() -> None:
    inv = inventory(gpu_node("node-1"), gpu_node("node-2"))
    wl = workload(("main", 1, 4))
    plan = inv.plan(wl, admission(wl))
    assert isinstance(plan, Plan)
    inv.assume(plan)
    other = workload(("main", 2, 4), name="other")
    assert inv.plan(other, admission(other)) == (
        "needs 2 pods of 4 nvidia.com/gpu each; the nodes of flavor a100 hold 1 of them "
        "(node-2: 4 free, node-1: 0 free)"
    )
    # The pod binds where planned: it now uses what the plan held; nothing is counted twice.
    inv.set_pod(Pod("default/train-0", "node-1", {GPU: 4}, "default/train", "main"))
    assert inv.free("node-1", GPU) == 0
    assert inv.free("node-2", GPU) == 4
    # The pod goes (it failed, say): while the workload is admitted its plan holds the node
    # for the pod that replaces it.
    inv.delete_pod("default/train-0")
    assert inv.free("node-1", GPU) == 0
    # The workload finishes: the node is free, and the flavor says it gained room.
    inv.take_grown()
    inv.forget("default/train")
    assert inv.free("node-1", GPU) == 4
    assert inv.take_grown() == {"a100"}


def test_a_recorded_plan_outlives_the_replicas_own() -> None:
    inv = inventory(gpu_node("node-1"))
    wl = workload(("main", 1, 4))
    plan = inv.plan(wl, admission(wl))
    assert isinstance(plan, Plan)
    inv.record(wl.key, plan)
    inv.forget(wl.key)  # this replica's assumption goes; the Workload still says it
    assert inv.free("node-1", GPU) == 0
    inv.record(wl.key, None)
    assert inv.free("node-1", GPU) == 4


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("cordon", {"main": {"node-1": 1, "node-3": 1}}),  # bound pod stays; the other moves
        ("notready", {"main": {"node-3": 2}}),  # both pods must move
        ("delete", {"main": {"node-3": 2}}),
    ],
)
def test_a_node_that_fails_under_a_plan_has_its_pods_planned_again(
    change: str, expected: dict[str, dict[str, int]]
) -> None:
    inv = inventory(gpu_node("node-1"), gpu_node("node-2", 2), gpu_node("node-3"))
    wl = workload(("main", 2, 2))
    # Both pods planned on node-1; one is bound there already.
    plan = Plan(wl.key, {"main": PlannedPodSet({GPU: 2}, {"node-1": 2}, ("a100",))})
    inv.record(wl.key, plan)
    inv.set_pod(Pod("default/train-0", "node-1", {GPU: 2}, wl.key, "main"))
    busy(inv, "node-2", 2)
    if change == "cordon":
        inv.set_node(gpu_node("node-1", unschedulable=True))
    elif change == "notready":
        inv.set_node(gpu_node("node-1", ready=False))
    else:
        inv.delete_node("node-1")
    assert inv.take_disturbed() == {wl.key}
    assert nodes_of(inv.plan(wl, admission(wl), keep=plan)) == expected


def test_replanning_fails_when_no_other_node_has_room() -> None:
    inv = inventory(gpu_node("node-1"), gpu_node("node-2"))
    wl = workload(("main", 1, 4))
    plan = inv.plan(wl, admission(wl))
    assert isinstance(plan, Plan)
    inv.record(wl.key, plan)
    busy(inv, "node-2", 4)
    inv.set_node(gpu_node("node-1", ready=False))
    assert inv.take_disturbed() == {wl.key}
    assert inv.plan(wl, admission(wl), keep=plan) == (
        "needs 4 nvidia.com/gpu on one node; the nodes of flavor a100 have at most 0 free "
        "(node-2: 0)"
    )


# ----- the scheduler extender's decisions ----------------------------------------------------


def planned() -> tuple[Inventory, Workload]:
    inv = inventory(
        gpu_node("node-1"),
        gpu_node("node-2"),
        gpu_node("node-3"),
        Node("cpu-1", {}, allocatable={"cpu": 8000}),
    )
    wl = workload(("main", 2, 4))
    nodes = {"node-1": 1, "node-2": 1}
    inv.record(wl.key, Plan(wl.key, {"main": PlannedPodSet({GPU: 4}, nodes, ("a100",))}))
    return inv, wl


def test_filter_keeps_a_planned_pod_on_its_plan() -> None:
    inv, wl = planned()
    inv.set_pod(Pod("default/train-0", "node-2", {GPU: 4}, wl.key, "main"))
    passed, failed = inv.filter(
        "default", "train", "main", {GPU: 4}, ["node-1", "node-2", "node-3", "cpu-1"]
    )
    assert passed == ["node-1"]
    assert failed == {
        "node-2": "planned for other pods of this workload",
        "node-3": "planned for other pods of this workload",
        "cpu-1": "not a node of flavor a100",
    }


def test_filter_names_the_shortfall_on_a_planned_node() -> None:
    inv, _ = planned()
    busy(inv, "node-1", 2)  # someone else took half of it
    passed, failed = inv.filter("default", "train", "main", {GPU: 4}, ["node-1"])
    assert passed == []
    assert failed == {"node-1": "2 nvidia.com/gpu free, the pod needs 4"}


def test_filter_keeps_other_gpu_pods_off_reserved_capacity() -> None:
    inv, _ = planned()
    passed, failed = inv.filter("team", None, None, {GPU: 1}, ["node-1", "node-2", "node-3"])
    assert passed == ["node-3"]
    assert failed == {
        "node-1": "reserved for workload default/train",
        "node-2": "reserved for workload default/train",
    }


def test_filter_passes_a_pod_that_uses_nothing_checked() -> None:
    inv, _ = planned()
    names = ["node-1", "node-2", "cpu-1", "unknown"]
    assert inv.filter("team", None, None, {"cpu": 1000}, names) == (names, {})


def test_prioritize_prefers_the_plan_then_the_fullest_node() -> None:
    inv, _ = planned()
    busy(inv, "node-3", 2)
    scores = dict(inv.prioritize("default", "train", "main", ["node-1", "node-3", "cpu-1"]))
    assert scores == {"node-1": 10, "node-3": 4, "cpu-1": 0}
    scores = dict(inv.prioritize("team", None, None, ["node-1", "node-3", "cpu-1"]))
    assert scores == {"node-1": 9, "node-3": 4, "cpu-1": 0}


# ----- through the scheduling cycle ----------------------------------------------------------


def test_a_workload_without_a_plan_waits_and_is_admitted_when_a_node_frees() -> None:
    inv = inventory(gpu_node("node-3", 8), gpu_node("node-7"))
    busy(inv, "node-3", 4, "old-job")
    check = PlacementCheck(inv)
    cq = CQ("cq").group(("a100", {"cpu": "64", GPU: "12"})).obj()
    state = state_with(cq, flavors=[A100], admission_checks=[check])
    state.on_release(inv.forget)
    wl = workload(("main", 1, 8))
    state.add_workload(wl)
    result = state.schedule(0.0)
    assert not result.admitted
    status = state.pending_status(wl.key)
    assert status.reason == INADMISSIBLE
    assert status.message == (
        "needs 8 nvidia.com/gpu on one node; the nodes of flavor a100 have at most 4 free "
        "(node-3: 4, node-7: 4)"
    )
    assert not state.schedule(0.0).admitted  # set aside: no retry until something changes
    inv.delete_pod("other/old-job")
    assert state.requeue_inadmissible(check.to_requeue(inv.take_grown()))
    result = state.schedule(1.0)
    assert [a.workload.key for a in result.admitted] == [wl.key]
    assert nodes_of(inv.plan_of(wl.key) or "none") == {"main": {"node-3": 1}}
    state.finish(wl.key)
    assert inv.plan_of(wl.key) is None


def test_workloads_without_checked_resources_need_no_plan() -> None:
    inv = inventory()  # no nodes at all
    cq = CQ("cq").group(("a100", {"cpu": "64"})).obj()
    state = state_with(cq, flavors=[A100], admission_checks=[PlacementCheck(inv)])
    wl = WL("cpu-only").request("cpu", "2").obj()
    state.add_workload(wl)
    assert [a.workload.key for a in state.schedule(0.0).admitted] == [wl.key]


# ----- properties ----------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capacities=st.lists(st.integers(0, 8), min_size=1, max_size=6),
    used=st.lists(st.integers(0, 8), max_size=6),
    jobs=st.lists(
        st.tuples(st.integers(1, 4), st.integers(1, 8), st.booleans(), st.integers(0, 3)),
        min_size=1,
        max_size=8,
    ),
    topology=st.booleans(),
)
def test_plans_never_put_more_on_a_node_than_it_has(
    capacities: list[int],
    used: list[int],
    jobs: list[tuple[int, int, bool, int]],
    topology: bool,
) -> None:
    flavor = ResourceFlavor("a100", {"gpu": "a100"}, topology_key="rack" if topology else None)
    inv = inventory(
        *(gpu_node(f"n{i}", c, labels={"rack": str(i % 2)}) for i, c in enumerate(capacities)),
        flavors=(flavor,),
    )
    for i, amount in enumerate(used[: len(capacities)]):
        if amount <= capacities[i]:
            busy(inv, f"n{i}", amount)
    for j, (count, gpus, bind, workers) in enumerate(jobs):
        sets = [("main", count, gpus)] + ([("workers", workers, 1)] if workers else [])
        wl = workload(*sets, name=f"job-{j}")
        free_before = {n: inv.free(n, GPU) for n in inv.nodes}
        plan = inv.plan(wl, admission(wl))
        if isinstance(plan, str):
            continue
        on_node: dict[str, int] = {}
        for name, pods, each in sets:
            per_node = plan.pod_sets[name].nodes
            assert sum(per_node.values()) == pods
            for node, n in per_node.items():
                on_node[node] = on_node.get(node, 0) + n * each
        for node, amount in on_node.items():
            assert amount <= free_before[node]  # a plan fits what was free
        if topology:
            assert len({inv.nodes[n].labels["rack"] for n in on_node}) == 1
        inv.assume(plan)
        if bind:  # its pods bind where planned: nothing is counted twice
            for name, _, each in sets:
                nodes = plan.pod_sets[name].nodes
                for k, node in enumerate(n for n, c in nodes.items() for _ in range(c)):
                    pod = Pod(f"default/job-{j}-{name}-{k}", node, {GPU: each}, wl.key, name)
                    inv.set_pod(pod)
        for node in inv.nodes:
            assert inv.free(node, GPU) >= 0  # the sum of plans never exceeds a node


# ----- the one-pod fast path ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "wl", "nodes", "fast"),
    [
        ("one pod, one checked resource", workload(("main", 1, 2)), [gpu_node("n1")], True),
        ("two pods: the general path", workload(("main", 2, 2)), [gpu_node("n1")], False),
        (
            "tolerations: the general path",
            workload(("main", 1, 2), toleration={"key": "dedicated", "value": "x"}),
            [gpu_node("n1")],
            False,
        ),
        (
            "a nodeSelector: the general path",
            workload(("main", 1, 2), node_selector={"zone": "b"}),
            [gpu_node("n1", labels={"zone": "b"})],
            False,
        ),
        (
            "a tainted tightest node: the general path",
            workload(("main", 1, 2)),
            [gpu_node("n1", taints=(Taint("dedicated", "x", "NoSchedule"),))],
            False,
        ),
        ("no room: the general path phrases it", workload(("main", 1, 8)), [gpu_node("n1")], False),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_one_pod_path_takes_only_what_it_can_answer(
    case: str, wl: Workload, nodes: list[Node], fast: bool
) -> None:
    inv = inventory(*nodes)
    assert (inv.hold_one_pod(wl, admission(wl)) is not None) == fast


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capacities=st.lists(st.integers(0, 8), min_size=1, max_size=6),
    used=st.lists(st.integers(0, 8), max_size=6),
    gpus=st.lists(st.integers(1, 8), min_size=1, max_size=12),
)
def test_the_one_pod_path_plans_and_holds_as_the_general_path_does(
    capacities: list[int], used: list[int], gpus: list[int]
) -> None:
    fast, general = (
        inventory(*(gpu_node(f"n{i}", c) for i, c in enumerate(capacities))) for _ in range(2)
    )
    for inv in (fast, general):
        for i, amount in enumerate(used[: len(capacities)]):
            if amount <= capacities[i]:
                busy(inv, f"n{i}", amount)
    for j, need in enumerate(gpus):
        wl = workload(("main", 1, need), name=f"job-{j}")
        quick = fast.hold_one_pod(wl, admission(wl))
        planned = general.plan(wl, admission(wl))
        if quick is None:
            if isinstance(planned, Plan):
                fast.assume(planned)  # the general path answers for both
                general.assume(planned)
            continue
        assert quick == planned
        general.assume(planned)
        assert {n: fast.free(n, GPU) for n in fast.nodes} == {
            n: general.free(n, GPU) for n in general.nodes
        }
    for j in range(0, len(gpus), 2):  # freed quota gives the room back the same way
        fast.forget(f"default/job-{j}")
        general.forget(f"default/job-{j}")
    assert {n: fast.free(n, GPU) for n in fast.nodes} == {
        n: general.free(n, GPU) for n in general.nodes
    }

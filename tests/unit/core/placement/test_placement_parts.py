"""Placement's parts on their own: the inventory, the planner that reads it, the extender's answers."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from extender.core.api.models import Admission, PodSetAssignment, ResourceFlavor, Workload
from extender.core.placement.extender import ExtenderAnswers
from extender.core.placement.fit import Inventory, Node, Plan, Pod
from extender.core.placement.inventory import NodeInventory
from extender.core.placement.planner import Planner
from tests.builders import WL

GPU = "nvidia.com/gpu"
A100 = ResourceFlavor("a100", {"gpu": "a100"})
CORE = Path(__file__).resolve().parents[4] / "extender" / "core"
CLASSES = [
    (path.name, node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
    for path in sorted(CORE.glob("placement*.py"))
    for node in ast.parse(path.read_text()).body
    if isinstance(node, ast.ClassDef)
]


@pytest.mark.parametrize(("module", "name", "lines"), CLASSES, ids=[c[1] for c in CLASSES])
def test_no_placement_class_is_over_400_lines(module: str, name: str, lines: int) -> None:
    assert lines <= 400, f"{module}: {name} is {lines} lines"


def gpu_nodes(*gpus: int) -> NodeInventory:
    inv = NodeInventory()
    inv.set_flavors([A100])
    for i, n in enumerate(gpus, 1):
        inv.set_node(Node(f"node-{i}", {"gpu": "a100"}, allocatable={GPU: n, "cpu": 16000}))
    return inv


def gpu_workload(name: str, count: int, gpus: int) -> tuple[Workload, Admission]:
    wl = WL(name).pod_set("main", count, cpu="1").request(GPU, str(gpus)).obj()
    ps = wl.pod_sets[0]
    assignment = PodSetAssignment("main", {r: "a100" for r in ps.requests}, dict(ps.totals), count)
    return wl, Admission("cq", (assignment,))


def test_the_planner_reads_the_inventory_and_holds_nothing_itself() -> None:
    inv = gpu_nodes(8, 4)
    wl, adm = gpu_workload("train", 3, 4)
    plan = Planner(inv).plan(wl, adm)
    assert isinstance(plan, Plan)
    assert plan.as_annotation() == {"main": {"node-1": 2, "node-2": 1}}
    assert (inv.free("node-1", GPU), inv.free("node-2", GPU)) == (8, 4)
    inv.assume(plan)
    assert (inv.free("node-1", GPU), inv.free("node-2", GPU)) == (0, 0)
    assert Planner(inv).plan(*gpu_workload("next", 1, 1)) == (
        "needs 1 nvidia.com/gpu on one node; the nodes of flavor a100 have at most 0 free "
        "(node-1: 0, node-2: 0)"
    )


def test_the_one_pod_shortcut_holds_what_it_plans_once() -> None:
    inv = gpu_nodes(8, 2)
    planner = Planner(inv)
    wl, adm = gpu_workload("one", 1, 2)
    plan = planner.shortcuts.hold_one_pod(wl, adm)
    assert plan is not None
    assert plan.as_annotation() == {"main": {"node-2": 1}}  # the tightest node
    assert inv.plan_of(wl.key) == plan
    assert inv.free("node-2", GPU) == 0
    assert planner.shortcuts.hold_one_pod(wl, adm) is None  # held already: the general path


def test_the_extender_answers_from_what_the_inventory_holds() -> None:
    inv = gpu_nodes(4, 4)
    wl, adm = gpu_workload("train", 1, 4)
    plan = Planner(inv).plan(wl, adm)
    assert isinstance(plan, Plan)
    inv.assume(plan)
    answers = ExtenderAnswers(inv)
    (planned,) = plan.as_annotation()["main"]
    other = next(n for n in inv.nodes if n != planned)
    assert answers.filter("default", "train", "main", {GPU: 4}, inv.nodes) == (
        [planned],
        {other: "planned for other pods of this workload"},
    )
    assert answers.filter("default", None, None, {GPU: 4}, inv.nodes) == (
        [other],
        {planned: "reserved for workload default/train"},
    )
    # Bound, the pod uses what its plan held: kube-scheduler's own fit sees it from now on.
    inv.set_pod(Pod("default/train-0", planned, {GPU: 4}, "default/train", "main"))
    assert not inv.holds_on(planned)
    assert answers.filter("default", None, None, {GPU: 4}, [planned]) == ([planned], {})


def test_a_cordoned_node_is_no_node_of_its_flavor_to_a_planned_pod() -> None:
    inv = gpu_nodes(4, 4)
    wl, adm = gpu_workload("train", 1, 4)
    plan = Planner(inv).plan(wl, adm)
    assert isinstance(plan, Plan)
    inv.assume(plan)
    (planned,) = plan.as_annotation()["main"]
    other = next(n for n in inv.nodes if n != planned)
    inv.set_node(replace(inv.nodes[other], unschedulable=True))
    _, failed = ExtenderAnswers(inv).filter("default", "train", "main", {GPU: 4}, [other])
    assert failed == {other: "not a node of flavor a100"}
    inv.set_node(replace(inv.nodes[other], unschedulable=False))
    _, failed = ExtenderAnswers(inv).filter("default", "train", "main", {GPU: 4}, [other])
    assert failed == {other: "planned for other pods of this workload"}


def test_the_inventory_its_callers_hold_puts_the_parts_together() -> None:
    inv = Inventory()
    inv.set_flavors([A100])
    inv.set_node(Node("node-1", {"gpu": "a100"}, allocatable={GPU: 8}))
    wl, adm = gpu_workload("train", 2, 4)
    plan = inv.plan(wl, adm)
    assert plan == inv.planner.plan(wl, adm)
    assert isinstance(plan, Plan)
    inv.assume(plan)
    assert inv.filter("default", None, None, {GPU: 1}, ["node-1"]) == inv.extender.filter(
        "default", None, None, {GPU: 1}, ["node-1"]
    )
    assert inv.prioritize("default", "train", "main", ["node-1"]) == [("node-1", 10)]

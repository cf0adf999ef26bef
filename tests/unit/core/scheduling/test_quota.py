import pytest

from extender.core.api.models import Cohort, FlavorQuotas, ResourceGroup, ResourceQuota
from extender.core.scheduling.quota import (
    QuotaTree,
    add_usage,
    available,
    borrowing_level,
    is_borrowing,
    potential_available,
)
from tests.builders import CQ

CPU = ("default", "cpu")


def cpu_cq(name, nominal, borrow=None, lend=None, cohort=None):
    b = CQ(name).group(("default", {"cpu": (nominal, borrow, lend)}))
    return (b.cohort(cohort) if cohort else b).obj()


def cohort_with_quota(name, nominal, parent=None, borrow=None, lend=None):
    rq = ResourceQuota("cpu", nominal * 1000, borrow and borrow * 1000, lend and lend * 1000)
    return Cohort(name, parent, (ResourceGroup(("cpu",), (FlavorQuotas("default", (rq,)),)),))


# (id, cluster queues, cohorts, usage {cq: cpu}, queue asked about, want available, want potential)
CASES = [
    (
        "a lone ClusterQueue has its nominal quota minus usage",
        [cpu_cq("a", "4")],
        [],
        {"a": 1},
        "a",
        3,
        4,
    ),
    (
        "a cohort pools the nominal quota of its members",
        [cpu_cq("a", "10", cohort="c"), cpu_cq("b", "10", cohort="c")],
        [],
        {"b": 5},
        "a",
        15,
        20,
    ),
    (
        "borrowingLimit caps what comes from the cohort",
        [cpu_cq("a", "10", borrow="2", cohort="c"), cpu_cq("b", "10", cohort="c")],
        [],
        {},
        "a",
        12,
        12,
    ),
    (
        "lendingLimit keeps the rest for the lender",
        [cpu_cq("a", "10", cohort="c"), cpu_cq("b", "10", lend="4", cohort="c")],
        [],
        {},
        "a",
        14,
        14,
    ),
    (
        "the lender still uses its own kept part plus the pool",
        [cpu_cq("a", "10", cohort="c"), cpu_cq("b", "10", lend="4", cohort="c")],
        [],
        {"a": 12},
        "b",
        8,
        20,
    ),
    (
        "usage of others above their kept part comes out of the pool",
        [cpu_cq("a", "10", lend="0", cohort="c"), cpu_cq("b", "10", cohort="c")],
        [],
        {"a": 10},
        "b",
        10,
        10,
    ),
    (
        "a Cohort object adds its own quota to the pool",
        [cpu_cq("a", "2", cohort="child")],
        [cohort_with_quota("root", 5), Cohort("child", "root")],
        {},
        "a",
        7,
        7,
    ),
    (
        "a cohort's lendingLimit bounds what its subtree gives its parent",
        [cpu_cq("a", "4", cohort="left"), cpu_cq("b", "4", cohort="right")],
        [Cohort("root"), cohort_with_quota("left", 0, "root", lend=1), Cohort("right", "root")],
        {},
        "b",
        5,
        5,
    ),
    (
        "a cohort with a parent that does not exist becomes the child of an implicit cohort",
        [cpu_cq("a", "3", cohort="orphan"), cpu_cq("b", "3", cohort="ghost")],
        [Cohort("orphan", "ghost")],
        {},
        "b",
        6,
        6,
    ),
]


@pytest.mark.parametrize(
    ("cqs", "cohorts", "usage", "ask", "want_avail", "want_potential"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_available_and_potential(cqs, cohorts, usage, ask, want_avail, want_potential):
    tree = QuotaTree.build(cqs, cohorts)
    for name, cpu in usage.items():
        add_usage(tree.cluster_queues[name], {CPU: cpu * 1000})
    node = tree.cluster_queues[ask]
    assert available(node, CPU) == want_avail * 1000
    assert potential_available(node, CPU) == want_potential * 1000


def test_usage_added_then_removed_leaves_the_tree_as_it_was():
    tree = QuotaTree.build(
        [cpu_cq("a", "10", lend="3", cohort="c"), cpu_cq("b", "10", cohort="c")], []
    )
    a = tree.cluster_queues["a"]
    before = {n: dict(v.usage) for n, v in {**tree.cluster_queues, **tree.cohorts}.items()}
    add_usage(a, {CPU: 13_000})
    assert tree.cohorts["c"].usage[CPU] == 6_000  # 13 used - 7 kept locally
    add_usage(a, {CPU: 13_000}, -1)
    after = {
        n: {k: v for k, v in node.usage.items() if v}
        for n, node in {**tree.cluster_queues, **tree.cohorts}.items()
    }
    assert after == {n: {k: v for k, v in u.items() if v} for n, u in before.items()}


def test_borrowing_level_says_where_capacity_comes_from():
    tree = QuotaTree.build([cpu_cq("a", "4", cohort="c"), cpu_cq("b", "4", cohort="c")], [])
    a = tree.cluster_queues["a"]
    assert borrowing_level(a, CPU, 4000) == 0
    assert borrowing_level(a, CPU, 5000) == 1
    add_usage(a, {CPU: 5000})
    assert is_borrowing(a, [CPU])


def test_a_cycle_of_cohort_parents_is_cut_off():
    tree = QuotaTree.build([cpu_cq("a", "1", cohort="x")], [Cohort("x", "y"), Cohort("y", "x")])
    assert tree.cyclic == {"x", "y"}
    assert tree.cluster_queues["a"].parent is None


def test_every_node_knows_the_top_of_its_tree():
    cqs = [
        cpu_cq("a", "1", cohort="leaf"),
        cpu_cq("b", "1", cohort="mid"),
        cpu_cq("alone", "1"),
        cpu_cq("cut", "1", cohort="x"),
    ]
    cohorts = [Cohort("leaf", "mid"), Cohort("mid", "top"), Cohort("x", "y"), Cohort("y", "x")]
    tree = QuotaTree.build(cqs, cohorts)
    for node in [*tree.cluster_queues.values(), *tree.cohorts.values()]:
        walked = node
        while walked.parent is not None:
            walked = walked.parent
        assert node.root() is walked, node.name
    assert tree.cluster_queues["a"].root().name == "top"
    assert tree.cluster_queues["alone"].root().name == "alone"
    assert tree.cluster_queues["cut"].root().name == "cut"

"""Kueue v0.19.2 pkg/scheduler/preemption/preemption_fair_test.go TestFairPreemptions, row by row.

Each row admits unit workloads into ClusterQueues of one cohort tree and asks whom fair-sharing
preemption takes for an incoming workload whose cpu was assigned a flavor in Preempt mode, under
the row's fairSharing.preemptionStrategies (Kueue's default when it names none) and the feature
gates at their defaults (FairSharingPreemptWithinNominal on). Rows without strategies go through
the scheduler (ClusterState.preemption_targets); rows with strategies ask the policy directly.
Every row of the table is here (35 of 35), and every one passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import pytest

from extender.core.api.models import (
    ClusterQueue,
    Cohort,
    FlavorQuotas,
    ResourceGroup,
    ResourceQuota,
)
from extender.core.api.quantity import to_amount
from extender.core.scheduling.preemption import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    FairPreemption,
)
from tests.builders import CQ, WL, flavor
from tests.conformance.harness import Scenario

FILE = "pkg/scheduler/preemption/preemption_fair_test.go TestFairPreemptions"
RECLAIM, FAIR, WITHIN = "InCohortReclamation", "InCohortFairSharing", "InClusterQueue"


def _base_cq(name: str, nominal: str = "3") -> CQ:
    return (
        CQ(name)
        .cohort("all")
        .group(("default", {"cpu": nominal}))
        .preemption(within="LowerPriority", reclaim="Any", borrow="LowerPriority", threshold=-3)
    )


BASE = [
    _base_cq("a").obj(),
    _base_cq("b").obj(),
    _base_cq("c").obj(),
    CQ("preemptible").cohort("all").group(("default", {"cpu": "0"})).obj(),
]


def _cq(name: str, cohort: str | None, cpu: str, weight: str = "1", **policy: str) -> ClusterQueue:
    built = CQ(name).group(("default", {"cpu": cpu})).weight(weight)
    if cohort is not None:
        built = built.cohort(cohort)
    if policy:
        built = built.preemption(**policy)
    return built.obj()


def _cohort(
    name: str, parent: str | None = None, cpu: str | None = None, weight: str = "1"
) -> Cohort:
    groups: tuple[ResourceGroup, ...] = ()
    if cpu is not None:
        quota = ResourceQuota("cpu", to_amount("cpu", cpu))
        groups = (ResourceGroup(("cpu",), (FlavorQuotas("default", (quota,)),)),)
    return Cohort(name, parent, groups, Fraction(weight))


@dataclass
class Row:
    admitted: list[tuple[str, str, str] | tuple[str, str, str, int]]
    incoming: tuple[str, str] | tuple[str, str, int]
    target: str
    want: dict[str, str]
    cqs: list[ClusterQueue] = field(default_factory=lambda: BASE)
    cohorts: list[Cohort] = field(default_factory=list)
    strategies: tuple[str, ...] | None = None
    flavors: tuple[str, ...] = ("default",)
    assignment_flavor: str = "default"
    admitted_flavor: dict[str, str] = field(default_factory=dict)


def _units(cq: str, *names: str, priority: int = 0) -> list[tuple[str, str, str, int]]:
    return [(n, "1", cq, priority) for n in names]


LOWER, ANY = "LowerPriority", "Any"
ROWS: dict[str, Row] = {
    "reclaim nominal from user using the most": Row(
        _units("a", "a1", "a2", "a3")
        + _units("b", "b1", "b2", "b3", "b4", "b5")
        + _units("c", "c1"),
        ("c_incoming", "1"),
        "c",
        {"/b1": RECLAIM},
    ),
    "can reclaim from queue using less, if taking the latest workload from user using the "
    "most isn't enough": Row(
        [("a1", "3", "a"), ("a2", "1", "a"), ("b1", "2", "b"), ("b2", "3", "b")],
        ("c_incoming", "3"),
        "c",
        {"/a1": RECLAIM},
    ),
    "reclaim borrowable quota from user using the most": Row(
        _units("a", "a1", "a2", "a3")
        + _units("b", "b1", "b2", "b3", "b4", "b5")
        + _units("c", "c1"),
        ("a_incoming", "1"),
        "a",
        {"/b1": FAIR},
    ),
    "preempt one from each CQ borrowing": Row(
        [
            ("a1", "0.5", "a"),
            ("a2", "0.5", "a"),
            ("a3", "3", "a"),
            ("b1", "0.5", "b"),
            ("b2", "0.5", "b"),
            ("b3", "3", "b"),
        ],
        ("c_incoming", "2"),
        "c",
        {"/a1": RECLAIM, "/b1": RECLAIM},
    ),
    "can't preempt when everyone under nominal": Row(
        _units("a", "a1", "a2", "a3")
        + _units("b", "b1", "b2", "b3")
        + _units("c", "c1", "c2", "c3"),
        ("c_incoming", "1"),
        "c",
        {},
    ),
    "can't preempt when it would switch the imbalance": Row(
        _units("a", "a1", "a2", "a3") + _units("b", "b1", "b2", "b3", "b4", "b5"),
        ("a_incoming", "2"),
        "a",
        {},
    ),
    "can preempt lower priority workloads from same CQ": Row(
        _units("a", "a1_low", "a2_low", priority=-1)
        + _units("a", "a3", "a4")
        + _units("b", "b1", "b2", "b3", "b4", "b5"),
        ("a_incoming", "2"),
        "a",
        {"/a1_low": WITHIN, "/a2_low": WITHIN},
    ),
    "can preempt a combination of same CQ and highest user": Row(
        _units("a", "a_low", priority=-1)
        + _units("a", "a2", "a3")
        + _units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        ("a_incoming", "2"),
        "a",
        {"/a_low": WITHIN, "/b1": FAIR},
    ),
    "preempt huge workload if there is no other option, as long as the target CQ gets a "
    "lower share": Row([("b1", "9", "b")], ("a_incoming", "2"), "a", {"/b1": RECLAIM}),
    "can't preempt huge workload if the incoming is also huge": Row(
        [("a1", "2", "a"), ("b1", "7", "b")], ("a_incoming", "5"), "a", {}
    ),
    "can't preempt 2 smaller workloads if the incoming is huge": Row(
        [("b1", "2", "b"), ("b2", "2", "b"), ("b3", "3", "b")], ("a_incoming", "6"), "a", {}
    ),
    "preempt from target and others even if over nominal": Row(
        [("a1_low", "2", "a", -1), ("a2_low", "1", "a", -1), ("b1", "3", "b"), ("b2", "3", "b")],
        ("a_incoming", "4"),
        "a",
        {"/a1_low": WITHIN, "/b1": FAIR},
    ),
    "prefer to preempt workloads that don't make the target CQ have the biggest share": Row(
        [("b1", "2", "b"), ("b2", "1", "b"), ("b3", "2", "b"), ("c1", "1", "c")],
        ("a_incoming", "3.5"),
        "a",
        {"/b2": FAIR},
    ),
    "preempt from different cluster queues if the end result has a smaller max share": Row(
        [("b1", "2", "b"), ("b2", "2.5", "b"), ("c1", "2", "c"), ("c2", "2.5", "c")],
        ("a_incoming", "3.5"),
        "a",
        {"/b1": FAIR, "/c1": FAIR},
    ),
    "scenario above does not flap": Row(
        [("a1", "3.5", "a"), ("b2", "2.5", "b"), ("c2", "2.5", "c")],
        ("b_incoming", "2"),
        "b",
        {},
    ),
    "cannot preempt if it would make the candidate CQ go under nominal after preempting one "
    "element": Row(
        [("b1", "3", "b"), ("b2", "3", "b"), ("c1", "3", "c")], ("a_incoming", "4"), "a", {}
    ),
    "workloads under priority threshold not capriciously preempted": Row(
        _units("a", "a1", "a2", "a3")
        + _units("b", "b1", "b2", "b3")
        + _units("preemptible", "preemptible1", "preemptible2", "preemptible3", priority=-3),
        ("a_incoming", "2"),
        "a",
        {},
    ),
    "preempt lower priority first, even if big": Row(
        [("a1", "3", "a"), ("b_low", "5", "b", 0), ("b_high", "1", "b", 1)],
        ("a_incoming", "1"),
        "a",
        {"/b_low": FAIR},
        strategies=(LESS_THAN_INITIAL_SHARE,),
    ),
    "preempt workload that doesn't transfer the imbalance, even if high priority": Row(
        [("a1", "3", "a"), ("b_low", "5", "b", 0), ("b_high", "1", "b", 1)],
        ("a_incoming", "1"),
        "a",
        {"/b_high": FAIR},
        strategies=(LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    ),
    "CQ with higher weight can preempt more": Row(
        _units("a", "a1", "a2", "a3") + _units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        ("a_incoming", "2"),
        "a",
        {"/b1": FAIR, "/b2": FAIR},
        cqs=[
            _cq("a", "all", "3", "2", within=LOWER, reclaim=ANY),
            _cq("b", "all", "3", within=LOWER, reclaim=ANY),
            _cq("c", "all", "3", within=LOWER, reclaim=ANY),
        ],
    ),
    "can preempt anything borrowing from CQ with 0 weight": Row(
        _units("a", "a1", "a2", "a3") + _units("b", "b1", "b2", "b3", "b4", "b5", "b6"),
        ("a_incoming", "3"),
        "a",
        {"/b1": FAIR, "/b2": FAIR, "/b3": FAIR},
        cqs=[
            _cq("a", "all", "3", within=LOWER, reclaim=ANY),
            _cq("b", "all", "3", "0", within=LOWER, reclaim=ANY),
            _cq("c", "all", "3", within=LOWER, reclaim=ANY),
        ],
    ),
    "can't preempt nominal from CQ with 0 weight": Row(
        _units("a", "a1", "a2", "a3") + _units("b", "b1", "b2", "b3"),
        ("a_incoming", "1"),
        "a",
        {},
        cqs=[
            _cq("a", "all", "3", within=LOWER, reclaim=ANY),
            _cq("b", "all", "3", "0", within=LOWER, reclaim=ANY),
        ],
    ),
    "can't preempt nominal from Cohort with 0 weight": Row(
        _units("right-cq", "right-1"),
        ("left-1", "1"),
        "left-cq",
        {},
        cqs=[
            _cq("left-cq", "root", "0", reclaim=ANY),
            _cq("right-cq", "right-cohort", "0", "0", reclaim=ANY),
        ],
        cohorts=[_cohort("right-cohort", "root", "1", "0")],
    ),
    "can preempt within cluster queue when no cohort": Row(
        _units("a", "a1"),
        ("a_incoming", "1", 1000),
        "a",
        {"/a1": WITHIN},
        cqs=[_cq("a", None, "1", within=LOWER)],
    ),
    "hierarchical preemption": Row(
        [(f"{q}{i}", "1", q, i) for q in "bcde" for i in range(1, 6)],
        ("unit", "5"),
        "a",
        {"/b1": FAIR, "/b2": FAIR, "/c1": FAIR, "/c2": FAIR, "/e1": FAIR},
        cqs=[
            _cq("a", "LEFT", "1", "2", reclaim=ANY),
            _cq("b", "LEFT", "1"),
            _cq("c", "ROOT", "1"),
            _cq("d", "RIGHT", "1"),
            _cq("e", "RIGHT", "1", "0.99"),
        ],
        cohorts=[
            _cohort("ROOT", None, "5"),
            _cohort("LEFT", "ROOT", "5", "2"),
            _cohort("RIGHT", "ROOT", "5"),
        ],
    ),
    "borrowing cq in non-borrowing cohort is protected": Row(
        _units("a", "a1", "a2", "a3", priority=-1) + _units("b", "b1", priority=-1),
        ("unit", "5"),
        "a",
        {"/a1": WITHIN, "/a2": WITHIN, "/a3": WITHIN},
        cqs=[
            _cq("a", "ROOT", "5", "10", reclaim=ANY, within=LOWER),
            CQ("b").cohort("RIGHT").weight("0.1").obj(),
        ],
        cohorts=[_cohort("ROOT"), _cohort("RIGHT", "ROOT", "1", "0.1")],
    ),
    "forced to preempt within clusterqueue because borrowing workload too important": Row(
        [*_units("a", "a1", "a2", "a3", priority=-1), ("b1", "4", "b", 100)],
        ("unit", "4"),
        "a",
        {"/a1": WITHIN, "/a2": WITHIN, "/a3": WITHIN},
        cqs=[
            _cq("a", "ROOT", "5", "10", reclaim=LOWER, within=LOWER),
            CQ("b").cohort("RIGHT").weight("0.1").obj(),
        ],
        cohorts=[_cohort("ROOT"), _cohort("RIGHT", "ROOT", "3", "0.1")],
    ),
    "deep preemption": Row(
        _units("b", "b1"),
        ("a1", "1"),
        "a",
        {"/b1": FAIR},
        cqs=[_cq("a", "AAA", "0", reclaim=ANY), _cq("b", "BBB", "0")],
        cohorts=[
            _cohort("ROOT"),
            _cohort("A", "ROOT", weight="1.01"),
            _cohort("AA", "A"),
            _cohort("AAA", "AA"),
            _cohort("B", "ROOT", weight="0.99"),
            _cohort("BB", "B"),
            _cohort("BBB", "BB"),
            _cohort("C", "ROOT"),
            _cohort("CC", "C"),
            _cohort("CCC", "CC"),
            _cohort("CCCC", "CCC", "1"),
        ],
    ),
    "cq with zero weight can reclaim nominal quota": Row(
        _units("b", "b1"),
        ("a1", "1"),
        "a",
        {"/b1": RECLAIM},
        cqs=[_cq("a", "ROOT", "1", "0", reclaim=ANY), _cq("b", "ROOT", "0")],
    ),
    "cohort with zero weight can reclaim nominal quota": Row(
        _units("b", "b1"),
        ("a1", "1"),
        "a",
        {"/b1": FAIR},
        cqs=[_cq("a", "A", "0", "0", reclaim=ANY), _cq("b", "ROOT", "0")],
        cohorts=[_cohort("A", "ROOT", "1", "0")],
    ),
    "nominal first: workload fitting within nominal can preempt despite high aggregate DRS": Row(
        _units("a", "a_prem1", "a_prem2")
        + _units("a", "a_cheap1", "a_cheap2", "a_cheap3", "a_cheap4", "a_cheap5")
        + _units("b", "b_prem1"),
        ("a_incoming", "1"),
        "a",
        {"/b_prem1": RECLAIM},
        cqs=[
            CQ("a")
            .cohort("all")
            .group(("premium", {"cpu": "3"}), ("cheap", {"cpu": "0"}))
            .preemption(reclaim=ANY)
            .fungibility("MayStopSearch", "MayStopSearch")
            .obj(),
            CQ("b").cohort("all").group(("premium", {"cpu": "0"}), ("cheap", {"cpu": "6"})).obj(),
        ],
        flavors=("premium", "cheap"),
        assignment_flavor="premium",
        admitted_flavor={"a_cheap": "cheap"},
    ),
    "zero weight borrowing preemptor cannot preempt from a borrowing CQ with a non-zero "
    "weight": Row(
        _units("a", "a1") + _units("b", "b1", "b2"),
        ("a_incoming", "1"),
        "a",
        {},
        cqs=[_cq("a", "all", "1", "0", reclaim=ANY), _cq("b", "all", "1", "1")],
    ),
    "zero weight borrowing preemptor can preempt from a borrowing CQ which also has zero "
    "weight": Row(
        _units("b", "b1", "b2", "b3"),
        ("a_incoming", "2"),
        "a",
        {"/b1": FAIR},
        cqs=[_cq("a", "all", "1", "0", reclaim=ANY), _cq("b", "all", "0", "0")],
        cohorts=[_cohort("all", None, "3")],
    ),
    "non-zero weight borrowing preemptor preempts from a borrowing CQ": Row(
        _units("b", "b1", "b2", "b3"),
        ("a_incoming", "2"),
        "a",
        {"/b1": FAIR},
        cqs=[_cq("a", "all", "1", "1", reclaim=ANY), _cq("b", "all", "0", "1")],
        cohorts=[_cohort("all", None, "3")],
    ),
    "candidates skipped by the first strategy are still available to the second strategy": Row(
        [("p1", "2", "p"), ("y1", "2", "y"), ("y2", "2", "y"), *_units("x", "x1", "x2")],
        ("p_incoming", "1"),
        "p",
        {"/y1": FAIR, "/x1": FAIR},
        cqs=[_cq("p", "A", "2", reclaim=ANY), _cq("y", "A", "2"), _cq("x", "ROOT", "1")],
        cohorts=[_cohort("A", "ROOT", "1", "0")],
    ),
}


def _params() -> list[object]:
    return [pytest.param(row, id=name) for name, row in ROWS.items()]


def _flavor_of(row: Row, name: str) -> str:
    for prefix, chosen in row.admitted_flavor.items():
        if name.startswith(prefix):
            return chosen
    return row.assignment_flavor


@pytest.mark.parametrize("row", _params())
def test_fair_preemptions(row: Row) -> None:
    s = Scenario(
        flavors=[flavor(f) for f in row.flavors],
        cluster_queues=row.cqs,
        cohorts=row.cohorts,
        fair_sharing=True,
    )
    for admitted in row.admitted:
        name, cpu, cq = admitted[:3]
        priority = admitted[3] if len(admitted) > 3 else 0
        wl = WL(name, "").uid(name).priority(priority).request("cpu", cpu)
        s.admitted(wl, cq, cpu=_flavor_of(row, name))
    name, cpu = row.incoming[:2]
    priority = row.incoming[2] if len(row.incoming) > 2 else 0
    incoming = WL(name, "").uid(name).priority(priority).request("cpu", cpu)
    preempt = {"cpu": row.assignment_flavor}
    if row.strategies is None:
        got = s.targets(incoming, row.target, preempt)
    else:
        got = _targets_under(s, incoming, row.target, FairPreemption(row.strategies))
    assert got == row.want


def _targets_under(
    s: Scenario, incoming: WL, cq_name: str, policy: FairPreemption
) -> dict[str, str]:
    """The targets under a non-default policy, asked of the policy itself."""
    state = s.state
    workload = incoming.obj()
    cq = state.cluster_queue(cq_name)
    node = state.quota_node(cq_name)
    assert cq is not None
    assert node is not None
    request = {("default", "cpu"): workload.pod_sets[0].totals["cpu"]}
    found = policy(
        workload, cq, node, request, frozenset(request), state.admitted_in, state.lowest_priority
    )
    return {t.victim.workload.key: t.reason for t in found}

"""Kueue v0.19.2 pkg/scheduler/preemption/preemption_hierarchical_test.go
TestHierarchicalPreemptions, ported case by case.

Each row sets up cohorts, ClusterQueues and admitted workloads, and asks whom preemption
would take for an incoming workload assigned to flavor `default` in Preempt mode; the
expectation is Kueue's set of victims with their Preempted reasons.
"""

from __future__ import annotations

from collections.abc import Iterable

from extender.core.api.models import ClusterQueue, Cohort
from tests.builders import CQ, WL
from tests.conformance.harness import Scenario

FILE = "pkg/scheduler/preemption/preemption_hierarchical_test.go TestHierarchicalPreemptions"
CPU = {"cpu": "default"}


def cohort(name: str, parent: str | None = None, **quota: str) -> Cohort:
    groups = CQ("_").group(("default", dict(quota))).obj().resource_groups if quota else ()
    return Cohort(name, parent, groups)


def cq(
    name: str,
    parent: str,
    *,
    borrow: str = "Never",
    threshold: int | None = None,
    reclaim: str = "Any",
    **quota: object,
) -> ClusterQueue:
    builder = (
        CQ(name)
        .cohort(parent)
        .preemption(within="LowerPriority", reclaim=reclaim, borrow=borrow, threshold=threshold)
    )
    return builder.group(("default", dict(quota))).obj()


def scenario(cohorts: Iterable[Cohort], cluster_queues: Iterable[ClusterQueue]) -> Scenario:
    from tests.builders import flavor

    return Scenario(flavors=[flavor("default")], cluster_queues=cluster_queues, cohorts=cohorts)


def incoming(priority: int, **requests: str) -> WL:
    wl = WL("in", "").uid("wl-in").priority(priority)
    for resource, value in requests.items():
        wl.request(resource, value)
    return wl


def admitted(s: Scenario, name: str, queue: str, priority: int, cpu: str, **kw: object) -> None:
    s.admitted(WL(name, "").priority(priority).request("cpu", cpu), queue, cpu="default", **kw)  # type: ignore[arg-type]


def _c_under_r(c_cpu: str = "2") -> list[Cohort]:
    return [cohort("r"), cohort("c", "r", cpu=c_cpu)]


def test_preempt_with_hierarchical_advantage() -> None:
    s = scenario(_c_under_r(), [cq("q", "c"), cq("q_borrowing", "r")])
    admitted(s, "admitted2", "q_borrowing", 0, "2")
    assert s.targets(incoming(0, cpu="2"), "q", CPU) == {"/admitted2": "InCohortReclamation"}


def test_avoid_queues_within_nominal_quota() -> None:
    s = scenario(
        _c_under_r(), [cq("q_nominal", "r", cpu="2"), cq("q", "c"), cq("q_borrowing", "r")]
    )
    admitted(s, "admitted1", "q_nominal", -10, "2")
    admitted(s, "admitted2", "q_borrowing", 0, "2")
    assert s.targets(incoming(0, cpu="2"), "q", CPU) == {"/admitted2": "InCohortReclamation"}


def test_preempt_multiple_with_hierarchical_advantage() -> None:
    s = scenario(_c_under_r(), [cq("q", "c"), cq("q_borrowing", "r")])
    admitted(s, "admitted1", "q_borrowing", 1, "1")
    admitted(s, "admitted2", "q_borrowing", 2, "1")
    assert s.targets(incoming(0, cpu="2"), "q", CPU) == {
        "/admitted1": "InCohortReclamation",
        "/admitted2": "InCohortReclamation",
    }


def test_preempt_in_cohort_and_own_cq() -> None:
    s = scenario(
        _c_under_r("3"),
        [cq("q", "c", borrow="LowerPriority", threshold=0), cq("q_same_cohort", "c")],
    )
    admitted(s, "admitted_not_preemptible", "q_same_cohort", 1, "1")
    admitted(s, "admitted_preemptible", "q_same_cohort", 0, "1", held={"cpu": "2"})
    admitted(s, "admitted_own_queue", "q", -1, "1")
    assert s.targets(incoming(1, cpu="2"), "q", CPU) == {
        "/admitted_own_queue": "InClusterQueue",
        "/admitted_preemptible": "InCohortReclaimWhileBorrowing",
    }


def test_prefer_to_preempt_hierarchical_candidate() -> None:
    s = scenario(_c_under_r(), [cq("q", "c"), cq("q_borrowing", "r")])
    admitted(s, "admitted_borrowing", "q_borrowing", 1, "1")
    admitted(s, "admitted_same_queue", "q", -2, "1")
    assert s.targets(incoming(0, cpu="1"), "q", CPU) == {
        "/admitted_borrowing": "InCohortReclamation"
    }


def test_forced_to_preempt_priority_candidate() -> None:
    s = scenario(
        _c_under_r(),
        [
            cq("q", "c", borrow="LowerPriority", threshold=0),
            cq("q_nominal", "r", cpu="2"),
            cq("q_same_cohort", "c"),
        ],
    )
    admitted(s, "admitted_nominal", "q_nominal", -10, "2")
    admitted(s, "admitted_same_cohort", "q_same_cohort", -1, "2")
    assert s.targets(incoming(0, cpu="2"), "q", CPU) == {
        "/admitted_same_cohort": "InCohortReclaimWhileBorrowing"
    }


def test_incoming_workload_fits_in_cq_nominal_quota() -> None:
    s = scenario(
        _c_under_r(), [cq("q", "c", cpu="4"), cq("q_borrowing", "r"), cq("q_same_cohort", "c")]
    )
    admitted(s, "admitted_borrowing", "q_borrowing", 10, "3")
    admitted(s, "admitted_same_cohort", "q_same_cohort", 10, "3")
    assert s.targets(incoming(0, cpu="4"), "q", CPU) == {
        "/admitted_borrowing": "InCohortReclamation",
        "/admitted_same_cohort": "InCohortReclamation",
    }


def _hierarchical_and_priority() -> Scenario:
    return scenario(
        [cohort("r", cpu="1"), cohort("c", "r", cpu="4")],
        [
            cq("q", "c", borrow="LowerPriority", threshold=0, reclaim="LowerPriority"),
            cq("q_borrowing", "r"),
            cq("q_same_cohort", "c"),
        ],
    )


def test_preempt_hierarchical_and_priority_candidates() -> None:
    s = _hierarchical_and_priority()
    admitted(s, "admitted_borrowing", "q_borrowing", -1, "2")
    admitted(s, "admitted_same_cohort_preemptible", "q_same_cohort", -1, "1")
    admitted(s, "admitted_borrowing_not_preemptible", "q_borrowing", 1, "2")
    assert s.targets(incoming(0, cpu="3"), "q", CPU) == {
        "/admitted_borrowing": "InCohortReclamation",
        "/admitted_same_cohort_preemptible": "InCohortReclaimWhileBorrowing",
    }


def test_preempt_hierarchical_candidates_and_inside_cq() -> None:
    s = _hierarchical_and_priority()
    admitted(s, "admitted_borrowing", "q_borrowing", -1, "2")
    admitted(s, "admitted_same_queue_preemptible", "q", -1, "1")
    admitted(s, "admitted_borrowing_not_preemptible", "q_borrowing", 1, "2")
    assert s.targets(incoming(0, cpu="3"), "q", CPU) == {
        "/admitted_borrowing": "InCohortReclamation",
        "/admitted_same_queue_preemptible": "InClusterQueue",
    }


def test_reclaim_nominal_quota_from_lowest_priority_workload_excluding_non_borrowing() -> None:
    s = scenario(
        _c_under_r("3"), [cq("q", "c"), cq("q_borrowing", "r"), cq("q_nominal", "r", cpu="2")]
    )
    admitted(s, "admitted_borrowing_prio_8", "q_borrowing", 8, "1")
    admitted(s, "admitted_borrowing_prio_9", "q_borrowing", 9, "1")
    admitted(s, "admitted_borrowing_prio_10", "q_borrowing", 9, "1")
    admitted(s, "admitted_nominal", "q_nominal", -2, "2")
    assert s.targets(incoming(0, cpu="1"), "q", CPU) == {
        "/admitted_borrowing_prio_8": "InCohortReclamation"
    }


def test_infeasible_preemption_all_available_workloads_in_pruned_subtrees() -> None:
    s = scenario(
        [cohort("r"), cohort("c", "r", cpu="2"), cohort("c_other", "r", cpu="2")],
        [cq("q_other", "c_other"), cq("q", "c"), cq("q_same_cohort", "c")],
    )
    admitted(s, "admitted_other_1", "q_other", -10, "1")
    admitted(s, "admitted_other_2", "q_other", -10, "1")
    admitted(s, "admitted_same_cohort", "q_same_cohort", 0, "2")
    assert s.targets(incoming(0, cpu="2"), "q", CPU) == {}


def test_hiearchical_preemption_with_multiple_resources() -> None:
    s = scenario(
        [
            cohort("r", cpu="3"),
            Cohort(
                "c",
                "r",
                CQ("_").group(("default", {"cpu": "4", "memory": "4Gi"})).obj().resource_groups,
            ),
        ],
        [cq("q", "c"), cq("q_borrowing", "r"), cq("q_same_cohort", "c")],
    )
    both = {"cpu": "default", "memory": "default"}
    s.admitted(
        WL("admitted_borrowing", "").priority(0).request("cpu", "3").request("memory", "1Gi"),
        "q_borrowing",
        {"main": both},
    )
    s.admitted(
        WL("admitted_same_cohort", "").priority(-2).request("cpu", "1").request("memory", "3Gi"),
        "q_same_cohort",
        {"main": both},
    )
    assert s.targets(incoming(-2, cpu="2", memory="1Gi"), "q", both) == {
        "/admitted_borrowing": "InCohortReclamation"
    }


def test_prefer_to_preempt_evicted_workloads() -> None:
    s = scenario(
        _c_under_r(),
        [
            cq("q", "c", borrow="LowerPriority", threshold=0),
            cq("q_borrowing", "r"),
            cq("q_same_cohort", "c"),
        ],
    )
    admitted(s, "admitted_borrowing", "q_borrowing", -10, "1")
    admitted(s, "evicted_same_cohort", "q_same_cohort", -1, "1", evicted=True)
    # Kueue counts one preemption, already under way: the evicted workload is the target.
    assert set(s.targets(incoming(0, cpu="1"), "q", CPU)) == {"/evicted_same_cohort"}


def test_respect_lending_limits() -> None:
    s = scenario(_c_under_r(), [cq("q", "c", cpu=("3", None, "2")), cq("q_borrowing", "r")])
    admitted(s, "admitted_borrowing", "q_borrowing", 0, "4")
    assert s.targets(incoming(-2, cpu="5"), "q", CPU) == {
        "/admitted_borrowing": "InCohortReclamation"
    }


def test_reclaim_in_complex_hierarchy() -> None:
    s = scenario(
        [
            cohort("r"),
            cohort("c11", "r", cpu="4"),
            cohort("c12", "r", cpu="4"),
            cohort("c21", "c11", cpu="4"),
            cohort("c22", "c11", cpu="4"),
            cohort("c23", "c11", cpu="4"),
            cohort("c31", "c21", cpu="4"),
            cohort("c32", "c21", cpu="4"),
        ],
        [
            CQ(name).cohort(parent).preemption(within="LowerPriority", reclaim="Any").obj()
            for name, parent in (
                ("q1", "c12"),
                ("q2", "c23"),
                ("q3", "c22"),
                ("q4", "c32"),
                ("q5", "c31"),
            )
        ],
    )
    for name, queue, priority, cpu in (
        ("admitted_borrowing_1", "q1", -6, "4"),
        ("admitted_borrowing_2", "q1", -5, "4"),
        ("admitted_borrowing_3", "q2", -9, "4"),
        ("admitted_borrowing_4", "q2", -10, "4"),
        ("admitted_borrowing_5", "q3", -4, "4"),
        ("admitted_borrowing_6", "q3", -3, "3"),
        ("admitted_borrowing_7", "q4", 4, "2"),
        ("admitted_borrowing_8", "q4", 2, "3"),
    ):
        admitted(s, name, queue, priority, cpu)
    assert s.targets(incoming(-2, cpu="7"), "q5", CPU) == {
        "/admitted_borrowing_1": "InCohortReclamation",
        "/admitted_borrowing_4": "InCohortReclamation",
    }

"""Kueue v0.19.2 pkg/scheduler/preemption/preemption_test.go TestPreemption, ported row by row.

Each row admits workloads into Kueue's shared set of ClusterQueues (or its own) and asks whom
preemption takes for an incoming workload whose resources were assigned a flavor in Preempt
mode (or Fit mode); the expectation is Kueue's set of victims with their Preempted reasons.
Every row of the table is here (36 of 36).
"""

from __future__ import annotations

from extender.core.api.models import ClusterQueue, Cohort
from tests.builders import CQ, WL, flavor
from tests.conformance.harness import Scenario

FILE = "pkg/scheduler/preemption/preemption_test.go TestPreemption"
FLAVORS = [flavor("default"), flavor("alpha"), flavor("beta")]


def default_cluster_queues() -> list[ClusterQueue]:
    """TestPreemption's defaultClusterQueues."""
    lower = "LowerPriority"
    six = {"cpu": ("6", "6"), "memory": ("3Gi", "3Gi")}
    no_limits = {"cpu": "6", "memory": "3Gi"}
    shared = {"borrow": lower, "threshold": 0}
    return [
        CQ("standalone")
        .group(("default", {"cpu": "6"}))
        .group(("alpha", {"memory": "3Gi"}), ("beta", {"memory": "3Gi"}))
        .preemption(within=lower)
        .obj(),
        CQ("c1")
        .cohort("cohort")
        .group(("default", six))
        .preemption(within=lower, reclaim=lower)
        .obj(),
        CQ("c2")
        .cohort("cohort")
        .group(("default", six))
        .preemption(within="Never", reclaim="Any")
        .obj(),
        CQ("d1")
        .cohort("cohort-no-limits")
        .group(("default", no_limits))
        .preemption(within=lower, reclaim=lower)
        .obj(),
        CQ("d2")
        .cohort("cohort-no-limits")
        .group(("default", no_limits))
        .preemption(within="Never", reclaim="Any")
        .obj(),
        CQ("l1")
        .cohort("legion")
        .group(("default", {"cpu": ("6", "12"), "memory": ("3Gi", "6Gi")}))
        .preemption(within=lower, reclaim=lower)
        .obj(),
        CQ("preventStarvation")
        .group(("default", {"cpu": "6"}))
        .preemption(within="LowerOrNewerEqualPriority")
        .obj(),
        CQ("a_standard")
        .cohort("with_shared_cq")
        .group(("default", {"cpu": ("1", "12")}))
        .preemption(within="Never", reclaim=lower, **shared)
        .obj(),
        CQ("b_standard")
        .cohort("with_shared_cq")
        .group(("default", {"cpu": ("1", "12")}))
        .preemption(within=lower, reclaim="Any", **shared)
        .obj(),
        CQ("a_best_effort")
        .cohort("with_shared_cq")
        .group(("default", {"cpu": ("1", "12")}))
        .preemption(within="Never", reclaim=lower, **shared)
        .obj(),
        CQ("b_best_effort")
        .cohort("with_shared_cq")
        .group(("default", {"cpu": ("0", "13")}))
        .preemption(within="Never", reclaim=lower, **shared)
        .obj(),
        CQ("shared").cohort("with_shared_cq").group(("default", {"cpu": "10"})).obj(),
        CQ("lend1")
        .cohort("cohort-lend")
        .group(("default", {"cpu": ("6", None, "4")}))
        .preemption(within=lower, reclaim=lower)
        .obj(),
        CQ("lend2")
        .cohort("cohort-lend")
        .group(("default", {"cpu": ("6", None, "2")}))
        .preemption(within=lower, reclaim=lower)
        .obj(),
        CQ("a")
        .cohort("cohort-three")
        .group(("default", {"cpu": "2", "memory": "2"}))
        .preemption(within=lower, reclaim="Any")
        .obj(),
        CQ("b").cohort("cohort-three").group(("default", {"cpu": "2", "memory": "2"})).obj(),
        CQ("c").cohort("cohort-three").group(("default", {"cpu": "2", "memory": "2"})).obj(),
    ]


def scenario() -> Scenario:
    return Scenario(flavors=FLAVORS, cluster_queues=default_cluster_queues())


def test_preempt_lowest_priority() -> None:
    """preempt lowest priority"""
    s = scenario()
    s.admitted(
        WL("low", "").priority(-1).request("cpu", "2"),
        "standalone",
        cpu="default",
        held={"cpu": "2000m"},
    )
    s.admitted(
        WL("mid", "").request("cpu", "2"), "standalone", cpu="default", held={"cpu": "2000m"}
    )
    s.admitted(
        WL("high", "").priority(1).request("cpu", "2"),
        "standalone",
        cpu="default",
        held={"cpu": "2000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "2"), "standalone", {"cpu": "default"}
    )
    assert got == {"/low": "InClusterQueue"}


def test_preempt_multiple() -> None:
    """preempt multiple"""
    s = scenario()
    s.admitted(
        WL("low", "").priority(-1).request("cpu", "2"),
        "standalone",
        cpu="default",
        held={"cpu": "2000m"},
    )
    s.admitted(
        WL("mid", "").request("cpu", "2"), "standalone", cpu="default", held={"cpu": "2000m"}
    )
    s.admitted(
        WL("high", "").priority(1).request("cpu", "2"),
        "standalone",
        cpu="default",
        held={"cpu": "2000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "3"), "standalone", {"cpu": "default"}
    )
    assert got == {"/low": "InClusterQueue", "/mid": "InClusterQueue"}


def test_no_preemption_for_low_priority() -> None:
    """no preemption for low priority"""
    s = scenario()
    s.admitted(
        WL("low", "").priority(-1).request("cpu", "3"),
        "standalone",
        cpu="default",
        held={"cpu": "3000m"},
    )
    s.admitted(
        WL("mid", "").request("cpu", "3"), "standalone", cpu="default", held={"cpu": "3000m"}
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(-1).request("cpu", "1"), "standalone", {"cpu": "default"}
    )
    assert got == {}


def test_not_enough_low_priority_workloads() -> None:
    """not enough low priority workloads"""
    s = scenario()
    s.admitted(
        WL("low", "").priority(-1).request("cpu", "3"),
        "standalone",
        cpu="default",
        held={"cpu": "3000m"},
    )
    s.admitted(
        WL("mid", "").request("cpu", "3"), "standalone", cpu="default", held={"cpu": "3000m"}
    )
    got = s.targets(WL("in", "").uid("wl-in").request("cpu", "4"), "standalone", {"cpu": "default"})
    assert got == {}


def test_some_free_quota_preempt_low_priority() -> None:
    """some free quota, preempt low priority"""
    s = scenario()
    s.admitted(
        WL("low", "").priority(-1).request("cpu", "1"),
        "standalone",
        cpu="default",
        held={"cpu": "1000m"},
    )
    s.admitted(
        WL("mid", "").request("cpu", "1"), "standalone", cpu="default", held={"cpu": "1000m"}
    )
    s.admitted(
        WL("high", "").priority(1).request("cpu", "3"),
        "standalone",
        cpu="default",
        held={"cpu": "3000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "2"), "standalone", {"cpu": "default"}
    )
    assert got == {"/low": "InClusterQueue"}


def test_minimal_set_excludes_low_priority() -> None:
    """minimal set excludes low priority"""
    s = scenario()
    s.admitted(
        WL("low", "").priority(-1).request("cpu", "1"),
        "standalone",
        cpu="default",
        held={"cpu": "1000m"},
    )
    s.admitted(
        WL("mid", "").request("cpu", "2"), "standalone", cpu="default", held={"cpu": "2000m"}
    )
    s.admitted(
        WL("high", "").priority(1).request("cpu", "3"),
        "standalone",
        cpu="default",
        held={"cpu": "3000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "2"), "standalone", {"cpu": "default"}
    )
    assert got == {"/mid": "InClusterQueue"}


def test_only_preempt_workloads_using_the_chosen_flavor() -> None:
    """only preempt workloads using the chosen flavor"""
    s = scenario()
    s.admitted(
        WL("low", "").priority(-1).request("memory", "2Gi"),
        "standalone",
        memory="alpha",
        held={"memory": "2Gi"},
    )
    s.admitted(
        WL("mid", "").request("memory", "1Gi"), "standalone", memory="beta", held={"memory": "1Gi"}
    )
    s.admitted(
        WL("high", "").priority(1).request("memory", "1Gi"),
        "standalone",
        memory="beta",
        held={"memory": "1Gi"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "1").request("memory", "2Gi"),
        "standalone",
        {"memory": "beta"},
        fit={"cpu": "default"},
    )
    assert got == {"/mid": "InClusterQueue"}


def test_reclaim_quota_from_borrower() -> None:
    """reclaim quota from borrower"""
    s = scenario()
    s.admitted(
        WL("c1-low", "").priority(-1).request("cpu", "3"),
        "c1",
        cpu="default",
        held={"cpu": "3000m"},
    )
    s.admitted(WL("c2-mid", "").request("cpu", "3"), "c2", cpu="default", held={"cpu": "3000m"})
    s.admitted(
        WL("c2-high", "").priority(1).request("cpu", "6"),
        "c2",
        cpu="default",
        held={"cpu": "6000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "3"), "c1", {"cpu": "default"}
    )
    assert got == {"/c2-mid": "InCohortReclamation"}


def test_reclaim_quota_if_workload_requests_0_resources_for_a_resource_at_nominal_quota() -> None:
    """reclaim quota if workload requests 0 resources for a resource at nominal quota"""
    s = scenario()
    s.admitted(
        WL("c1-low", "").priority(-1).request("cpu", "3").request("memory", "3Gi"),
        "c1",
        cpu="default",
        memory="default",
    )
    s.admitted(WL("c2-mid", "").request("cpu", "3"), "c2", cpu="default")
    s.admitted(WL("c2-high", "").priority(1).request("cpu", "6"), "c2", cpu="default")
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "3").request("memory", "0"),
        "c1",
        {"cpu": "default"},
        fit={"memory": "default"},
    )
    assert got == {"/c2-mid": "InCohortReclamation"}


def test_no_workloads_borrowing() -> None:
    """no workloads borrowing"""
    s = scenario()
    s.admitted(
        WL("c1-high", "").priority(1).request("cpu", "4"),
        "c1",
        cpu="default",
        held={"cpu": "4000m"},
    )
    s.admitted(
        WL("c2-low-1", "").priority(-1).request("cpu", "4"),
        "c2",
        cpu="default",
        held={"cpu": "4000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "4"), "c1", {"cpu": "default"}
    )
    assert got == {}


def test_not_enough_workloads_borrowing() -> None:
    """not enough workloads borrowing"""
    s = scenario()
    s.admitted(
        WL("c1-high", "").priority(1).request("cpu", "4"),
        "c1",
        cpu="default",
        held={"cpu": "4000m"},
    )
    s.admitted(
        WL("c2-low-1", "").priority(-1).request("cpu", "4"),
        "c2",
        cpu="default",
        held={"cpu": "4000m"},
    )
    s.admitted(
        WL("c2-low-2", "").priority(-1).request("cpu", "4"),
        "c2",
        cpu="default",
        held={"cpu": "4000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "4"), "c1", {"cpu": "default"}
    )
    assert got == {}


def test_preempting_locally_and_borrowing_other_resources_in_cohort_without_cohort_candidates() -> (
    None
):
    """preempting locally and borrowing other resources in cohort, without cohort candidates"""
    s = scenario()
    s.admitted(
        WL("c1-low", "").priority(-1).request("cpu", "4"),
        "c1",
        cpu="default",
        held={"cpu": "4000m"},
    )
    s.admitted(
        WL("c2-low-1", "").priority(-1).request("cpu", "4"),
        "c2",
        cpu="default",
        held={"cpu": "4000m"},
    )
    s.admitted(
        WL("c2-high-2", "").priority(1).request("cpu", "4"),
        "c2",
        cpu="default",
        held={"cpu": "4000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "4").request("memory", "5Gi"),
        "c1",
        {"cpu": "default", "memory": "default"},
    )
    assert got == {"/c1-low": "InClusterQueue"}


def test_preempting_locally_and_borrowing_same_resource_in_cohort() -> None:
    """preempting locally and borrowing same resource in cohort"""
    s = scenario()
    s.admitted(
        WL("c1-med", "").priority(0).request("cpu", "4"), "c1", cpu="default", held={"cpu": "4000m"}
    )
    s.admitted(
        WL("c1-low", "").priority(-1).request("cpu", "4"),
        "c1",
        cpu="default",
        held={"cpu": "4000m"},
    )
    s.admitted(
        WL("c2-low-1", "").priority(-1).request("cpu", "4"),
        "c2",
        cpu="default",
        held={"cpu": "4000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "4"), "c1", {"cpu": "default"}
    )
    assert got == {"/c1-low": "InClusterQueue"}


def test_preempting_locally_and_borrowing_same_resource_in_cohort_no_borrowing_limit_in_the_cohort() -> (
    None
):
    """preempting locally and borrowing same resource in cohort; no borrowing limit in the cohort"""
    s = scenario()
    s.admitted(
        WL("d1-med", "").priority(0).request("cpu", "4"), "d1", cpu="default", held={"cpu": "4"}
    )
    s.admitted(
        WL("d1-low", "").priority(-1).request("cpu", "4"), "d1", cpu="default", held={"cpu": "4"}
    )
    s.admitted(
        WL("d2-low-1", "").priority(-1).request("cpu", "4"), "d2", cpu="default", held={"cpu": "4"}
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "4"), "d1", {"cpu": "default"}
    )
    assert got == {"/d1-low": "InClusterQueue"}


def test_preempting_locally_and_borrowing_other_resources_in_cohort_with_cohort_candidates() -> (
    None
):
    """preempting locally and borrowing other resources in cohort, with cohort candidates"""
    s = scenario()
    s.admitted(
        WL("c1-med", "").priority(0).request("cpu", "4"), "c1", cpu="default", held={"cpu": "4000m"}
    )
    s.admitted(
        WL("c2-low-1", "").priority(-1).request("cpu", "5"),
        "c2",
        cpu="default",
        held={"cpu": "5000m"},
    )
    s.admitted(
        WL("c2-low-2", "").priority(-1).request("cpu", "1"),
        "c2",
        cpu="default",
        held={"cpu": "1000m"},
    )
    s.admitted(
        WL("c2-low-3", "").priority(-1).request("cpu", "1"),
        "c2",
        cpu="default",
        held={"cpu": "1000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "2").request("memory", "5Gi"),
        "c1",
        {"cpu": "default", "memory": "default"},
    )
    assert got == {"/c1-med": "InClusterQueue"}


def test_preempting_locally_and_not_borrowing_same_resource_in_1_queue_cohort() -> None:
    """preempting locally and not borrowing same resource in 1-queue cohort"""
    s = scenario()
    s.admitted(
        WL("l1-med", "").priority(0).request("cpu", "4"), "l1", cpu="default", held={"cpu": "4000m"}
    )
    s.admitted(
        WL("l1-low", "").priority(-1).request("cpu", "2"),
        "l1",
        cpu="default",
        held={"cpu": "2000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "4"), "l1", {"cpu": "default"}
    )
    assert got == {"/l1-med": "InClusterQueue"}


def test_do_not_reclaim_borrowed_quota_from_same_priority_for_withincohort_reclaimfromlowerpriority() -> (
    None
):
    """do not reclaim borrowed quota from same priority for withinCohort=ReclaimFromLowerPriority"""
    s = scenario()
    s.admitted(WL("c1", "").request("cpu", "2"), "c1", cpu="default", held={"cpu": "2000m"})
    s.admitted(WL("c2-1", "").request("cpu", "4"), "c2", cpu="default", held={"cpu": "4000m"})
    s.admitted(WL("c2-2", "").request("cpu", "4"), "c2", cpu="default", held={"cpu": "4000m"})
    got = s.targets(WL("in", "").uid("wl-in").request("cpu", "4"), "c1", {"cpu": "default"})
    assert got == {}


def test_reclaim_borrowed_quota_from_same_priority_for_withincohort_reclaimfromany() -> None:
    """reclaim borrowed quota from same priority for withinCohort=ReclaimFromAny"""
    s = scenario()
    s.admitted(WL("c1-1", "").request("cpu", "4"), "c1", cpu="default", held={"cpu": "4000m"})
    s.admitted(
        WL("c1-2", "").priority(1).request("cpu", "4"), "c1", cpu="default", held={"cpu": "4000m"}
    )
    s.admitted(WL("c2", "").request("cpu", "2"), "c2", cpu="default", held={"cpu": "2000m"})
    got = s.targets(WL("in", "").uid("wl-in").request("cpu", "4"), "c2", {"cpu": "default"})
    assert got == {"/c1-1": "InCohortReclamation"}


def test_preempt_from_all_clusterqueues_in_cohort() -> None:
    """preempt from all ClusterQueues in cohort"""
    s = scenario()
    s.admitted(
        WL("c1-low", "").priority(-1).request("cpu", "3"),
        "c1",
        cpu="default",
        held={"cpu": "3000m"},
    )
    s.admitted(WL("c1-mid", "").request("cpu", "2"), "c1", cpu="default", held={"cpu": "2000m"})
    s.admitted(
        WL("c2-low", "").priority(-1).request("cpu", "3"),
        "c2",
        cpu="default",
        held={"cpu": "3000m"},
    )
    s.admitted(WL("c2-mid", "").request("cpu", "4"), "c2", cpu="default", held={"cpu": "4000m"})
    got = s.targets(WL("in", "").uid("wl-in").request("cpu", "4"), "c1", {"cpu": "default"})
    assert got == {"/c1-low": "InClusterQueue", "/c2-low": "InCohortReclamation"}


def test_can_t_preempt_workloads_in_clusterqueue_for_withinclusterqueue_never() -> None:
    """can't preempt workloads in ClusterQueue for withinClusterQueue=Never"""
    s = scenario()
    s.admitted(
        WL("c2-low", "").priority(-1).request("cpu", "3"),
        "c2",
        cpu="default",
        held={"cpu": "3000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "4"), "c2", {"cpu": "default"}
    )
    assert got == {}


def test_each_podset_preempts_a_different_flavor() -> None:
    """each podset preempts a different flavor"""
    s = scenario()
    s.admitted(
        WL("low-alpha", "").priority(-1).request("memory", "2Gi"),
        "standalone",
        memory="alpha",
        held={"memory": "2Gi"},
    )
    s.admitted(
        WL("low-beta", "").priority(-1).request("memory", "2Gi"),
        "standalone",
        memory="beta",
        held={"memory": "2Gi"},
    )
    incoming = (
        WL("in", "")
        .uid("wl-in")
        .pod_set("launcher", 1, memory="2Gi")
        .pod_set("workers", 2, memory="1Gi")
    )
    got = s.targets(
        incoming, "standalone", {"launcher": {"memory": "alpha"}, "workers": {"memory": "beta"}}
    )
    assert got == {"/low-alpha": "InClusterQueue", "/low-beta": "InClusterQueue"}


def test_preempt_newer_workloads_with_the_same_priority() -> None:
    """preempt newer workloads with the same priority"""
    s = scenario()
    s.admitted(
        WL("wl1", "").priority(2).request("cpu", "2"),
        "preventStarvation",
        cpu="default",
        held={"cpu": "2"},
    )
    s.admitted(
        WL("wl2", "").priority(1).request("cpu", "2").created(0),
        "preventStarvation",
        cpu="default",
        held={"cpu": "2"},
        at=1,
    )
    s.admitted(
        WL("wl3", "").priority(1).request("cpu", "2").created(0),
        "preventStarvation",
        cpu="default",
        held={"cpu": "2"},
    )
    incoming = WL("in", "").uid("wl-in").priority(1).created(-15).pod_set("launcher", 1, cpu="2")
    got = s.targets(incoming, "preventStarvation", {"launcher": {"cpu": "default"}})
    assert got == {"/wl2": "InClusterQueue"}


def test_use_borrowwithincohort_allow_preempting_a_lower_priority_workload_from_another_clusterqueue_while_borrowing() -> (
    None
):
    """use BorrowWithinCohort; allow preempting a lower-priority workload from another ClusterQueue while borrowing"""
    s = scenario()
    s.admitted(
        WL("a_best_effort_low", "").priority(-1).request("cpu", "10"),
        "a_best_effort",
        cpu="default",
        held={"cpu": "10"},
    )
    s.admitted(
        WL("b_best_effort_low", "").priority(-1).request("cpu", "1"),
        "b_best_effort",
        cpu="default",
        held={"cpu": "1"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").request("cpu", "10"), "a_standard", {"cpu": "default"}
    )
    assert got == {"/a_best_effort_low": "InCohortReclaimWhileBorrowing"}


def test_use_borrowwithincohort_don_t_allow_preempting_a_lower_priority_workload_with_priority_above_maxprioritythreshold_if_borrowing_is_required_even_after_the_preemption() -> (
    None
):
    """use BorrowWithinCohort; don't allow preempting a lower-priority workload with priority above MaxPriorityThreshold, if borrowing is required even after the preemption"""
    s = scenario()
    s.admitted(
        WL("b_standard", "").priority(1).request("cpu", "10"),
        "b_standard",
        cpu="default",
        held={"cpu": "10000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(2).request("cpu", "10"), "a_standard", {"cpu": "default"}
    )
    assert got == {}


def test_use_borrowwithincohort_allow_preempting_a_lower_priority_workload_with_priority_above_maxprioritythreshold_if_borrowing_is_not_required_after_the_preemption() -> (
    None
):
    """use BorrowWithinCohort; allow preempting a lower-priority workload with priority above MaxPriorityThreshold, if borrowing is not required after the preemption"""
    s = scenario()
    s.admitted(
        WL("b_standard", "").priority(1).request("cpu", "13"),
        "b_standard",
        cpu="default",
        held={"cpu": "13000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(2).request("cpu", "1"), "a_standard", {"cpu": "default"}
    )
    assert got == {"/b_standard": "InCohortReclamation"}


def test_use_borrowwithincohort_don_t_allow_for_preemption_of_lower_priority_workload_from_the_same_clusterqueue() -> (
    None
):
    """use BorrowWithinCohort; don't allow for preemption of lower-priority workload from the same ClusterQueue"""
    s = scenario()
    s.admitted(
        WL("a_standard", "").priority(1).request("cpu", "13"),
        "a_standard",
        cpu="default",
        held={"cpu": "13000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(2).request("cpu", "1"), "a_standard", {"cpu": "default"}
    )
    assert got == {}


def test_use_borrowwithincohort_only_preempt_from_cq_if_no_workloads_below_threshold_and_already_above_nominal() -> (
    None
):
    """use BorrowWithinCohort; only preempt from CQ if no workloads below threshold and already above nominal"""
    s = scenario()
    s.admitted(
        WL("a_standard_1", "").priority(1).request("cpu", "10"),
        "a_standard",
        cpu="default",
        held={"cpu": "10"},
    )
    s.admitted(
        WL("a_standard_2", "").priority(1).request("cpu", "1"),
        "a_standard",
        cpu="default",
        held={"cpu": "1"},
    )
    s.admitted(
        WL("b_standard_1", "").priority(1).request("cpu", "1"),
        "b_standard",
        cpu="default",
        held={"cpu": "1"},
    )
    s.admitted(
        WL("b_standard_2", "").priority(2).request("cpu", "1"),
        "b_standard",
        cpu="default",
        held={"cpu": "1"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(3).request("cpu", "1"), "b_standard", {"cpu": "default"}
    )
    assert got == {"/b_standard_1": "InClusterQueue"}


def test_use_borrowwithincohort_preempt_from_cq_and_from_other_cqs_with_workloads_below_threshold() -> (
    None
):
    """use BorrowWithinCohort; preempt from CQ and from other CQs with workloads below threshold"""
    s = scenario()
    s.admitted(
        WL("b_standard_high", "").priority(2).request("cpu", "10"),
        "b_standard",
        cpu="default",
        held={"cpu": "10"},
    )
    s.admitted(
        WL("b_standard_mid", "").priority(1).request("cpu", "1"),
        "b_standard",
        cpu="default",
        held={"cpu": "1"},
    )
    s.admitted(
        WL("a_best_effort_low", "").priority(-1).request("cpu", "1"),
        "a_best_effort",
        cpu="default",
        held={"cpu": "1"},
    )
    s.admitted(
        WL("a_best_effort_lower", "").priority(-2).request("cpu", "1"),
        "a_best_effort",
        cpu="default",
        held={"cpu": "1"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(2).request("cpu", "2"), "b_standard", {"cpu": "default"}
    )
    assert got == {
        "/a_best_effort_lower": "InCohortReclaimWhileBorrowing",
        "/b_standard_mid": "InClusterQueue",
    }


def test_reclaim_quota_from_lender() -> None:
    """reclaim quota from lender"""
    s = scenario()
    s.admitted(
        WL("lend1-low", "").priority(-1).request("cpu", "3"),
        "lend1",
        cpu="default",
        held={"cpu": "3000m"},
    )
    s.admitted(
        WL("lend2-mid", "").request("cpu", "3"), "lend2", cpu="default", held={"cpu": "3000m"}
    )
    s.admitted(
        WL("lend2-high", "").priority(1).request("cpu", "4"),
        "lend2",
        cpu="default",
        held={"cpu": "4000m"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(1).request("cpu", "3"), "lend1", {"cpu": "default"}
    )
    assert got == {"/lend2-mid": "InCohortReclamation"}


def test_preempt_from_all_clusterqueues_in_cohort_lend() -> None:
    """preempt from all ClusterQueues in cohort-lend"""
    s = scenario()
    s.admitted(
        WL("lend1-low", "").priority(-1).request("cpu", "3"),
        "lend1",
        cpu="default",
        held={"cpu": "3000m"},
    )
    s.admitted(
        WL("lend1-mid", "").request("cpu", "2"), "lend1", cpu="default", held={"cpu": "2000m"}
    )
    s.admitted(
        WL("lend2-low", "").priority(-1).request("cpu", "3"),
        "lend2",
        cpu="default",
        held={"cpu": "3000m"},
    )
    s.admitted(
        WL("lend2-mid", "").request("cpu", "4"), "lend2", cpu="default", held={"cpu": "4000m"}
    )
    got = s.targets(WL("in", "").uid("wl-in").request("cpu", "4"), "lend1", {"cpu": "default"})
    assert got == {"/lend1-low": "InClusterQueue", "/lend2-low": "InCohortReclamation"}


def test_cannot_preempt_from_other_clusterqueues_if_exceeds_requestable_quota_including_lending_limit() -> (
    None
):
    """cannot preempt from other ClusterQueues if exceeds requestable quota including lending limit"""
    s = scenario()
    s.admitted(
        WL("lend2-low", "").priority(-1).request("cpu", "10"),
        "lend2",
        cpu="default",
        held={"cpu": "10"},
    )
    got = s.targets(WL("in", "").uid("wl-in").request("cpu", "9"), "lend1", {"cpu": "default"})
    assert got == {}


def test_preemptions_from_cq_when_target_queue_is_exhausted_for_the_single_requested_resource() -> (
    None
):
    """preemptions from cq when target queue is exhausted for the single requested resource"""
    s = scenario()
    s.admitted(WL("a1", "").priority(-2).request("cpu", "1"), "a", cpu="default", held={"cpu": "1"})
    s.admitted(WL("a2", "").priority(-2).request("cpu", "1"), "a", cpu="default", held={"cpu": "1"})
    s.admitted(WL("a3", "").priority(-1).request("cpu", "1"), "a", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b1", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b2", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b3", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    got = s.targets(
        WL("in", "").uid("wl-in").priority(0).request("cpu", "2"), "a", {"cpu": "default"}
    )
    assert got == {"/a1": "InClusterQueue", "/a2": "InClusterQueue"}


def test_preemptions_from_cq_when_target_queue_is_exhausted_for_two_requested_resources() -> None:
    """preemptions from cq when target queue is exhausted for two requested resources"""
    s = scenario()
    s.admitted(
        WL("a1", "").priority(-2).request("cpu", "1").request("memory", "1"),
        "a",
        cpu="default",
        memory="default",
        held={"cpu": "1", "memory": "1"},
    )
    s.admitted(
        WL("a2", "").priority(-2).request("cpu", "1").request("memory", "1"),
        "a",
        cpu="default",
        memory="default",
        held={"cpu": "1", "memory": "1"},
    )
    s.admitted(
        WL("a3", "").priority(-1).request("cpu", "1").request("memory", "1"),
        "a",
        cpu="default",
        memory="default",
        held={"cpu": "1", "memory": "1"},
    )
    s.admitted(
        WL("b1", "").priority(0).request("cpu", "1").request("memory", "1"),
        "b",
        cpu="default",
        memory="default",
        held={"cpu": "1", "memory": "1"},
    )
    s.admitted(
        WL("b2", "").priority(0).request("cpu", "1").request("memory", "1"),
        "b",
        cpu="default",
        memory="default",
        held={"cpu": "1", "memory": "1"},
    )
    s.admitted(
        WL("b3", "").priority(0).request("cpu", "1").request("memory", "1"),
        "b",
        cpu="default",
        memory="default",
        held={"cpu": "1", "memory": "1"},
    )
    got = s.targets(
        WL("in", "").uid("wl-in").priority(0).request("cpu", "2").request("memory", "2"),
        "a",
        {"cpu": "default", "memory": "default"},
    )
    assert got == {"/a1": "InClusterQueue", "/a2": "InClusterQueue"}


def test_preemptions_from_cq_when_target_queue_is_exhausted_for_one_requested_resource_but_not_the_other() -> (
    None
):
    """preemptions from cq when target queue is exhausted for one requested resource, but not the other"""
    s = scenario()
    s.admitted(WL("a1", "").priority(-2).request("cpu", "1"), "a", cpu="default", held={"cpu": "1"})
    s.admitted(WL("a2", "").priority(-2).request("cpu", "1"), "a", cpu="default", held={"cpu": "1"})
    s.admitted(WL("a3", "").priority(-1).request("cpu", "1"), "a", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b1", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b2", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b3", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    got = s.targets(
        WL("in", "").uid("wl-in").priority(0).request("cpu", "2").request("memory", "2"),
        "a",
        {"cpu": "default", "memory": "default"},
    )
    assert got == {"/a1": "InClusterQueue", "/a2": "InClusterQueue"}


def test_allow_preemption_from_other_cluster_queues_if_target_cq_is_not_exhausted_for_the_requested_resource() -> (
    None
):
    """allow preemption from other cluster queues if target cq is not exhausted for the requested resource"""
    s = scenario()
    s.admitted(WL("a1", "").priority(-1).request("cpu", "1"), "a", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b1", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b2", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b3", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b4", "").priority(0).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    s.admitted(WL("b5", "").priority(-1).request("cpu", "1"), "b", cpu="default", held={"cpu": "1"})
    got = s.targets(WL("in", "").uid("wl-in").request("cpu", "2"), "a", {"cpu": "default"})
    assert got == {"/a1": "InClusterQueue", "/b5": "InCohortReclamation"}


def test_long_range_preemption() -> None:
    """long range preemption"""
    s = Scenario(
        flavors=FLAVORS,
        cluster_queues=[
            CQ("cq-left")
            .cohort("cohort-left")
            .preemption(reclaim="Any")
            .group(("default", {"cpu": "10"}))
            .obj(),
            CQ("cq-right").cohort("cohort-right").group(("default", {"cpu": "0"})).obj(),
        ],
        cohorts=[Cohort("cohort-left", "root"), Cohort("cohort-right", "root")],
    )
    s.admitted(
        WL("to-be-preempted", "").request("cpu", "5"), "cq-right", cpu="default", held={"cpu": "5"}
    )
    got = s.targets(WL("in", "").uid("wl-in").request("cpu", "8"), "cq-left", {"cpu": "default"})
    assert got == {"/to-be-preempted": "InCohortReclamation"}

"""Preemption scenarios: who is evicted, with which reason, and that the set is minimal."""

from extender.core.scheduling.cycle import WAITING_FOR_PREEMPTED
from extender.core.scheduling.fairsharing import dominant_resource_share, weighted_share
from tests.builders import CQ, WL, admit, run_until_quiet, state_with


def evictions(result):
    return sorted((e.workload.name, e.preemption_reason) for e in result.evicted)


def test_higher_priority_preempts_lower_in_the_same_queue():
    state = state_with(
        CQ("cq").preemption(within="LowerPriority").group(("default", {"cpu": "4"})).obj()
    )
    low = WL("low").priority(1).request("cpu", "4").obj()
    admit(state, low)
    high = WL("high").priority(10).created(1).request("cpu", "2").obj()
    state.add_workload(high)
    result = state.schedule(1)
    assert evictions(result) == [("low", "InClusterQueue")]
    assert result.evicted[0].reason == "Preempted"
    assert "due to prioritization in the ClusterQueue" in result.evicted[0].message
    assert state.pending_status(high.key).reason == WAITING_FOR_PREEMPTED
    # Until the victim has stopped, its quota stays held and nothing else is preempted.
    assert state.schedule(1).evicted == ()
    state.release(low.key)
    assert [a.workload.name for a in state.schedule(1).admitted] == ["high"]


def test_without_a_preemption_policy_nothing_is_evicted():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    admit(state, WL("low").priority(1).request("cpu", "4").obj())
    high = WL("high").priority(10).created(1).request("cpu", "2").obj()
    state.add_workload(high)
    assert run_until_quiet(state) == []
    assert state.pending_status(high.key).message == (
        "needs 2 cpu in flavor default; 0 of 4 free in cq"
    )


def test_the_preemption_set_is_minimal_after_fill_back():
    state = state_with(
        CQ("cq").preemption(within="LowerPriority").group(("default", {"cpu": "4"})).obj()
    )
    for name, prio, cpu in (("a", 1, "1"), ("b", 2, "2"), ("c", 3, "1")):
        admit(state, WL(name).priority(prio).request("cpu", cpu).obj())
    state.add_workload(WL("new").priority(10).created(5).request("cpu", "2").obj())
    # Removing a (1) then b (2) frees 3; putting a back still leaves 2 free: only b goes.
    assert evictions(state.schedule(5)) == [("b", "InClusterQueue")]


def test_equal_priority_is_preempted_only_when_newer_and_the_policy_allows():
    state = state_with(
        CQ("cq")
        .preemption(within="LowerOrNewerEqualPriority")
        .group(("default", {"cpu": "2"}))
        .obj()
    )
    newer = WL("newer").priority(5).created(10).request("cpu", "2").obj()
    admit(state, newer, now=10)
    older = WL("older").priority(5).created(1).request("cpu", "2").obj()
    state.add_workload(older)
    assert evictions(state.schedule(11)) == [("newer", "InClusterQueue")]


def test_most_recently_admitted_goes_first_among_equals():
    state = state_with(
        CQ("cq").preemption(within="LowerPriority").group(("default", {"cpu": "2"})).obj()
    )
    admit(state, WL("early").priority(1).request("cpu", "1").obj(), now=0)
    admit(state, WL("late").priority(1).request("cpu", "1").obj(), now=5)
    state.add_workload(WL("new").priority(9).created(6).request("cpu", "1").obj())
    assert evictions(state.schedule(6)) == [("late", "InClusterQueue")]


def cohort_pair(reclaim="Any", borrow="Never", threshold=None, a_quota="4", b_quota="4"):
    a = CQ("a").cohort("c").preemption(reclaim=reclaim, borrow=borrow, threshold=threshold)
    b = CQ("b").cohort("c").preemption(within="LowerPriority")
    return state_with(
        a.group(("default", {"cpu": a_quota})).obj(), b.group(("default", {"cpu": b_quota})).obj()
    )


def test_reclaim_within_cohort_takes_back_lent_quota():
    state = cohort_pair()
    borrower = WL("borrower").queue("lq-b").priority(100).request("cpu", "6").obj()
    admit(state, borrower)
    owner = WL("owner").queue("lq-a").created(1).request("cpu", "4").obj()
    state.add_workload(owner)
    result = state.schedule(1)
    assert evictions(result) == [("borrower", "InCohortReclamation")]
    assert "reclamation within the cohort" in result.evicted[0].message


def test_reclaim_only_touches_queues_that_borrow():
    state = cohort_pair()
    admit(state, WL("within").queue("lq-b").request("cpu", "4").obj())
    admit(state, WL("mine").queue("lq-a").request("cpu", "2").obj())
    wants = WL("wants").queue("lq-a").created(1).request("cpu", "3").obj()
    state.add_workload(wants)
    assert run_until_quiet(state) == []


def test_reclaim_lower_priority_spares_equal_or_higher_priority():
    state = cohort_pair(reclaim="LowerPriority")
    admit(state, WL("borrower").queue("lq-b").priority(5).request("cpu", "6").obj())
    state.add_workload(WL("owner").queue("lq-a").priority(5).created(1).request("cpu", "4").obj())
    assert run_until_quiet(state) == []


def three_queues(borrow):
    a = CQ("a").cohort("c").preemption(reclaim="Any", borrow=borrow)
    return state_with(
        a.group(("default", {"cpu": "2"})).obj(),
        CQ("b").cohort("c").group(("default", {"cpu": "4"})).obj(),
        CQ("lender").cohort("c").group(("default", {"cpu": "4"})).obj(),
    )


def test_borrow_within_cohort_lets_a_borrower_preempt_lower_priority():
    state = three_queues("LowerPriority")
    admit(state, WL("b-low").queue("lq-b").priority(1).request("cpu", "8").obj())
    # a has 2 of its own and wants 4: it must borrow, and only preemption makes room.
    state.add_workload(WL("a-high").queue("lq-a").priority(50).created(1).request("cpu", "4").obj())
    result = state.schedule(1)
    assert evictions(result) == [("b-low", "InCohortReclaimWhileBorrowing")]


def test_without_borrow_within_cohort_a_borrower_does_not_preempt():
    state = three_queues("Never")
    admit(state, WL("b-low").queue("lq-b").priority(1).request("cpu", "8").obj())
    state.add_workload(WL("a-high").queue("lq-a").priority(50).created(1).request("cpu", "4").obj())
    assert run_until_quiet(state) == []


def test_dominant_resource_share_and_weighted_share():
    state = state_with(
        CQ("a").cohort("c").group(("default", {"cpu": "4"})).obj(),
        CQ("b").cohort("c").group(("default", {"cpu": "4"})).obj(),
    )
    admit(state, WL("w").queue("lq-a").request("cpu", "6").obj())
    a = state.cache.tree.cluster_queues["a"]
    # borrowed 2 of the 8 the cohort could ever lend: 2 * 1000 / 8 = 250
    assert dominant_resource_share(a) == 250.0
    assert weighted_share(a) == 250
    assert dominant_resource_share(state.cache.tree.cluster_queues["b"]) == 0.0


def test_fair_sharing_orders_the_lower_share_first():
    state = state_with(
        CQ("a").cohort("c").group(("default", {"cpu": "4"})).obj(),
        CQ("b").cohort("c").group(("default", {"cpu": "4"})).obj(),
        CQ("idle").cohort("c").group(("default", {"cpu": "4"})).obj(),
        fair_sharing=True,
    )
    admit(state, WL("a-running").queue("lq-a").request("cpu", "6").obj())
    a_next = WL("a-next").queue("lq-a").created(1).priority(100).request("cpu", "3").obj()
    b_next = WL("b-next").queue("lq-b").created(2).request("cpu", "5").obj()
    state.add_workload(a_next)
    state.add_workload(b_next)
    # 6 free in the cohort: b (share 0 before) goes first despite a's higher priority.
    assert [a.workload.name for a in state.schedule(2).admitted] == ["b-next"]


def test_fair_sharing_preempts_the_queue_with_the_highest_share():
    a = CQ("a").cohort("c").preemption(reclaim="Any").group(("default", {"cpu": "4"}))
    b = CQ("b").cohort("c").preemption(reclaim="Any").group(("default", {"cpu": "4"}))
    state = state_with(a.obj(), b.obj(), fair_sharing=True)
    for i in range(4):
        admit(state, WL(f"a{i}").queue("lq-a").request("cpu", "2").obj(), now=i)
    b_wants = WL("b-wants").queue("lq-b").created(10).request("cpu", "2").obj()
    state.add_workload(b_wants)
    result = state.schedule(10)
    # b stays within its nominal quota with b-wants: FairSharingPreemptWithinNominal (on)
    # reclaims from the borrower whatever the shares, with Kueue's reclamation reason.
    assert [(e.workload.name, e.preemption_reason) for e in result.evicted] == [
        ("a3", "InCohortReclamation")
    ]


def test_a_preemptor_keeps_the_room_it_makes_no_livelock():
    state = cohort_pair()
    admit(state, WL("b1").queue("lq-b").created(0).request("cpu", "3").obj())
    admit(state, WL("b2").queue("lq-b").created(1).request("cpu", "3").obj(), now=1)
    state.add_workload(WL("b3").queue("lq-b").created(2).request("cpu", "2").obj())
    owner = WL("owner").queue("lq-a").created(3).request("cpu", "4").obj()
    state.add_workload(owner)
    # b3 could fit in the 2 cpu free right now, but owner reserves them while its victim
    # stops; otherwise b3 would take them, be preempted, come back, and so on forever.
    decisions = run_until_quiet(state, now=3)
    evicted = [d.workload.name for d in decisions if hasattr(d, "reason")]
    assert evicted == ["b2"]
    assert state.is_admitted(owner.key)


def test_a_preemptor_whose_targets_another_took_this_cycle_is_counted_as_a_skip():
    """Kueue's admission_cycle_preemption_skips: two ClusterQueues reclaim from the same
    borrower in one cycle; the second is skipped, and the cycle says in which queue."""
    reclaim = {"reclaim": "Any"}
    state = state_with(
        CQ("a").cohort("co").preemption(**reclaim).group(("default", {"cpu": "4"})).obj(),
        CQ("b").cohort("co").preemption(**reclaim).group(("default", {"cpu": "4"})).obj(),
        CQ("c").cohort("co").group(("default", {"cpu": "0"})).obj(),
    )
    admit(state, WL("borrower").queue("lq-c").request("cpu", "8").obj())
    state.add_workload(WL("ask-a").queue("lq-a").created(1).request("cpu", "4").obj())
    state.add_workload(WL("ask-b").queue("lq-b").created(1).request("cpu", "4").obj())
    result = state.schedule(1)
    assert evictions(result) == [("borrower", "InCohortReclamation")]
    assert len(result.preemption_skips) == 1
    assert sum(result.preemption_skips.values()) == 1

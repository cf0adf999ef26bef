"""The scheduling cycle, scenario by scenario (in the spirit of Kueue's scheduler_test.go)."""

import pytest

from extender.core.api.labels import LabelSelector, Taint
from extender.core.api.models import LocalQueue, Namespace
from extender.core.scheduling.cycle import (
    CLUSTER_QUEUE_STOPPED,
    LOCAL_QUEUE_STOPPED,
    MISCONFIGURED,
    ClusterState,
    Evict,
)
from extender.core.scheduling.queues import ClusterQueueQueue
from tests.builders import CQ, WL, admit, flavor, run_until_quiet, state_with


def names(decisions):
    return [d.workload.name for d in decisions]


def test_seed_quick_start_admits_one_and_explains_the_other():
    state = state_with(CQ("cluster-queue").group(("default", {"cpu": "4", "memory": "8Gi"})).obj())
    job1 = WL("job1").created(0).request("cpu", "3").request("memory", "4Gi").obj()
    job2 = WL("job2").created(1).request("cpu", "3").request("memory", "4Gi").obj()
    state.add_workload(job1)
    state.add_workload(job2)
    assert names(run_until_quiet(state)) == ["job1"]
    status = state.pending_status(job2.key)
    assert status.reason == "WaitingForQuota"
    assert status.message == "needs 3 cpu in flavor default; 1 of 4 free in cluster-queue"
    state.finish(job1.key)
    assert names(run_until_quiet(state, now=30)) == ["job2"]
    assert state.admitted_workload(job2.key).admission.pod_set_assignments[0].flavors == {
        "cpu": "default",
        "memory": "default",
    }


FLAVOR_CASES = [
    (
        "first flavor in order when it fits",
        CQ("cq").group(("a", {"cpu": "4"}), ("b", {"cpu": "4"})),
        WL("w").request("cpu", "2"),
        [],
        {"cpu": "a"},
    ),
    (
        "next flavor when the first is full",
        CQ("cq").group(("a", {"cpu": "1"}), ("b", {"cpu": "4"})),
        WL("w").request("cpu", "2"),
        [],
        {"cpu": "b"},
    ),
    (
        "skip a flavor whose taint the pod does not tolerate",
        CQ("cq").group(("spot", {"cpu": "4"}), ("b", {"cpu": "4"})),
        WL("w").request("cpu", "2"),
        [flavor("spot", taints=(Taint("spot", "true", "NoSchedule"),))],
        {"cpu": "b"},
    ),
    (
        "a tolerated taint is fine",
        CQ("cq").group(("spot", {"cpu": "4"}), ("b", {"cpu": "4"})),
        WL("w").request("cpu", "2").toleration("spot", "true"),
        [flavor("spot", taints=(Taint("spot", "true", "NoSchedule"),))],
        {"cpu": "spot"},
    ),
    (
        "skip a flavor whose node labels conflict with the nodeSelector",
        CQ("cq").group(("a100", {"gpu": "8"}), ("h100", {"gpu": "8"})),
        WL("w").request("gpu", "1").node_selector(pool="h100"),
        [flavor("a100", {"pool": "a100"}), flavor("h100", {"pool": "h100"})],
        {"gpu": "h100"},
    ),
    (
        "resources of one group share one flavor",
        CQ("cq").group(("a", {"cpu": "4", "memory": "1Gi"}), ("b", {"cpu": "4", "memory": "8Gi"})),
        WL("w").request("cpu", "1").request("memory", "2Gi"),
        [],
        {"cpu": "b", "memory": "b"},
    ),
    (
        "each resource group chooses its own flavor",
        CQ("cq").group(("a", {"cpu": "4"})).group(("g1", {"gpu": "0"}), ("g2", {"gpu": "2"})),
        WL("w").request("cpu", "1").request("gpu", "1"),
        [],
        {"cpu": "a", "gpu": "g2"},
    ),
]


@pytest.mark.parametrize(
    ("cq", "wl", "flavors", "want"), [c[1:] for c in FLAVOR_CASES], ids=[c[0] for c in FLAVOR_CASES]
)
def test_flavor_assignment(cq, wl, flavors, want):
    built = cq.obj()
    named = {f.name for f in flavors}
    all_flavors = list(flavors) + [flavor(n) for n in built.flavor_names() if n not in named]
    state = state_with(built, flavors=all_flavors)
    workload = wl.obj()
    admit(state, workload)
    assert state.admitted_workload(workload.key).admission.pod_set_assignments[0].flavors == want


def test_no_matching_flavor_says_which_flavor_and_why():
    state = state_with(
        CQ("cq").group(("spot", {"cpu": "4"})).obj(),
        flavors=[flavor("spot", taints=(Taint("spot", "", "NoSchedule"),))],
    )
    wl = WL("w").request("cpu", "1").obj()
    state.add_workload(wl)
    run_until_quiet(state)
    status = state.pending_status(wl.key)
    assert status.reason == "NoMatchingFlavor"
    assert (
        "flavor spot has taint spot:NoSchedule that pod set main does not tolerate"
        in status.message
    )


def test_a_request_larger_than_the_queue_can_ever_get():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    wl = WL("w").request("cpu", "5").obj()
    state.add_workload(wl)
    run_until_quiet(state)
    status = state.pending_status(wl.key)
    assert status.reason == "ExceedsMaxQuota"
    assert "needs 5 cpu in flavor default; more than the 4 cq has in all" in status.message


def test_a_resource_the_queue_has_no_quota_for():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    wl = WL("w").request("cpu", "1").request("nvidia.com/gpu", "1").obj()
    state.add_workload(wl)
    run_until_quiet(state)
    assert "requests nvidia.com/gpu, which ClusterQueue cq has no quota for" in (
        state.pending_status(wl.key).message
    )


def two_flavor_cohort(fungibility):
    a = CQ("a").cohort("c").group(("first", {"cpu": "2"}), ("second", {"cpu": "4"}))
    a = fungibility(a) if fungibility else a
    b = CQ("b").cohort("c").group(("first", {"cpu": "4"}), ("second", {"cpu": "0"}))
    return state_with(a.obj(), b.obj(), flavors=("first", "second"))


@pytest.mark.parametrize(
    ("fungibility", "want"),
    [(None, "first"), (lambda cq: cq.fungibility(borrow="TryNextFlavor"), "second")],
    ids=[
        "whenCanBorrow MayStopSearch borrows in the first flavor",
        "whenCanBorrow TryNextFlavor prefers a later flavor that fits without borrowing",
    ],
)
def test_fungibility_when_can_borrow(fungibility, want):
    state = two_flavor_cohort(fungibility)
    wl = WL("w").queue("lq-a").request("cpu", "3").obj()
    admit(state, wl)
    assert state.admitted_workload(wl.key).admission.pod_set_assignments[0].flavors == {"cpu": want}


def test_namespace_selector_null_selects_nothing_and_says_so():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).selector(None).obj())
    wl = WL("w").request("cpu", "1").obj()
    state.add_workload(wl)
    run_until_quiet(state)
    status = state.pending_status(wl.key)
    assert status.reason == MISCONFIGURED  # Kueue's reason
    assert "namespaceSelector is null, which selects no namespace" in status.message


def test_namespace_selector_by_label_admits_once_the_namespace_is_labelled():
    sel = LabelSelector((("team", "a"),))
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).selector(sel).obj())
    wl = WL("w").request("cpu", "1").obj()
    state.add_workload(wl)
    assert run_until_quiet(state) == []
    state.apply_namespace(Namespace("default", {"team": "a"}))
    assert names(run_until_quiet(state)) == ["w"]


def test_a_namespace_that_loses_its_label_is_refused_for_a_class_admitted_before():
    # The class of `first` and `second` remembers that its namespace was selected; a
    # namespace's new labels must still count for the class's next head.
    sel = LabelSelector((("team", "a"),))
    state = state_with(CQ("cq").group(("default", {"cpu": "1"})).selector(sel).obj())
    state.apply_namespace(Namespace("default", {"team": "a"}))
    first = WL("first").created(0).request("cpu", "1").obj()
    second = WL("second").created(1).request("cpu", "1").obj()
    state.add_workload(first)
    state.add_workload(second)
    assert names(run_until_quiet(state)) == ["first"]
    state.apply_namespace(Namespace("default", {"team": "b"}))
    state.finish(first.key)
    assert run_until_quiet(state, now=30) == []
    status = state.pending_status(second.key)
    assert status.reason == MISCONFIGURED
    assert status.message == "namespace default is not selected by ClusterQueue cq"


def test_a_local_queue_pointing_at_a_missing_cluster_queue():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    state.apply_local_queue(LocalQueue("default", "orphan", "nope"))
    wl = WL("w").queue("orphan").request("cpu", "1").obj()
    state.add_workload(wl)
    assert run_until_quiet(state) == []
    assert state.pending_status(wl.key).message == (
        "LocalQueue default/orphan points at ClusterQueue nope, which does not exist"
    )
    state.apply_cluster_queue(CQ("nope").group(("default", {"cpu": "1"})).obj())
    assert names(run_until_quiet(state)) == ["w"]


def test_a_missing_local_queue():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    wl = WL("w").queue("ghost").request("cpu", "1").obj()
    state.add_workload(wl)
    run_until_quiet(state)
    assert state.pending_status(wl.key).message == (
        "LocalQueue ghost does not exist in namespace default"
    )


def test_a_missing_flavor_makes_the_cluster_queue_inactive():
    state = state_with(CQ("cq").group(("gpu-a", {"cpu": "4"})).obj(), flavors=())
    wl = WL("w").request("cpu", "1").obj()
    state.add_workload(wl)
    assert run_until_quiet(state) == []
    assert state.cluster_queue_active("cq")[:2] == (False, "FlavorNotFound")
    assert "ResourceFlavor gpu-a does not exist" in state.pending_status(wl.key).message
    state.apply_flavor(flavor("gpu-a"))
    assert names(run_until_quiet(state)) == ["w"]


def test_strict_fifo_blocks_smaller_work_behind_the_head():
    state = state_with(CQ("cq").strict().group(("default", {"cpu": "4"})).obj())
    state.add_workload(WL("running").created(0).request("cpu", "3").obj())
    run_until_quiet(state)
    state.add_workload(WL("big").created(1).request("cpu", "2").obj())
    state.add_workload(WL("small").created(2).request("cpu", "1").obj())
    assert run_until_quiet(state) == []


def test_best_effort_fifo_lets_smaller_work_past_the_head():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    state.add_workload(WL("running").created(0).request("cpu", "3").obj())
    run_until_quiet(state)
    state.add_workload(WL("big").created(1).request("cpu", "2").obj())
    state.add_workload(WL("small").created(2).request("cpu", "1").obj())
    assert names(run_until_quiet(state)) == ["small"]


def test_finishing_requeues_inadmissible_workloads_of_the_whole_cohort():
    state = state_with(
        CQ("a").cohort("c").group(("default", {"cpu": "2"})).obj(),
        CQ("b").cohort("c").group(("default", {"cpu": "2"})).obj(),
    )
    holder = WL("holder").queue("lq-a").request("cpu", "4").obj()
    admit(state, holder)
    waiting = WL("waiting").queue("lq-b").request("cpu", "2").obj()
    state.add_workload(waiting)
    assert run_until_quiet(state) == []
    state.finish(holder.key)
    assert names(run_until_quiet(state)) == ["waiting"]


def test_a_release_requeues_only_the_queues_that_set_work_aside(monkeypatch):
    # 50 ClusterQueues in cohort c, one in cohort d: a release in c costs what c set aside.
    cqs = [CQ(f"q{i}").cohort("c").group(("default", {"cpu": "1"})).obj() for i in range(50)]
    cqs.append(CQ("other").cohort("d").group(("default", {"cpu": "1"})).obj())
    state = state_with(*cqs)
    big = WL("big").queue("lq-q0").request("cpu", "49").obj()
    small = WL("small").queue("lq-q2").request("cpu", "1").obj()
    admit(state, big)
    admit(state, small)  # cohort c is full
    waiting = WL("waiting").queue("lq-q1").request("cpu", "1").obj()
    elsewhere = WL("elsewhere").queue("lq-other").request("cpu", "2").obj()
    state.add_workload(waiting)
    state.add_workload(elsewhere)
    assert run_until_quiet(state) == []
    assert state.pending_in("q1") == (0, 1)
    assert state.pending_in("other") == (0, 1)

    requeued: list[ClusterQueueQueue] = []
    original = ClusterQueueQueue.requeue_inadmissible

    def spy(queue: ClusterQueueQueue) -> int:
        requeued.append(queue)
        return original(queue)

    monkeypatch.setattr(ClusterQueueQueue, "requeue_inadmissible", spy)
    state.finish(small.key)
    assert len(requeued) == 1  # q1's queue alone, not the cohort's 50
    assert state.pending_in("q1") == (1, 0)
    assert state.pending_in("other") == (0, 1)  # another tree: nothing changed for it
    assert names(run_until_quiet(state)) == ["waiting"]
    state.finish(big.key)
    assert len(requeued) == 1  # nothing else was set aside in c


def test_entries_that_do_not_borrow_go_before_those_that_do():
    state = state_with(
        CQ("a").cohort("c").group(("default", {"cpu": "4"})).obj(),
        CQ("b").cohort("c").group(("default", {"cpu": "2"})).obj(),
    )
    borrower = WL("borrower").queue("lq-b").priority(100).created(0).request("cpu", "4").obj()
    owner = WL("owner").queue("lq-a").priority(0).created(1).request("cpu", "4").obj()
    state.add_workload(borrower)
    state.add_workload(owner)
    result = state.schedule(0)
    assert names(result.admitted) == ["owner"]


def test_stop_policy_hold_and_drain_evicts_and_blocks():
    cq = CQ("cq").group(("default", {"cpu": "4"}))
    state = state_with(cq.obj())
    running = WL("running").request("cpu", "1").obj()
    admit(state, running)
    state.apply_cluster_queue(cq.stop("HoldAndDrain").obj())
    result = state.schedule(1)
    assert [(e.workload.name, e.reason) for e in result.evicted] == [
        ("running", CLUSTER_QUEUE_STOPPED)
    ]
    state.release(running.key)
    assert run_until_quiet(state) == []
    assert "stopped (stopPolicy HoldAndDrain)" in state.pending_status(running.key).message


def test_admission_check_seam_can_refuse_after_quota_fits():
    refusals = []

    def no_room_on_nodes(workload, admission):
        refusals.append(admission.cluster_queue)
        return "no node can hold 8 nvidia.com/gpu in one piece"

    state = state_with(
        CQ("cq").group(("default", {"cpu": "4"})).obj(), admission_checks=[no_room_on_nodes]
    )
    wl = WL("w").request("cpu", "1").obj()
    state.add_workload(wl)
    assert run_until_quiet(state) == []
    assert refusals == ["cq"]
    assert state.pending_status(wl.key).message == "no node can hold 8 nvidia.com/gpu in one piece"


def test_forget_rolls_an_assumed_admission_back():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    wl = WL("w").request("cpu", "3").obj()
    admit(state, wl)
    assert state.quota_usage("cq")[("default", "cpu")] == 3000
    state.forget(wl.key)
    assert state.quota_usage("cq")[("default", "cpu")] == 0
    assert not state.is_admitted(wl.key)
    assert names(run_until_quiet(state)) == ["w"]


def test_deleting_an_admitted_workload_frees_its_quota():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    wl = WL("w").request("cpu", "3").obj()
    admit(state, wl)
    state.delete_workload(wl.key)
    assert state.quota_usage("cq")[("default", "cpu")] == 0
    assert list(state.pending()) == []


def test_state_starts_empty():
    state = ClusterState()
    assert state.schedule(0).heads == 0


def test_a_refused_strict_fifo_head_does_not_spin_the_cycle():
    state = state_with(
        CQ("cq").strict().group(("default", {"cpu": "4"})).obj(),
        admission_checks=[lambda workload, admission: "no node can hold it"],
    )
    wl = WL("w").request("cpu", "1").obj()
    state.add_workload(wl)
    first = state.schedule(0)
    assert first.admitted == ()
    # Nothing changed, so the next cycle must say so; otherwise callers loop forever.
    assert state.schedule(0).progressed is False
    assert state.pending_status(wl.key).message == "no node can hold it"


def test_deleting_a_local_queue_evicts_what_it_admitted():
    cq = CQ("cq").group(("default", {"cpu": "4"}))
    state = state_with(cq.obj())
    running = WL("running").request("cpu", "1").obj()
    admit(state, running)
    state.delete_local_queue(f"{running.namespace}/{running.queue_name}")
    result = state.schedule(1)
    assert [(e.workload.name, e.reason) for e in result.evicted] == [
        ("running", LOCAL_QUEUE_STOPPED)
    ]
    assert "was deleted" in result.evicted[0].message
    assert state.schedule(2).evicted == ()  # evicted once, not every cycle


def lender_and_borrower(reclaim="Any", strict=False, next_request="2"):
    """a lends what it does not use; b is full and its next workload must borrow.

    a admits a1 in its own quota this cycle and has a2 pending behind it."""
    lender = CQ("a").cohort("c").group(("default", {"cpu": "4"})).preemption(reclaim=reclaim)
    if strict:
        lender = lender.strict()
    state = state_with(
        lender.obj(),
        CQ("b").cohort("c").group(("default", {"cpu": "4"})).preemption(reclaim="Any").obj(),
    )
    admit(state, WL("b0").queue("lq-b").request("cpu", "4").obj())
    state.add_workload(WL("a1").queue("lq-a").created(1).request("cpu", "2").obj())
    state.add_workload(WL("a2").queue("lq-a").created(2).request("cpu", next_request).obj())
    state.add_workload(WL("b1").queue("lq-b").created(0).request("cpu", "2").obj())
    return state


def test_a_lender_with_pending_work_keeps_its_unused_quota_from_borrowers():
    # Kueue lends a's last 2 cpu to b1 and preempts b1 a cycle later to admit a2. Tower
    # keeps them for a2: the same admissions, without the preemption.
    state = lender_and_borrower()
    first = state.schedule(0)
    assert names(first.admitted) == ["a1"]
    status = state.pending_status("default/b1")
    assert "kept by ClusterQueue a for its own pending workloads" in status.message
    assert names(run_until_quiet(state)) == ["a2"]
    assert not state.is_admitted("default/b1")
    # The hold lasts a cycle only: the quota in the tree is exactly what is admitted.
    assert state.cache.tree.cohorts["c"].usage == {("default", "cpu"): 8_000}
    state.finish("default/a1")
    assert names(run_until_quiet(state)) == ["b1"]


@pytest.mark.parametrize(
    ("case", "kw", "reclaimed"),
    [
        ("the lender cannot reclaim: lending costs nothing", {"reclaim": "Never"}, False),
        ("the next workload does not fit the unused quota", {"next_request": "3"}, False),
        # Kueue's churn, kept: a StrictFIFO head that never fits would idle the quota.
        ("a StrictFIFO lender", {"strict": True}, True),
    ],
)
def test_unused_quota_is_lent_as_in_kueue_when_keeping_it_would_not_help(case, kw, reclaimed):
    state = lender_and_borrower(**kw)
    assert sorted(names(state.schedule(0).admitted)) == ["a1", "b1"]
    evictions = [d for d in run_until_quiet(state) if hasattr(d, "preemption_reason")]
    assert bool(evictions) is reclaimed


def _preempting_state() -> tuple[ClusterState, Evict]:
    """`low` holds the whole ClusterQueue; a cycle decides to evict it for `high`."""
    state = state_with(
        CQ("cq").group(("default", {"cpu": "4"})).preemption(within="LowerPriority").obj()
    )
    admit(state, WL("low").priority(1).request("cpu", "4").obj())
    state.add_workload(WL("high").priority(9).request("cpu", "4").obj())
    (eviction,) = state.schedule(1).evicted
    return state, eviction


def _draining_state() -> tuple[ClusterState, Evict, CQ]:
    cq = CQ("cq").group(("default", {"cpu": "4"}))
    state = state_with(cq.obj())
    admit(state, WL("running").request("cpu", "1").obj())
    state.apply_cluster_queue(cq.stop("HoldAndDrain").obj())
    (eviction,) = state.schedule(1).evicted
    return state, eviction, cq


@pytest.mark.parametrize(
    ("meanwhile", "needed"),
    [
        ("nothing", True),
        ("the victim finished", False),
        ("the preemptor was deleted", False),
    ],
)
def test_a_preemption_is_still_needed_only_while_both_sides_wait(meanwhile, needed):
    state, eviction = _preempting_state()
    if meanwhile == "the victim finished":
        state.finish("default/low")
    elif meanwhile == "the preemptor was deleted":
        state.delete_workload("default/high")
    assert state.still_needed(eviction) is needed


@pytest.mark.parametrize(("resumed", "needed"), [(False, True), (True, False)])
def test_a_drain_is_still_needed_only_while_the_queue_is_stopped(resumed, needed):
    state, eviction, cq = _draining_state()
    if resumed:
        state.apply_cluster_queue(cq.stop("None").obj())
    assert state.still_needed(eviction) is needed


def test_a_kept_workload_can_be_chosen_again():
    state, eviction = _preempting_state()
    state.delete_workload("default/high")
    state.keep(eviction.workload.key)
    state.add_workload(WL("again").priority(9).request("cpu", "4").obj())
    assert [e.workload.name for e in state.schedule(2).evicted] == ["low"]


def test_a_workload_backing_off_waits_counted_until_queued_again():
    state = state_with(CQ("cq").group(("default", {"cpu": "4"})).obj())
    evicted = WL("evicted").priority(5).created(0).request("cpu", "1").obj()
    state.back_off(evicted, "waits out its requeue backoff until 2026-12-07T03:00:00Z")
    state.add_workload(WL("next").created(1).request("cpu", "1").obj())
    assert state.pending_in("cq") == (1, 1)
    assert state.is_backing_off(evicted.key)
    assert state.pending_status(evicted.key).message == (
        "waits out its requeue backoff until 2026-12-07T03:00:00Z"
    )
    assert names(run_until_quiet(state)) == ["next"]  # quota is free, yet it is not tried
    state.apply_cluster_queue(CQ("cq").strict().group(("default", {"cpu": "4"})).obj())
    assert run_until_quiet(state) == []  # a new queue keeps it backing off
    state.add_workload(evicted)  # requeueAt passed
    assert not state.is_backing_off(evicted.key)
    assert names(run_until_quiet(state)) == ["evicted"]


def test_an_admitted_workload_given_a_lower_priority_is_preempted_by_what_waits():
    """Kueue's e2e 'Should allow to mutate kueue.x-k8s.io/priority-class': the waiting
    workload of the same priority preempts the admitted one once that one's priority drops."""
    state = state_with(
        CQ("cq").group(("default", {"cpu": "4"})).preemption(within="LowerPriority").obj()
    )
    admit(state, WL("first").priority(300).request("cpu", "4").obj())
    state.add_workload(WL("second").priority(300).request("cpu", "4").obj())
    assert not state.schedule(1).evicted
    assert state.reprioritize("default/first", 100)
    assert not state.reprioritize("default/first", 100)  # no change: nothing to do
    (eviction,) = state.schedule(2).evicted
    assert (eviction.workload.name, eviction.preemptor) == ("first", "default/second")

"""kubectl tower's answers from a known core state (the CLI's own arithmetic)."""

from extender.kube.api.snapshot import Snapshot
from extender.kube.plugin.why import _borrowing, _holders, _preemption
from tests.builders import CQ, WL, admit, state_with


def test_borrowing_says_what_the_cohort_lends_now_against_the_need():
    team = CQ("team").cohort("all").group(("default", {"cpu": ("4", "10", None)})).obj()
    lender = CQ("lender").cohort("all").group(("default", {"cpu": "6"})).obj()
    state = state_with(team, lender)
    admit(state, WL("running", "default").queue("lq-lender").request("cpu", "5").obj())
    admit(state, WL("mine", "default").queue("lq-team").request("cpu", "3").obj())
    waiting = WL("big", "default").queue("lq-team").request("cpu", "4").obj()
    state.add_workload(waiting)
    snapshot = Snapshot(state)
    assert _borrowing(snapshot, team, waiting) == (
        "ClusterQueue team may borrow 1 cpu of default from cohort all now (with its own 1 free: "
        "2 of the 4 it needs)"
    )
    assert _holders(snapshot, team, waiting) == [
        {"workload": "default/mine", "priority": 0, "holds": "cpu=3 (default)"}
    ]
    assert _preemption(snapshot, team, waiting) == (
        "cannot help: ClusterQueue team preempts nothing (withinClusterQueue: Never, "
        "reclaimWithinCohort: Never)"
    )


def test_without_a_cohort_borrowing_cannot_help():
    alone = CQ("alone").group(("default", {"cpu": "4"})).obj()
    state = state_with(alone)
    waiting = WL("w").queue("lq-alone").request("cpu", "8").obj()
    state.add_workload(waiting)
    assert _borrowing(Snapshot(state), alone, waiting) == (
        "cannot help: ClusterQueue alone is in no cohort"
    )

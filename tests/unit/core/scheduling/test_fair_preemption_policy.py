"""fairSharing.preemptionStrategies and FairSharingPreemptWithinNominal, each way, on Kueue's
TestFairPreemptions rows (tests/conformance/test_fair_preemption.py holds them at Kueue's
defaults)."""

from __future__ import annotations

import pytest

from extender.core.api.models import Admission, PodSetAssignment
from extender.core.scheduling.options import SchedulingOptions
from extender.core.scheduling.preemption import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    FairPreemption,
)
from tests.builders import CQ, WL, admit, state_with

RECLAIM, FAIR = "InCohortReclamation", "InCohortFairSharing"
BOTH = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


def _targets(state, policy: FairPreemption, cq_name: str, incoming) -> dict[str, str]:
    cq, node = state.cluster_queue(cq_name), state.quota_node(cq_name)
    request = {("default", "cpu"): incoming.pod_sets[0].totals["cpu"]}
    found = policy(
        incoming, cq, node, request, frozenset(request), state.admitted_in, state.lowest_priority
    )
    return {t.victim.workload.name: t.reason for t in found}


def _three(weight_a: str = "1"):
    return state_with(
        *(
            CQ(n).cohort("all").weight(w).preemption(within="LowerPriority", reclaim="Any")
            .group(("default", {"cpu": "3"})).obj()
            for n, w in (("a", weight_a), ("b", "1"), ("c", "1"))
        ),
        fair_sharing=True,
    )  # fmt: skip


def _units(state, cq: str, count: int) -> None:
    for i in range(1, count + 1):
        admit(state, WL(f"{cq}{i}").uid(f"{cq}{i}").queue(f"lq-{cq}").request("cpu", "1").obj())


@pytest.mark.parametrize(
    ("policy", "want"),
    [
        pytest.param(FairPreemption(BOTH, True), {"b1": RECLAIM}, id="gate on: reclamation"),
        # Off, the share rules decide here too: b gives up a workload as fair sharing does.
        pytest.param(FairPreemption(BOTH, False), {"b1": FAIR}, id="gate off: fair sharing"),
    ],
)
def test_a_queue_within_its_nominal_quota_reclaims(policy, want):
    state = _three()
    _units(state, "a", 3)
    _units(state, "b", 5)
    _units(state, "c", 1)
    incoming = WL("c_in").uid("c_in").queue("lq-c").request("cpu", "1").obj()
    assert _targets(state, policy, "c", incoming) == want


@pytest.mark.parametrize(
    ("within_nominal", "want"),
    [
        pytest.param(True, {"b_prem1": RECLAIM}, id="gate on: nominal first"),
        pytest.param(False, {}, id="gate off: a's higher share blocks it"),
    ],
)
def test_within_nominal_of_one_flavor_outweighs_a_high_share(within_nominal, want):
    """Kueue's row "nominal first: workload fitting within nominal can preempt despite high
    aggregate DRS", each way."""
    a = (
        CQ("a").cohort("all").preemption(reclaim="Any")
        .group(("premium", {"cpu": "3"}), ("cheap", {"cpu": "0"}))
    )  # fmt: skip
    b = CQ("b").cohort("all").group(("premium", {"cpu": "0"}), ("cheap", {"cpu": "6"}))
    state = state_with(a.obj(), b.obj(), flavors=("premium", "cheap"), fair_sharing=True)
    held = [("a_prem1", "a", "premium"), ("a_prem2", "a", "premium"), ("b_prem1", "b", "premium")]
    held += [(f"a_cheap{i}", "a", "cheap") for i in range(1, 6)]
    for name, cq_name, chosen in held:
        wl = WL(name).uid(name).queue(f"lq-{cq_name}").request("cpu", "1").obj()
        usage = PodSetAssignment("main", {"cpu": chosen}, {"cpu": 1000}, 1)
        state.assume(wl, Admission(cq_name, (usage,)), 0)
    incoming = WL("a_in").uid("a_in").queue("lq-a").request("cpu", "1").obj()
    cq, node = state.cluster_queue("a"), state.quota_node("a")
    request = {("premium", "cpu"): 1000}
    found = FairPreemption(BOTH, within_nominal)(
        incoming, cq, node, request, frozenset(request), state.admitted_in, state.lowest_priority
    )
    assert {t.victim.workload.name: t.reason for t in found} == want


def _imbalance():
    state = _three()
    admit(state, WL("a1").uid("a1").queue("lq-a").request("cpu", "3").obj())
    admit(state, WL("b_low").uid("b_low").queue("lq-b").priority(0).request("cpu", "5").obj())
    admit(state, WL("b_high").uid("b_high").queue("lq-b").priority(1).request("cpu", "1").obj())
    return state, WL("a_in").uid("a_in").queue("lq-a").request("cpu", "1").obj()


@pytest.mark.parametrize(
    ("strategies", "want"),
    [
        # S2-a turns b_low down (b would end below a) and takes b_high.
        pytest.param(BOTH, {"b_high": FAIR}, id="both: the default"),
        pytest.param((LESS_THAN_INITIAL_SHARE,), {"b_low": FAIR}, id="LessThanInitialShare"),
        pytest.param(
            (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,), {"b_high": FAIR}, id="LessThanOrEqualToFinalShare"
        ),
    ],
)
def test_each_strategy_alone(strategies, want):
    state, incoming = _imbalance()
    assert _targets(state, FairPreemption(strategies), "a", incoming) == want


def test_without_a_second_strategy_what_the_first_turned_down_stays():
    """Kueue's "can reclaim from queue using less": a needs 2 (shares 3+2 of 9); S2-a refuses
    both of b's 3-cpu workloads; only S2-b, when configured, takes one."""
    state = _three()
    admit(state, WL("a1").uid("a1").queue("lq-a").request("cpu", "3").obj())
    admit(state, WL("b1").uid("b1").queue("lq-b").request("cpu", "3").obj())
    admit(state, WL("b2").uid("b2").queue("lq-b").request("cpu", "3").obj())
    incoming = WL("a_in").uid("a_in").queue("lq-a").request("cpu", "2").obj()
    final_only = FairPreemption((LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,))
    assert _targets(state, final_only, "a", incoming) == {}
    assert _targets(state, FairPreemption(BOTH), "a", incoming) == {"b1": FAIR}


def test_the_scheduler_follows_the_configured_policy():
    """A cycle, not only the policy: with the gate off, b's reclaim is fair sharing's."""
    off = SchedulingOptions(fair_preemption=FairPreemption(BOTH, within_nominal=False))
    a = CQ("a").cohort("c").preemption(reclaim="Any").group(("default", {"cpu": "4"}))
    b = CQ("b").cohort("c").preemption(reclaim="Any").group(("default", {"cpu": "4"}))
    state = state_with(a.obj(), b.obj(), fair_sharing=True, scheduling=off)
    for i in range(4):
        admit(state, WL(f"a{i}").queue("lq-a").request("cpu", "2").obj(), now=i)
    state.add_workload(WL("b-wants").queue("lq-b").created(10).request("cpu", "2").obj())
    result = state.schedule(10)
    assert [(e.workload.name, e.preemption_reason) for e in result.evicted] == [("a3", FAIR)]

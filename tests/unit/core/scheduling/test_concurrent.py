"""Concurrent admission in the cycle (Kueue's scheduler.go, ConcurrentAdmission): a variant
searches only its allowed flavor, waits while a more preferred sibling is admitted, makes a
less preferred sibling migrate, and does not preempt."""

from __future__ import annotations

from dataclasses import replace

from extender.core.admission.concurrent import PREEMPTION_GATED
from extender.core.api.models import Workload
from extender.core.scheduling.concurrent import (
    FLAVOR_MIGRATION,
    MORE_FAVORABLE,
    POLICY_FIELD,
    variant_view,
)
from extender.core.scheduling.cycle import ClusterState
from extender.core.scheduling.options import SchedulingOptions
from tests.builders import CQ, WL, state_with

ON = SchedulingOptions(concurrent_admission=True)


def _queue(reservation_cpu: str = "5", within: str = "Never") -> object:
    return (
        CQ("cq")
        .preemption(within=within)
        .group(("reservation", {"cpu": reservation_cpu}), ("spot", {"cpu": "5"}))
        .obj()
    )


def _state(reservation_cpu: str = "5", within: str = "Never") -> ClusterState:
    cq = _queue(reservation_cpu, within)
    cq = replace(cq, unacted=(POLICY_FIELD,))  # as parsed: the gate makes it acted on
    return state_with(cq, flavors=("reservation", "spot"), scheduling=ON)


def _variant(flavor: str, parent: str = "job", cpu: str = "1", created: float = 0.0) -> Workload:
    wl = WL(f"{parent}-variant-{flavor}").request("cpu", cpu).created(created).obj()
    return replace(wl, owner_kind="Workload", owner_name=parent, allowed_flavors=(flavor,))


def _flavor(state: ClusterState, key: str) -> str:
    held = state.admitted_workload(key)
    assert held is not None, state.pending_status(key)
    return held.admission.pod_set_assignments[0].flavors["cpu"]


def test_the_policy_makes_the_cluster_queue_active_with_the_gate_on_only():
    assert _state().cluster_queue_active("cq")[0] is True
    cq = replace(_queue(), unacted=(POLICY_FIELD,))
    off = state_with(cq, flavors=("reservation", "spot"))
    assert off.cluster_queue_active("cq")[0] is False


def test_a_variant_searches_only_its_allowed_flavor():
    state = _state()
    spot = _variant("spot")
    state.add_workload(spot)
    state.schedule(0.0)
    assert _flavor(state, spot.key) == "spot"  # reservation has room, but is not its flavor


def test_the_view_keeps_other_workloads_whole():
    cq = _queue()
    plain = WL("plain").request("cpu", "1").obj()
    assert variant_view(cq, plain) is cq
    view = variant_view(cq, _variant("spot"))
    assert [f.name for f in view.resource_groups[0].flavors] == ["spot"]


def test_the_preferred_variant_goes_first_and_the_other_waits():
    state = _state()
    reservation, spot = _variant("reservation"), _variant("spot", created=0.001)
    state.add_workload(spot)
    state.add_workload(reservation)
    state.schedule(0.0)
    state.schedule(0.0)
    assert _flavor(state, reservation.key) == "reservation"
    assert not state.is_admitted(spot.key)
    assert state.pending_status(spot.key).message == MORE_FAVORABLE


def test_a_fitting_preferred_variant_makes_the_admitted_one_migrate():
    state = _state(reservation_cpu="0")
    reservation, spot = _variant("reservation"), _variant("spot", created=0.001)
    state.add_workload(reservation)
    state.add_workload(spot)
    for _ in range(3):
        state.schedule(0.0)
    assert _flavor(state, spot.key) == "spot"
    assert not state.is_admitted(reservation.key)
    state.apply_cluster_queue(replace(_queue(), unacted=(POLICY_FIELD,)))  # quota freed
    result = state.schedule(0.0)
    assert [(e.workload.key, e.reason) for e in result.evicted] == [(spot.key, FLAVOR_MIGRATION)]
    assert result.evicted[0].preemptor == reservation.key
    assert not state.is_admitted(reservation.key)  # not admitted on top: it waits
    assert "Pending the migration of 1 workload(s)" in state.pending_status(reservation.key).message
    again = state.schedule(0.0)
    assert again.evicted == ()  # evicted once
    state.release(spot.key)
    state.schedule(0.0)
    assert _flavor(state, reservation.key) == "reservation"


def test_other_parents_variants_are_not_siblings():
    state = _state()
    mine = _variant("spot", parent="mine")
    state.add_workload(_variant("reservation", parent="theirs"))
    state.add_workload(mine)
    for _ in range(3):
        state.schedule(0.0)
    assert _flavor(state, mine.key) == "spot"


def _preempting(gated: bool) -> tuple[ClusterState, Workload, Workload, object]:
    state = _state(reservation_cpu="1", within="LowerPriority")
    low = WL("low").request("cpu", "1").priority(1).obj()
    state.add_workload(low)
    state.schedule(0.0)
    assert _flavor(state, low.key) == "reservation"
    high = replace(_variant("reservation", parent="high"), priority=100, preemption_gated=gated)
    state.add_workload(high)
    return state, low, high, state.schedule(0.0)


def test_a_variant_does_not_preempt_while_its_gate_is_closed():
    state, low, high, result = _preempting(gated=True)
    assert result.evicted == ()
    assert state.is_admitted(low.key)
    assert state.pending_status(high.key).message == PREEMPTION_GATED


def test_a_variant_whose_gate_is_open_preempts():
    state, low, high, result = _preempting(gated=False)
    assert [e.workload.key for e in result.evicted] == [low.key]
    assert state.pending_status(high.key).reason == "WaitingForPreemptedWorkloads"

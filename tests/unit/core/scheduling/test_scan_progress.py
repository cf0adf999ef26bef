"""Flavor scan progress between cycles (Kueue's LastTriedFlavorIdx and its
FlavorFungibilityPreserveScanProgress gate): a workload whose topology does not fit the
flavor its quota chose resumes its search at the next flavor, unless the progress is
forgotten first."""

from __future__ import annotations

import pytest

from extender.core.api.labels import LabelSelector
from extender.core.api.models import (
    ClusterQueue,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    Preemption,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WithinClusterQueue,
    Workload,
)
from extender.core.api.topology import HOSTNAME, REQUIRED, Topology, TopologyRequest
from extender.core.placement.model import Node
from extender.core.scheduling.cycle import ClusterState
from extender.core.tas.scheduling import TopologyScheduling
from tests.builders import CQ, WL, admit, state_with

TOPOLOGY = Topology("tas-single-level", (HOSTNAME,))
FLAVOR_1 = ResourceFlavor("tas-flavor-1", {"tas-flavor": "f1"}, topology_name=TOPOLOGY.name)
FLAVOR_2 = ResourceFlavor("tas-flavor-2", {"tas-flavor": "f2"}, topology_name=TOPOLOGY.name)
ON_HOST = TopologyRequest(REQUIRED, HOSTNAME)


def _node(name: str, flavor: str) -> Node:
    labels = {"tas-node": "true", "tas-flavor": flavor, HOSTNAME: name}
    return Node(name, labels, (), {"cpu": 2000, "pods": 10})


def _cq(flavor_2_quota: int) -> ClusterQueue:
    # Quota beyond what each flavor's one node holds: flavor 1 keeps fitting the quota-only
    # search after its node is full, which is what can pin a workload to it.
    return ClusterQueue(
        "tas-cq",
        (
            ResourceGroup(
                ("cpu",),
                (
                    FlavorQuotas("tas-flavor-1", (ResourceQuota("cpu", 4000),)),
                    FlavorQuotas("tas-flavor-2", (ResourceQuota("cpu", flavor_2_quota),)),
                ),
            ),
        ),
        namespace_selector=LabelSelector(),
        preemption=Preemption(WithinClusterQueue("LowerPriority"), ReclaimWithinCohort("Any")),
    )


def _configure(state: ClusterState, flavor_2_quota: int) -> None:
    state.configure(
        flavors=[FLAVOR_1, FLAVOR_2],
        cluster_queues=[_cq(flavor_2_quota)],
        local_queues=[LocalQueue("default", "tas-lq", "tas-cq")],
        topologies=[TOPOLOGY],
    )


def _workload(name: str, created: float, selector: dict[str, str]) -> Workload:
    # Equal priorities: LowerPriority finds no victim, and nothing in a cohort to reclaim.
    pod_set = PodSet("one", 1, {"cpu": 2000}, selector, topology=ON_HOST)
    return Workload("default", name, name, "tas-lq", (pod_set,), priority=10, creation_time=created)


def _flavor(state: ClusterState, key: str) -> str:
    held = {a.workload.key: a for a in state.admitted_workloads()}.get(key)
    return "" if held is None else held.admission.pod_set_assignments[0].flavors["cpu"]


# Kueue v0.19.2 pkg/scheduler/scheduler_preserve_flavor_scan_progress_test.go
# TestScheduleForPreserveFlavorScanProgress: four cycles; with churn, flavor 2's quota flips
# between 5 and 4 after each (the configuration changes, as on a busy cluster).
ROWS = [
    ("gate disabled", False, False, ""),
    ("gate enabled", True, False, "tas-flavor-2"),
    ("no generation churn, gate disabled", False, True, "tas-flavor-2"),
    ("no generation churn, gate enabled", True, True, "tas-flavor-2"),
]


@pytest.mark.parametrize(
    ("gate", "no_churn", "want"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS]
)
def test_schedule_for_preserve_flavor_scan_progress(gate: bool, no_churn: bool, want: str) -> None:
    tas = TopologyScheduling()
    tas.set_topologies([TOPOLOGY])
    tas.set_flavors([FLAVOR_1, FLAVOR_2])
    for node in (_node("node-f1", "f1"), _node("node-f2", "f2")):
        tas.set_node(node)
    state = ClusterState(fair_sharing=True)
    state.scheduler.scan.preserve = gate
    _configure(state, 4000)
    state.add_admission_check(tas)
    state.on_release(tas.release)
    # The blocker fills flavor 1's only node; "pending" needs a whole node.
    state.add_workload(_workload("blocker", 0.0, {"tas-flavor": "f1"}))
    state.add_workload(_workload("pending", 60.0, {}))

    for cycle in range(4):
        state.schedule(float(cycle))
        if not no_churn:
            _configure(state, 5000 if cycle % 2 == 0 else 4000)

    assert _flavor(state, "default/pending") == want
    assert _flavor(state, "default/blocker") == "tas-flavor-1"
    if not want:
        message = str(state.pending_status("default/pending").message)
        assert 'topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s)' in message


def _two_flavors(*, gate: bool) -> ClusterState:
    cq = CQ("cq").group(("small", {"cpu": "2"}), ("big", {"cpu": "4"}))
    state = state_with(cq.obj(), flavors=("small", "big"))
    state.scheduler.scan.preserve = gate
    return state


def test_a_fit_refused_by_an_admission_check_tries_the_next_flavor_next_cycle() -> None:
    state = _two_flavors(gate=True)
    refused: list[str] = []

    def no_small(workload, admission):  # an admission check that refuses flavor small
        flavor = admission.pod_set_assignments[0].flavors["cpu"]
        if flavor == "small":
            refused.append(workload.key)
            return "flavor small is refused by the check"
        return None

    state.scheduler.admission_checks = (no_small,)
    state.add_workload(WL("a").request("cpu", "1").obj())
    state.schedule(1.0)
    assert refused == ["default/a"]
    assert not state.is_admitted("default/a")

    state.schedule(2.0)  # resumed after small: big
    assert _flavor(state, "default/a") == "big"


def test_a_changed_workload_starts_its_search_over() -> None:
    state = _two_flavors(gate=True)
    scan = state.scheduler.scan
    first = WL("a").request("cpu", "1").obj()
    scan.cycle = 1
    scan.record(first, {(0, 0): 0}, 0, skipped=False)
    assert scan.start(first, 0) == {(0, 0): 0}
    grown = WL("a").request("cpu", "2").obj()  # another shape
    assert scan.start(grown, 0) is None
    assert scan.start(first, 0) is None  # forgotten


def test_under_the_gate_progress_of_the_cycle_before_survives_a_configuration_change() -> None:
    state = _two_flavors(gate=True)
    scan = state.scheduler.scan
    wl = WL("a").request("cpu", "1").obj()
    scan.cycle = 5
    scan.record(wl, {(0, 0): 0}, 3, skipped=True)
    scan.cycle = 6
    assert scan.start(wl, 4) == {(0, 0): 0}  # the cycle before: kept
    scan.cycle = 7
    assert scan.start(wl, 4) is None  # older, and the configuration changed


def test_without_the_gate_a_skip_or_an_update_forgets_the_progress() -> None:
    state = _two_flavors(gate=False)
    scan = state.scheduler.scan
    wl = WL("a").request("cpu", "1").obj()
    scan.cycle = 1
    scan.record(wl, {(0, 0): 0}, 0, skipped=True)
    assert scan.start(wl, 0) is None  # skipped for contention: forgotten at once
    scan.record(wl, {(0, 0): 0}, 0, skipped=False)
    scan.cycle = 9
    assert scan.start(wl, 0) == {(0, 0): 0}  # no configuration change: kept however old
    updated = WL("a").request("cpu", "1").obj()  # the same shape, a new object
    assert scan.start(updated, 0) is None


def test_a_search_that_reached_the_last_flavor_starts_over() -> None:
    state = _two_flavors(gate=True)
    admit(state, WL("fill").request("cpu", "2").obj())  # small is full
    state.add_workload(WL("a").request("cpu", "1").created(1.0).obj())
    state.schedule(1.0)
    assert _flavor(state, "default/a") == "big"
    assert state.scheduler.scan.kept == {}


def test_a_deleted_workload_leaves_no_progress_behind() -> None:
    state = _two_flavors(gate=True)
    state.scheduler.admission_checks = (lambda workload, admission: "refused by the check",)
    state.add_workload(WL("a").request("cpu", "1").obj())
    state.schedule(1.0)
    assert list(state.scheduler.scan.kept) == ["default/a"]

    state.delete_workload("default/a")
    state.schedule(2.0)

    assert state.scheduler.scan.kept == {}


def test_a_fit_held_back_by_pods_not_ready_keeps_its_flavor() -> None:
    state = _two_flavors(gate=True)
    state.scheduler.block_admission = True
    state.scheduler.not_ready.add("default/other")  # an admitted workload not ready yet
    state.add_workload(WL("a").request("cpu", "1").obj())
    state.schedule(1.0)
    assert state.pending_status("default/a").reason == "WaitingForPodsReady"
    assert state.scheduler.scan.kept == {}

    state.scheduler.not_ready.clear()
    state.schedule(2.0)
    assert _flavor(state, "default/a") == "small"  # its first flavor, as nominated

"""Kueue's judgement of a failed TAS node (pkg/controller/tas/node_controller.go at v0.19.2):
which node states and pods make a host failed for a workload, what status.unhealthyNodes then
holds, which late pods fail, and what the TAS cache looks at again when nodes and pods change."""

from __future__ import annotations

from dataclasses import replace

import pytest

from extender.core.api.labels import Taint, Toleration
from extender.core.api.topology import REQUIRED, TopologyRequest
from extender.core.scheduling.cycle import Admit
from extender.core.tas.node_failure import (
    NODE_FAILURE_DELAY,
    Health,
    NodeFailureGates,
    NodeState,
    Recorded,
    Verdict,
    WaitingPod,
    classify_taints,
    judge,
    late_pods,
    recorded,
)
from extender.core.tas.scheduling import TopologyScheduling
from tests.unit.core.tas.test_tas_check import NODES, RACK, job, node, state, tas_with_nodes

NOW = 1_000.0
DEFAULT = NodeFailureGates()
POD_TERMINATION_OFF = replace(DEFAULT, replace_on_pod_termination=False)
FIXED_TIME_ON = replace(DEFAULT, replace_due_to_not_ready_over_fixed_time=True)
TAINTS_OFF = replace(DEFAULT, replace_on_node_taints=False)

READY = NodeState("True", 0.0)
NOT_READY_NOW = NodeState("False", NOW)  # it just turned NotReady
NOT_READY_LONG = NodeState("Unknown", NOW - NODE_FAILURE_DELAY)  # NotReady for the delay
NO_EXECUTE = Taint("example.com/failure", "true", "NoExecute")
NO_SCHEDULE = Taint("example.com/unschedulable", "true", "NoSchedule")
PREFER = Taint("example.com/soft", "true", "PreferNoSchedule")
TOLERATE = Toleration("example.com/failure", "Equal", "true", "NoExecute")
TOLERATE_A_WHILE = replace(TOLERATE, toleration_seconds=0)
TOLERATE_ALL = Toleration(operator="Exists")

HEALTHY = Verdict(Health.HEALTHY)
HEALTHY_LOOKED = Verdict(Health.HEALTHY, checks_pods=True)
UNHEALTHY = Verdict(Health.UNHEALTHY)
UNHEALTHY_LOOKED = Verdict(Health.UNHEALTHY, checks_pods=True)


def tainted(*taints: Taint) -> NodeState:
    return NodeState("True", 0.0, taints)


# (node, pods running there, each podSet's tolerations, gates) -> verdict
JUDGED = [
    pytest.param(None, True, [()], DEFAULT, UNHEALTHY, id="gone: failed whatever runs there"),
    pytest.param(
        NodeState(None), True, [()], DEFAULT, UNHEALTHY, id="no Ready condition: failed at once"
    ),
    pytest.param(READY, False, [()], DEFAULT, HEALTHY, id="Ready, untainted: healthy"),
    pytest.param(
        NOT_READY_NOW,
        True,
        [()],
        DEFAULT,
        HEALTHY_LOOKED,
        id="NotReady while its pods run: healthy (TASReplaceNodeOnPodTermination)",
    ),
    pytest.param(
        NOT_READY_LONG,
        True,
        [()],
        DEFAULT,
        HEALTHY_LOOKED,
        id="NotReady past the fixed delay while its pods run: still healthy",
    ),
    pytest.param(
        NOT_READY_NOW,
        False,
        [()],
        DEFAULT,
        UNHEALTHY_LOOKED,
        id="NotReady and its pods ended: failed",
    ),
    pytest.param(
        NOT_READY_NOW,
        True,
        [()],
        POD_TERMINATION_OFF,
        Verdict(Health.WAITING, recheck_at=NOW + NODE_FAILURE_DELAY),
        id="pod termination off: NotReady waits out the delay",
    ),
    pytest.param(
        NOT_READY_LONG,
        True,
        [()],
        POD_TERMINATION_OFF,
        UNHEALTHY,
        id="pod termination off: NotReady past the delay fails, pods or not",
    ),
    pytest.param(
        NOT_READY_NOW,
        True,
        [()],
        FIXED_TIME_ON,
        Verdict(Health.HEALTHY, checks_pods=True, recheck_at=NOW + NODE_FAILURE_DELAY),
        id="fixed-time gate: NotReady with running pods looked at again after the delay",
    ),
    pytest.param(
        NOT_READY_LONG,
        True,
        [()],
        FIXED_TIME_ON,
        UNHEALTHY_LOOKED,
        id="fixed-time gate: NotReady past the delay fails whatever its pods do",
    ),
    pytest.param(
        tainted(NO_EXECUTE),
        True,
        [()],
        DEFAULT,
        HEALTHY_LOOKED,
        id="untolerated NoExecute while its pods run: healthy until they end",
    ),
    pytest.param(
        tainted(NO_EXECUTE),
        False,
        [()],
        DEFAULT,
        UNHEALTHY_LOOKED,
        id="untolerated NoExecute, no pod there: failed",
    ),
    pytest.param(
        tainted(NO_SCHEDULE),
        False,
        [()],
        DEFAULT,
        UNHEALTHY_LOOKED,
        id="untolerated NoSchedule, no pod there: failed",
    ),
    pytest.param(
        tainted(NO_EXECUTE),
        True,
        [()],
        POD_TERMINATION_OFF,
        UNHEALTHY,
        id="pod termination off: an untolerated taint fails at once",
    ),
    pytest.param(
        tainted(NO_EXECUTE),
        False,
        [(TOLERATE,)],
        DEFAULT,
        HEALTHY,
        id="a taint every podSet tolerates for good changes nothing",
    ),
    pytest.param(
        tainted(NO_EXECUTE),
        False,
        [(TOLERATE,), ()],
        DEFAULT,
        UNHEALTHY_LOOKED,
        id="a taint one podSet there does not tolerate: failed once no pod runs",
    ),
    pytest.param(
        tainted(NO_EXECUTE),
        True,
        [(TOLERATE_A_WHILE,)],
        DEFAULT,
        HEALTHY_LOOKED,
        id="tolerated for a while (tolerationSeconds), pods running: healthy",
    ),
    pytest.param(
        tainted(NO_EXECUTE),
        False,
        [(TOLERATE_A_WHILE,)],
        DEFAULT,
        UNHEALTHY_LOOKED,
        id="tolerated for a while, pods ended: failed",
    ),
    pytest.param(
        tainted(PREFER),
        False,
        [()],
        DEFAULT,
        HEALTHY,
        id="PreferNoSchedule is no scheduling taint",
    ),
    pytest.param(
        tainted(NO_EXECUTE),
        False,
        [()],
        TAINTS_OFF,
        HEALTHY,
        id="TASReplaceNodeOnNodeTaints off: taints change nothing",
    ),
]


@pytest.mark.parametrize(("node_state", "progressing", "tolerations", "gates", "want"), JUDGED)
def test_a_host_is_judged_as_kueues_node_controller_judges_it(
    node_state: NodeState | None,
    progressing: bool,
    tolerations: list[tuple[Toleration, ...]],
    gates: NodeFailureGates,
    want: Verdict,
) -> None:
    got = judge(node_state, progressing=progressing, tolerations=tolerations, gates=gates, now=NOW)
    assert got == want


@pytest.mark.parametrize(
    ("tolerations", "want_untolerated", "want_temporary"),
    [
        pytest.param([()], (NO_EXECUTE, NO_SCHEDULE), (), id="no toleration"),
        pytest.param([(TOLERATE_ALL,)], (), (), id="Exists without a key tolerates everything"),
        pytest.param([(TOLERATE,)], (NO_SCHEDULE,), (), id="one of two tolerated"),
        pytest.param(
            [(TOLERATE_A_WHILE, TOLERATE_ALL)],
            (),
            (),
            id="a permanent toleration beside a temporary one: for good",
        ),
        pytest.param(
            [(TOLERATE_A_WHILE,), (TOLERATE_ALL,)],
            (NO_SCHEDULE,),
            (NO_EXECUTE,),
            id="one podSet only for a while: the taint is temporary",
        ),
        pytest.param([], (), (), id="no podSet there: nothing to tolerate"),
    ],
)
def test_taints_are_classified_over_every_podset_placed_there(
    tolerations: list[tuple[Toleration, ...]],
    want_untolerated: tuple[Taint, ...],
    want_temporary: tuple[Taint, ...],
) -> None:
    taints = (NO_EXECUTE, NO_SCHEDULE, PREFER)
    assert classify_taints(taints, tolerations) == (want_untolerated, want_temporary)


@pytest.mark.parametrize(
    ("current", "verdicts", "want"),
    [
        pytest.param((), {"x1": HEALTHY, "x3": HEALTHY}, Recorded(()), id="all healthy"),
        pytest.param((), {"x1": HEALTHY, "x3": UNHEALTHY}, Recorded(("x3",)), id="one failed"),
        pytest.param(
            ("x3",), {"x1": HEALTHY, "x3": UNHEALTHY}, Recorded(("x3",)), id="already recorded"
        ),
        pytest.param(
            ("x3",), {"x1": HEALTHY, "x3": HEALTHY}, Recorded(()), id="recovered: taken back"
        ),
        pytest.param(
            ("x3",),
            {"x1": HEALTHY, "x3": Verdict(Health.WAITING)},
            Recorded(("x3",)),
            id="undecided: kept",
        ),
        pytest.param(
            ("x3",),
            {"x1": UNHEALTHY, "x3": UNHEALTHY},
            Recorded(
                (),
                "Workload eviction triggered due to multiple TAS assigned node failures, "
                "including: x3, x1",
            ),
            id="a second failure while one is recorded evicts, the recorded one named first",
        ),
        pytest.param(
            (),
            {"x3": UNHEALTHY, "x1": UNHEALTHY},
            Recorded(
                (),
                "Workload eviction triggered due to multiple TAS assigned node failures, "
                "including: x1, x3",
            ),
            id="two failed at once evict",
        ),
        pytest.param(
            ("x9",), {"x1": HEALTHY}, Recorded(("x9",)), id="a host no longer assigned: kept"
        ),
    ],
)
def test_status_unhealthy_nodes_follows_the_verdicts(
    current: tuple[str, ...], verdicts: dict[str, Verdict], want: Recorded
) -> None:
    assert recorded(current, verdicts) == want


def test_late_pods_are_those_held_to_a_host_whose_pods_kueue_looked_at_or_a_stray_one() -> None:
    pods = [
        WaitingPod("ns/on-failed", "x3", pending=True, gated=False),
        WaitingPod("ns/gated", "x3", pending=True, gated=True),
        WaitingPod("ns/failed-already", "x3", pending=False, gated=False),
        WaitingPod("ns/on-healthy", "x1", pending=True, gated=False),
        WaitingPod("ns/stray", "x9", pending=True, gated=False),
        WaitingPod("ns/stray-gone", "x8", pending=True, gated=False),
        WaitingPod("ns/on-deleted", "x7", pending=True, gated=False),
    ]
    verdicts = {"x3": UNHEALTHY_LOOKED, "x1": HEALTHY, "x7": UNHEALTHY}
    exists = {"x9": True, "x8": False}
    assert late_pods(pods, verdicts, exists) == ["ns/on-failed", "ns/stray"]


def test_the_gates_are_read_by_kueues_names_with_v0_19_2s_defaults() -> None:
    assert NodeFailureGates.of({}) == DEFAULT == NodeFailureGates(True, False, True, True)
    gates = NodeFailureGates.of(
        {
            "TASReplaceNodeOnPodTermination": False,
            "TASReplaceNodeDueToNotReadyOverFixedTime": True,
            "TASReplaceNodeOnNodeTaints": False,
            "SkipReassignmentForPodOwnedWorkloads": False,
            "SomethingElse": True,
        }
    )
    assert gates == NodeFailureGates(False, True, False, False)


# ----- what the TAS cache looks at again ---------------------------------------------------


def admitted_on_n1_n2() -> tuple[TopologyScheduling, Admit]:
    tas = tas_with_nodes()
    s = state(tas)
    s.add_workload(job("a", 6, TopologyRequest(REQUIRED, RACK)))
    (admit,) = s.schedule(0.0).admitted
    assignment = admit.admission.pod_set_assignments[0].topology
    assert assignment is not None
    assert [d.values[0] for d in assignment.domains] == ["n1", "n2"]
    tas.take_disturbed()
    return tas, admit


def test_a_node_change_is_looked_at_when_readiness_or_taints_change_or_it_goes_and_comes() -> None:
    tas, _ = admitted_on_n1_n2()
    n2 = NODES[1]
    tas.set_node(replace(n2, allocatable={**n2.allocatable, "cpu": 8000}))
    assert tas.take_disturbed() == set()  # nothing a failure is judged on
    tas.set_node(replace(n2, taints=(NO_EXECUTE,)))
    assert tas.take_disturbed() == {"default/a"}
    tas.set_node(replace(n2, ready=False))
    assert tas.take_disturbed() == {"default/a"}
    tas.set_node(n2)  # Ready again: a record of it may be taken back
    assert tas.take_disturbed() == {"default/a"}
    tas.delete_node("n2")
    assert tas.take_disturbed() == {"default/a"}
    tas.set_node(n2)  # it comes back
    assert tas.take_disturbed() == {"default/a"}
    tas.set_node(node("n9", "b1", "r1"))  # a new host none is placed on
    assert tas.take_disturbed() == set()


def test_a_pod_ending_is_looked_at_only_where_its_node_is_not_plainly_healthy() -> None:
    tas, _ = admitted_on_n1_n2()
    tas.pod_left("default/a", "n2")
    assert tas.take_disturbed() == set()  # a Ready, untainted node: its end means nothing
    tas.set_node(replace(NODES[1], ready=False))
    tas.take_disturbed()
    tas.pod_left("default/a", "n2")
    assert tas.take_disturbed() == {"default/a"}
    tas.pod_left("default/other", "n2")  # a workload placed nowhere
    tas.pod_left("default/a", "gone-node")
    assert tas.take_disturbed() == {"default/a"}


def test_a_waiting_pod_is_looked_at_when_its_host_failed_or_is_not_its_workloads() -> None:
    tas, _ = admitted_on_n1_n2()
    tas.pod_held_to("default/a", "n1")
    assert tas.take_disturbed() == set()
    tas.pod_held_to("default/a", "n3")  # not one of its hosts: a late pod
    assert tas.take_disturbed() == {"default/a"}
    tas.set_node(replace(NODES[0], taints=(NO_SCHEDULE,)))
    tas.take_disturbed()
    tas.pod_held_to("default/a", "n1")
    assert tas.take_disturbed() == {"default/a"}


def test_the_replacement_is_for_the_recorded_host_not_for_any_notready_one() -> None:
    tas, admit = admitted_on_n1_n2()
    # n1 is NotReady but not recorded (its pods still run): only the recorded n2 is replaced.
    tas.set_node(replace(NODES[0], ready=False))
    tas.set_node(node("n5", "b1", "r1"))
    replaced = tas.replace(admit.workload, admit.admission, ["n2"])
    assert not isinstance(replaced, str)
    assert replaced is not None
    assignment = replaced.pod_set_assignments[0].topology
    assert assignment is not None
    hosts = [d.values[0] for d in assignment.domains]
    assert "n1" in hosts
    assert "n2" not in hosts
    assert tas.replace(admit.workload, replaced, ["n9"]) is None  # not one of its hosts

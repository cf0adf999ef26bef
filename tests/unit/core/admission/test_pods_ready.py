import pytest

from extender.core.admission.pods_ready import (
    Deactivate,
    ReadyCondition,
    Requeue,
    RequeueState,
    RequeuingStrategy,
    TimedOut,
    Wait,
    WaitForPodsReady,
    Wanted,
    backoff_left,
    backoff_seconds,
    check,
    deactivated,
    on_timeout,
    wanted_condition,
)
from tests.builders import CQ, WL, run_until_quiet, state_with


def strategy(limit=None, base=60, cap=3600):
    return RequeuingStrategy("Eviction", limit, base, cap)


def policy(timeout=300.0, recovery=120.0):
    return WaitForPodsReady(timeout, False, recovery, strategy())


NOT_READY = "Not all pods are ready or succeeded"
READY = "All pods reached readiness and the workload is running"
RECOVERY = "At least one pod has failed, waiting for recovery"


@pytest.mark.parametrize(
    ("admitted", "ready", "current", "want"),
    [
        (False, True, None, Wanted(False, "WaitForStart", NOT_READY)),
        (True, False, None, Wanted(False, "WaitForStart", NOT_READY)),
        (True, True, None, Wanted(True, "Started", READY)),
        (True, True, ReadyCondition(False, "WaitForStart", 0), Wanted(True, "Started", READY)),
        (
            True,
            False,
            ReadyCondition(True, "Started", 0),
            Wanted(False, "WaitForRecovery", RECOVERY),
        ),
        (
            True,
            False,
            ReadyCondition(False, "WaitForRecovery", 0),
            Wanted(False, "WaitForRecovery", RECOVERY),
        ),
        (True, True, ReadyCondition(False, "WaitForRecovery", 0), Wanted(True, "Recovered", READY)),
        (True, True, ReadyCondition(True, "Recovered", 0), Wanted(True, "Recovered", READY)),
        # Kueue's older reason "PodsReady" counts as waiting for the start.
        (
            True,
            False,
            ReadyCondition(False, "PodsReady", 0),
            Wanted(False, "WaitForStart", NOT_READY),
        ),
    ],
)
def test_the_pods_ready_condition_follows_kueues(admitted, ready, current, want):
    assert wanted_condition(admitted, ready, current) == want


@pytest.mark.parametrize(
    ("current", "now", "want"),
    [
        (None, 1100.0, Wait(200.0)),  # admitted at 1000, timeout 300
        (None, 1300.0, TimedOut("WaitForStart")),
        (ReadyCondition(False, "WaitForStart", 1050.0), 1299.0, Wait(1.0)),
        (ReadyCondition(False, "WaitForStart", 1050.0), 1400.0, TimedOut("WaitForStart")),
        (ReadyCondition(True, "Started", 1050.0), 9999.0, None),
        # a recovery counts from when readiness was lost, with its own timeout (120)
        (ReadyCondition(False, "WaitForRecovery", 2000.0), 2100.0, Wait(20.0)),
        (ReadyCondition(False, "WaitForRecovery", 2000.0), 2120.0, TimedOut("WaitForRecovery")),
    ],
)
def test_an_admitted_workload_times_out_when_its_pods_are_not_ready(current, now, want):
    assert check(policy(), 1000.0, current, now) == want


def test_recovery_timeout_zero_turns_the_recovery_check_off():
    lost = ReadyCondition(False, "WaitForRecovery", 0.0)
    assert check(policy(recovery=0.0), 0.0, lost, 1e9) is None
    assert check(policy(recovery=0.0), 0.0, None, 1e9) == TimedOut("WaitForStart")


@pytest.mark.parametrize(
    ("base", "cap", "count", "want"),
    [
        (60, 3600, 1, 60.0),
        (60, 3600, 2, 120.0),
        (60, 3600, 3, 240.0),
        (60, 3600, 7, 3600.0),  # 3840 capped
        (60, 3600, 30, 3600.0),
        (10, 0, 5, 160.0),  # no cap
        (100, 50, 1, 100.0),  # the first wait is the base, as wait.Backoff steps
        (100, 50, 2, 50.0),
        (0, 3600, 4, 0.0),
    ],
)
def test_the_backoff_doubles_from_the_base_up_to_the_cap(base, cap, count, want):
    assert backoff_seconds(strategy(base=base, cap=cap), count, 0.0) == want


def test_the_jitter_adds_at_most_a_ten_thousandth():
    assert backoff_seconds(strategy(), 1, 0.5) == pytest.approx(60.003)
    assert backoff_seconds(strategy(), 1, 0.999) < 60.006


@pytest.mark.parametrize(
    ("limit", "state", "want"),
    [
        (None, None, Requeue(RequeueState(1, 1060.0))),
        (None, RequeueState(4, None), Requeue(RequeueState(5, 1000.0 + 960.0))),
        (2, RequeueState(1, 1030.0), Requeue(RequeueState(2, 1120.0))),
        (
            2,
            RequeueState(2, None),
            Deactivate(
                "RequeuingLimitExceeded", "exceeding the maximum number of re-queuing retries"
            ),
        ),
        (
            0,
            None,
            Deactivate(
                "RequeuingLimitExceeded", "exceeding the maximum number of re-queuing retries"
            ),
        ),
        # a later requeueAt another part set is kept
        (None, RequeueState(0, 5000.0), Requeue(RequeueState(1, 5000.0))),
    ],
)
def test_a_timeout_requeues_with_backoff_until_the_limit(limit, state, want):
    assert on_timeout(strategy(limit=limit), state, 1000.0, 0.0) == want


@pytest.mark.parametrize(
    ("reason", "message", "want"),
    [
        (None, None, ("Deactivated", "The workload is deactivated")),
        (
            "RequeuingLimitExceeded",
            "exceeding the maximum number of re-queuing retries",
            (
                "DeactivatedDueToRequeuingLimitExceeded",
                "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
            ),
        ),
    ],
)
def test_a_deactivation_says_its_cause(reason, message, want):
    assert deactivated(reason, message) == want


@pytest.mark.parametrize(
    ("state", "now", "want"),
    [
        (None, 10.0, 0.0),
        (RequeueState(1, None), 10.0, 0.0),
        (RequeueState(1, 70.0), 10.0, 60.0),
        (RequeueState(1, 70.0), 80.0, 0.0),
    ],
)
def test_a_requeued_workload_waits_out_its_backoff(state, now, want):
    assert backoff_left(state, now) == want


def blocking_state(block=True):
    state = state_with(CQ("cq").group(("default", {"cpu": "10"})).obj())
    state.block_admission = block
    for i, name in enumerate(("a", "b", "c")):
        state.add_workload(WL(name).created(i).request("cpu", "1").obj())
    return state


def test_block_admission_admits_one_at_a_time_until_its_pods_are_ready():
    state = blocking_state()
    assert [d.workload.name for d in run_until_quiet(state)] == ["a"]
    status = state.pending_status("default/b")
    assert (status.reason, status.message) == (
        "WaitingForPodsReady",
        "waiting for all admitted workloads to be in PodsReady condition",
    )
    assert state.pods_ready("default/a", False) is False  # still not ready: still blocked
    assert run_until_quiet(state, now=1) == []
    assert state.pods_ready("default/a", True) is True  # the block is lifted: a cycle is due
    assert [d.workload.name for d in run_until_quiet(state, now=2)] == ["b"]


def test_block_admission_is_lifted_when_the_unready_workload_goes():
    state = blocking_state()
    run_until_quiet(state)
    state.finish("default/a")
    assert [d.workload.name for d in run_until_quiet(state, now=1)] == ["b"]


def test_without_block_admission_readiness_does_not_matter():
    state = blocking_state(block=False)
    assert [d.workload.name for d in run_until_quiet(state)] == ["a", "b", "c"]
    assert state.pods_ready("default/a", False) is False

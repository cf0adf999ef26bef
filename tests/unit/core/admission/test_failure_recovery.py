"""FailureRecoveryPolicy's rules: which pods it looks at, when one is due, and what it writes."""

from __future__ import annotations

import pytest

from extender.core.admission.failure_recovery import (
    SAFE_TO_DELETE,
    Decision,
    TerminatingPod,
    Verdict,
    decide,
    opted_in,
    status_patch,
)

DELETED_AT = 1000.0
POD = TerminatingPod("ns/p", "node-1", DELETED_AT, 1, "Running")
LET_GO = (
    "Pod forcefully terminated after 1m1s grace period due to unreachable node `node-1` "
    f"(triggered by `{SAFE_TO_DELETE}` annotation)"
)


@pytest.mark.parametrize(
    ("annotations", "deleting", "want"),
    [
        pytest.param({SAFE_TO_DELETE: "true"}, True, True, id="opted in and being deleted"),
        pytest.param({SAFE_TO_DELETE: "true"}, False, False, id="opted in, not being deleted"),
        pytest.param({SAFE_TO_DELETE: "True"}, True, False, id="only the exact value opts in"),
        pytest.param({}, True, False, id="not opted in"),
        pytest.param(None, True, False, id="no annotations"),
    ],
)
def test_only_a_pod_that_opted_in_and_is_being_deleted_is_looked_at(annotations, deleting, want):
    assert opted_in(annotations, deleting) is want


@pytest.mark.parametrize(
    ("unreachable", "now", "want"),
    [
        pytest.param(True, DELETED_AT + 59, Decision(Verdict.WAIT, due=DELETED_AT + 60),
                     id="a minute not up yet: wait for it, reachable or not"),
        pytest.param(True, DELETED_AT + 60, Decision(Verdict.LET_GO, message=LET_GO),
                     id="a minute up on an unreachable node: let go"),
        pytest.param(False, DELETED_AT + 600, Decision(Verdict.LEAVE),
                     id="a reachable node: its kubelet finishes it"),
        pytest.param(None, DELETED_AT + 600, Decision(Verdict.LEAVE),
                     id="its node gone from the API: left alone, as Kueue does"),
    ],
)  # fmt: skip
def test_a_terminating_pod_is_let_go_a_minute_on_only_on_an_unreachable_node(
    unreachable, now, want
):
    assert decide(POD, unreachable, now) == want


def test_the_status_written_fails_a_running_pod_and_keeps_an_ended_ones_phase():
    kept = {"type": "Ready", "status": "False"}
    patch = status_patch([kept], "Running", LET_GO, "2026-01-01T00:00:00Z")
    assert patch["status"]["phase"] == "Failed"
    assert patch["status"]["conditions"] == [
        kept,
        {
            "type": "KueueFailureRecovery",
            "status": "True",
            "reason": "KueueForcefullyDeleted",
            "message": LET_GO,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        },
    ]
    assert "phase" not in status_patch([], "Succeeded", LET_GO, "2026-01-01T00:00:00Z")["status"]

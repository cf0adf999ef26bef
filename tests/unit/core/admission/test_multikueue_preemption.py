"""MultiKueue's orchestrated preemption as policy: which copy's gate opens, and when."""

from __future__ import annotations

from typing import Any

from extender.core.admission import multikueue_preemption as gating
from extender.core.admission.concurrent import PREEMPTION_GATED

T0 = 1_800_000_000.0


def _at(seconds: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _copy(blocked: float | None = None, opened: float | None = None) -> dict[str, Any]:
    base = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "metadata": {"name": "wl"}}
    copy = gating.gated_copy({**base, "spec": {"queueName": "q"}})
    status: dict[str, Any] = {}
    if blocked is not None:
        status["conditions"] = [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                 "message": PREEMPTION_GATED, "lastTransitionTime": _at(blocked)}]  # fmt: skip
    if opened is not None:
        status["preemptionGates"] = [gating.open_gate_patch(copy, _at(opened))["status"][
            "preemptionGates"][0]]  # fmt: skip
    return {**copy, "status": status}


def test_the_copy_that_asked_first_is_opened():
    remotes = {"w1": _copy(blocked=T0 + 5), "w2": _copy(blocked=T0), "w3": _copy()}
    assert gating.worker_to_ungate(remotes, T0 + 10) == ("w2", gating.SINGLE_PREEMPTION_TIMEOUT)


def test_no_other_gate_opens_within_five_minutes_of_the_last():
    remotes = {"w1": _copy(blocked=T0, opened=T0 + 1), "w2": _copy(blocked=T0 + 2)}
    cluster, wait = gating.worker_to_ungate(remotes, T0 + 61)
    assert cluster is None
    assert wait == gating.SINGLE_PREEMPTION_TIMEOUT - 60
    assert gating.worker_to_ungate(remotes, T0 + 302)[0] == "w2"


def test_nothing_opens_while_no_copy_needs_to_preempt():
    assert gating.worker_to_ungate({"w1": _copy(), "w2": None}, T0) == (None, None)


def test_a_copy_only_gated_by_multikueue_is_no_longer_held_but_may_not_preempt():
    from extender.core.jobframework.workloads import workload as parse_workload

    copy = _copy()
    copy["metadata"]["namespace"] = "default"
    copy["spec"]["podSets"] = [{"name": "main", "count": 1, "template": {"spec": {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}}]  # fmt: skip
    model = parse_workload(copy)
    assert gating.GATES_FIELD in model.unacted
    gated = gating.acting_on_gate(copy, model)
    assert (gated.unacted, gated.preemption_gated) == ((), True)
    opened = _copy(opened=T0)
    opened["metadata"]["namespace"] = "default"
    opened["spec"]["podSets"] = copy["spec"]["podSets"]
    assert gating.acting_on_gate(opened, parse_workload(opened)).preemption_gated is False

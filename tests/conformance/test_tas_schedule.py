"""Kueue's scheduler TAS tables (scheduler_tas_test.go), case by case, after one cycle.

Each case builds its nodes, pods, Topologies, flavors and queues, holds the admitted
workloads' domains, runs one scheduling cycle and compares what Kueue's test compares: every
new admission with its flavors, counts, usage and topology assignment (wantNewAssignments),
what is left in the queues and what was set aside, which workloads were preempted and why,
and the QuotaReserved=False message of what waits (wantWorkloads, where the table has it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from extender.core.api.models import Admission
from tests.conformance.tas_schedule_cases import (
    Case,
    admission,
    cases,
    condition,
    default_gates,
    run,
)

DEFAULTS = default_gates()

ZERO = "a resource requested at 0 gets no flavor (docs/kueue.md#conformance)"
# Cases Tower decides differently from Kueue on purpose, each with the reason
# (docs/kueue.md#conformance says the same).
DIFFERENT: dict[str, str] = {
    "sched-003": ZERO + ": a podSet of 0 pods requests 0",
    "sched-053": ZERO,
    "cohort-016": (
        "the table's a1-admitted holds an admission of 5 pods for a podSet of 4 (a quirk of "
        "the Go table); Kueue counts the quota it holds as 4 (its reclaimable-pods scaling), "
        "Tower counts the 5 its admission says, so the preemptor's search takes another victim"
    ),
}

# Cases that need a part of Kueue Tower has not built yet; each says which.
NOT_BUILT: dict[str, str] = {}

# Cases about what Kueue's scheduler does when its own API writes fail: Tower's core makes
# no writes; the kube layer's failed and ambiguous writes are tested with fault injection
# (tests/controller/test_network_faults.py).
NOT_PORTED: dict[str, str] = {
    "sched-013": "the eviction's status patch answers NotFound",
    "sched-014": "the eviction's status patch fails",
}


def _skip_reason(case: Case) -> str | None:
    off = [f"{k}={v}" for k, v in case.gates.items() if DEFAULTS.get(k) != v]
    if off:
        return f"Kueue feature gate(s) away from v0.19.2's default: {', '.join(off)}"
    return NOT_BUILT.get(case.id)


def params() -> list[Any]:
    out = []
    for case in cases():
        if case.id in NOT_PORTED:
            continue
        marks = []
        reason = _skip_reason(case)
        if case.id in NOT_BUILT and reason == NOT_BUILT[case.id]:
            marks.append(pytest.mark.xfail(reason=f"not built: {reason}", strict=True))
        elif reason:
            marks.append(pytest.mark.skip(reason=reason))
        elif case.id in DIFFERENT:
            marks.append(pytest.mark.xfail(reason=DIFFERENT[case.id], strict=True))
        out.append(pytest.param(case, id=f"{case.id}-{case.name}", marks=marks))
    return out


def _plain(a: Admission) -> dict[str, Any]:
    return {
        "clusterQueue": a.cluster_queue,
        "podSetAssignments": [
            {
                "name": psa.name,
                "flavors": dict(psa.flavors),
                "resourceUsage": {
                    r: v for r, v in psa.resource_usage.items() if v or r in psa.flavors
                },
                "count": psa.count,
                "delayedTopologyRequest": psa.delayed_topology,
                "topology": None
                if psa.topology is None
                else (
                    list(psa.topology.levels),
                    [(list(d.values), d.count) for d in psa.topology.domains],
                ),
            }
            for psa in a.pod_set_assignments
        ],
    }


def _sets(raw: Mapping[str, list[str]] | None) -> dict[str, set[str]]:
    return {cq: set(keys) for cq, keys in (raw or {}).items() if keys}


@pytest.mark.parametrize("case", params())
def test_kueue_schedule_for_tas(case: Case) -> None:
    want = case.raw["want"]
    got = run(case)
    assert {k: _plain(a) for k, a in got.assignments.items()} == {
        k: _plain(admission(a)) for k, a in (want.get("wantNewAssignments") or {}).items()
    }, case
    assert {cq: keys for cq, keys in got.left.items() if keys} == _sets(want.get("wantLeft")), case
    assert {cq: keys for cq, keys in got.inadmissible.items() if keys} == _sets(
        want.get("wantInadmissibleLeft")
    ), case
    # A host the table names unhealthy and no replacement: evicted with Kueue's message.
    assert got.evicted == {
        f"{e['namespace']}/{e['name']}": e.get("message")
        for e in want.get("wantEvents") or ()
        if e["reason"] == "EvictedDueToNodeFailures"
    }, case
    workloads = want.get("wantWorkloads")
    if workloads is None:
        return
    preempted = {}
    messages = {}
    for w in workloads:
        key = f"{w['namespace']}/{w['name']}"
        cond = condition(w, "Preempted")
        if cond is not None and cond["status"] == "True":
            preempted[key] = cond["reason"]
        reserved = condition(w, "QuotaReserved")
        if reserved is not None and reserved["status"] == "False":
            messages[key] = reserved["message"]
    assert got.preempted == preempted, case
    assert {k: _told(got.messages.get(k)) for k in messages} == {
        k: _told(m) for k, m in messages.items()
    }, case


def _told(message: str | None) -> tuple[str, int] | None:
    """What a pending message says about topology, and how many preempted workloads it waits
    for. Tower names them ("; waiting for preempted workloads to stop: a, b") where Kueue
    counts them (". Pending the preemption of 2 workload(s)"), and words its quota messages
    its own way ("needs 10 cpu in flavor ..."): only the topology clause is Kueue's text."""
    if message is None:
        return None
    waiting = 0
    if "; waiting for preempted workloads to stop: " in message:
        message, names = message.split("; waiting for preempted workloads to stop: ")
        waiting = len(names.split(", "))
    elif ". Pending the preemption of " in message:
        message, count = message.split(". Pending the preemption of ")
        waiting = int(count.split()[0])
    return (message if "topology" in message else "(a quota message)", waiting)

"""Kueue's topology placement table (TestFindTopologyAssignments), case by case.

Each case builds one flavor's domains from its nodes (those Ready, schedulable, with the
flavor's labels and every level's label, as Kueue's TAS cache keeps them), charges the
non-topology pods on them, and places the podSets; every podSet's assignment, or the reason
its group could not be placed, must be Kueue's.
"""

from __future__ import annotations

import pytest

from extender.core.api.topology import DomainAssignment, Topology, TopologyAssignment
from extender.core.tas.placement import TopologySnapshot, with_pod
from tests.conformance.tas_cases import Case, cases

CASES = cases()
# Cases decided differently from Kueue, each with the reason (docs/kueue.md says the same).
DIFFERENT: dict[int, str] = {}


def snapshot(case: Case) -> TopologySnapshot:
    nodes = [
        n
        for n in case.nodes
        if n.usable
        and all(n.labels.get(k) == v for k, v in case.node_labels.items())
        and all(level in n.labels for level in case.levels)
    ]
    other: dict[str, dict[str, int]] = {}
    for node, requests in case.pods:
        used = other.setdefault(node, {})
        for resource, amount in with_pod(requests).items():
            used[resource] = used.get(resource, 0) + amount
    snap = TopologySnapshot(Topology("default", case.levels), nodes, (), other)
    for values, requests, count in case.prior:
        assert snap.leaf_of(values) is not None
        snap.use(TopologyAssignment(case.levels, (DomainAssignment(values, count),)), requests)
    return snap


def params() -> list[object]:
    out = []
    for case in CASES:
        marks = []
        if case.skip:
            marks.append(pytest.mark.skip(reason=case.skip))
        elif case.number in DIFFERENT:
            marks.append(pytest.mark.xfail(reason=DIFFERENT[case.number], strict=True))
        out.append(pytest.param(case, id=f"{case.number}-{case.name}", marks=marks))
    return out


@pytest.mark.parametrize("case", params())
def test_kueue_find_topology_assignments(case: Case) -> None:
    placed = snapshot(case).assign(case.pod_sets)
    got = {}
    for ps in case.pod_sets:
        if ps.name in placed.failed:
            got[ps.name] = ("reason", placed.reason)
        elif ps.name in placed.assignments:
            got[ps.name] = ("assignment", placed.assignments[ps.name])
        else:
            got[ps.name] = ("nothing", None)
    want = {
        name: ("reason", e.reason) if e.reason is not None else ("assignment", e.assignment)
        for name, e in case.expected.items()
    }
    assert got == want

"""Kueue v0.19.2's remaining TAS cache tables (pkg/cache/scheduler), case by case, on Tower.

1. TestFindTopologyAssignmentsMultiLayerReplacement (tas_cache_test.go L8445): node
   replacement for a podSet in multi-layer slices. Kueue names the failed host in
   status.unhealthyNodes; Tower replaces a host whose Node is NotReady or gone
   (tas_replacement.replace_failed, called as TopologyScheduling.replace). Each case builds
   the table's nodes (the failed one NotReady, as the table has it), holds the workload's
   existing assignment, calls `replace` and compares the new assignment, or the failure:
   Kueue's eviction message for it (scheduler.go L914) and the placement's reason, the
   string Kueue's table compares (read from TopologySnapshot.place_within, where
   replace_failed finds it).

   The table's TAS cache holds no usage of the workload itself (it builds the cache from
   the nodes alone, then charges priorFlavorUsage through a sibling flavor's cache), so the
   workload's hold here charges only each pod's `pods` slot (the table's nodes have 10),
   never its cpu; priorFlavorUsage is another workload held in a sibling topology flavor
   over the same hosts (Tower's overlapping flavors, Kueue's TASHandleOverlappingFlavors,
   on by default). The table turns TASMultiLayerTopology and TASCacheNodeMatchResults on;
   both are on by default in v0.19.2.

2. tas_flavor_snapshot_test.go: HasLevel (tas_model.has_levels, with no implied fallback
   as Kueue's levelKey), IsTopologyAssignmentStale (a domain with no leaf in the snapshot,
   TopologyDomains.leaf_of), the domain orders (tas_placement's sort keys and their final
   tiebreaker, the domain's label values), CountPodsInAssignment
   (TopologyAssignment.total) and the usage an assignment charges per domain
   (TopologyDomains.use). Tests of Kueue-internal helpers without a Tower counterpart are
   listed in NOT_PORTED with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from extender.core.api.models import (
    Admission,
    PodSet,
    PodSetAssignment,
    ResourceFlavor,
    Workload,
)
from extender.core.api.quantity import to_amount
from extender.core.api.topology import (
    HOSTNAME,
    REQUIRED,
    DomainAssignment,
    SliceLayer,
    Topology,
    TopologyAssignment,
    TopologyRequest,
    has_levels,
    topology_request,
)
from extender.core.placement.model import Node
from extender.core.tas.cache import Held
from extender.core.tas.domains import Domain, PodSetPlacement
from extender.core.tas.placement import TopologySnapshot, _sorted, _sorted_with_leader
from extender.core.tas.scheduling import TopologyScheduling

NOT_PORTED: dict[str, str] = {
    "TestFreeCapacityPerDomain": (
        "SerializeFreeCapacityPerDomain, the JSON dump of each leaf's free capacity and TAS "
        "usage Kueue's snapshot logs at high verbosity: Tower writes no such dump"
    ),
    "TestMergeTopologyAssignments": (
        "Tower has no merge of two given assignments: replace_failed sums the kept and the "
        "replacement domains per host and orders them by their label path itself, for hosts "
        "only (the table's tree of level-1/level-2 has no host); that merge is checked by the "
        "replacement cases here (x4: 1+1 and 2+2 pods)"
    ),
    "TestTruncateAssignment": (
        "TruncateAssignment serves an elastic workload scaled down "
        "(ElasticJobsViaWorkloadSlices) in a topology flavor; Tower keeps no topology "
        "assignment across slices (ElasticJobsViaWorkloadSlicesWithTAS is off), and has no "
        "truncation of an assignment"
    ),
    "TestAddAssumedUsage": (
        "addAssumedUsage adds an assignment's per-domain usage into the map a cycle assumes; "
        "Tower adds it inline in TopologySnapshot.assign, with no helper of its own (the "
        "per-domain usage of an assignment is TestComputeAssumedUsageFromAssignment's port)"
    ),
    "TestTASCachingRemainingResourcesFeatureGate": (
        "TASFlavorSnapshot.Fits(flavorUsage), whether an admitted workload's per-domain usage "
        "still fits, and its cache of remaining capacity: Tower has no Fits of a given usage "
        "(it places the workload again, TopologyScheduling.fits_without); the table's node "
        "has no `pods` allocatable, which any Tower placement needs"
    ),
    "TestUpdateCountsToMinimumGenericLogsLeafSummary": (
        "the fields of the error and V(6) log lines Kueue writes when its counts' assumptions "
        "are violated; Tower logs nothing there (its _spread returns no domains)"
    ),
}

# ----- 1. TestFindTopologyAssignmentsMultiLayerReplacement (tas_cache_test.go L8445) --------

BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
SWITCH = "cloud.com/topology-switch"
THREE = (BLOCK, RACK, HOSTNAME)
FOUR = (BLOCK, RACK, SWITCH, HOSTNAME)

FLAVOR = ResourceFlavor("tas-flavor", topology_name="default")
SIBLING = ResourceFlavor("tas-sibling", topology_name="default")  # priorFlavorUsage's flavor
POD = {"cpu": 1000}  # the table's SinglePodRequests


def host(values: str, cpu: str, ready: bool = True) -> Node:
    """A node of the table: `values` its label values widest first ("b1/r1/x1"), named as
    Kueue names it ("b1-r1-x1"); `cpu` its allocatable cpu, with 10 pods."""
    parts = tuple(values.split("/"))
    levels = THREE if len(parts) == 3 else FOUR
    labels = dict(zip(levels, parts, strict=True))
    allocatable = {"cpu": to_amount("cpu", cpu), "pods": 10}
    return Node("-".join(parts), labels, (), allocatable, ready=ready)


def hosts(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOSTNAME,), tuple(DomainAssignment((h,), n) for h, n in domains))


@dataclass(frozen=True)
class Replacement:
    name: str
    line: int
    nodes: tuple[Node, ...]
    existing: TopologyAssignment
    admission_count: int
    unhealthy: str
    request: TopologyRequest
    count: int
    levels: tuple[str, ...] = THREE
    prior: tuple[tuple[str, int], ...] = ()  # priorFlavorUsage: (host, pods of 1 cpu)
    want: TopologyAssignment | None = None
    reason: str | None = None


def _slices(*layers: tuple[str, int]) -> tuple[SliceLayer, ...]:
    return tuple(SliceLayer(level, size) for level, size in layers)


REPLACEMENTS = [
    Replacement(
        "replacement does not cross a string-prefix sibling domain",
        8469,
        (
            host("b1/rack-a/x1", "1", ready=False),
            host("b1/rack-a/x2", "1"),
            host("b1/rack-ab/x3", "1"),
        ),
        hosts(("x1", 1), ("x2", 1)),
        2,
        "x1",
        TopologyRequest(REQUIRED, RACK),
        2,
        prior=(("x2", 1),),
        reason='topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 2; '
        'excluded: resource "cpu": 1, topologyDomain: 1',
    ),
    Replacement(
        "replace unhealthy node in incomplete rack slice",
        8506,
        (
            host("b1/r1/x1", "1"),
            host("b1/r1/x2", "1"),
            host("b1/r2/x3", "1", ready=False),
            host("b1/r2/x4", "1"),
            host("b1/r2/x5", "2"),
        ),
        hosts(("x1", 1), ("x2", 1), ("x3", 1), ("x4", 1)),
        4,
        "x3",
        TopologyRequest(REQUIRED, BLOCK, _slices((RACK, 2))),
        4,
        want=hosts(("x1", 1), ("x2", 1), ("x4", 2)),
    ),
    Replacement(
        "replacement fails when no capacity in incomplete slice domain",
        8561,
        (
            host("b1/r1/x1", "1"),
            host("b1/r1/x2", "1"),
            host("b1/r2/x3", "1", ready=False),
            host("b1/r2/x4", "500m"),
        ),
        hosts(("x1", 1), ("x2", 1), ("x3", 1), ("x4", 1)),
        4,
        "x3",
        TopologyRequest(REQUIRED, BLOCK, _slices((RACK, 2))),
        4,
        reason='topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 3; '
        'excluded: resource "cpu": 1, topologyDomain: 2',
    ),
    Replacement(
        "3-layer: innermost broken domain confines replacement to correct switch",
        8604,
        (
            host("b1/r1/s1/x1", "4"),
            host("b1/r1/s1/x2", "4"),
            host("b1/r1/s2/x3", "4", ready=False),
            host("b1/r1/s2/x4", "8"),
            host("b1/r2/s3/x5", "4"),
            host("b1/r2/s3/x6", "4"),
            host("b1/r2/s4/x7", "4"),
            host("b1/r2/s4/x8", "4"),
        ),
        hosts(*((f"x{i}", 2) for i in range(1, 9))),
        16,
        "x3",
        TopologyRequest(REQUIRED, BLOCK, _slices((RACK, 8), (SWITCH, 4), (HOSTNAME, 2))),
        16,
        levels=FOUR,
        want=hosts(("x1", 2), ("x2", 2), ("x4", 4), ("x5", 2), ("x6", 2), ("x7", 2), ("x8", 2)),
    ),
    Replacement(
        "2-layer: sliceSize=2 prevents scattered single-pod placement across hosts",
        8702,
        (
            host("b1/r1/x1", "2"),
            host("b1/r1/x2", "2"),
            host("b1/r2/x3", "2", ready=False),
            host("b1/r2/x4", "1"),
            host("b1/r2/x5", "1"),
        ),
        hosts(("x1", 2), ("x2", 2), ("x3", 2), ("x4", 2)),
        8,
        "x3",
        TopologyRequest(REQUIRED, BLOCK, _slices((RACK, 4), (HOSTNAME, 2))),
        8,
        reason='topology "default" doesn\'t allow to fit any of 1 slice(s). Total nodes: 4; '
        "excluded: topologyDomain: 2",
    ),
    Replacement(
        "sibling-flavor aggregatedDomainUsages on replacement candidate blocks the replacement",
        8768,
        (
            host("b1/r1/x1", "1"),
            host("b1/r1/x2", "1"),
            host("b1/r2/x3", "1", ready=False),
            host("b1/r2/x4", "1"),
        ),
        hosts(("x1", 1), ("x2", 1), ("x3", 1), ("x4", 1)),
        4,
        "x3",
        TopologyRequest(REQUIRED, BLOCK, _slices((RACK, 2))),
        4,
        prior=(("x4", 1),),
        reason='topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 3; '
        'excluded: resource "cpu": 1, topologyDomain: 2',
    ),
]


def _run_replacement(case: Replacement, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    tas = TopologyScheduling()
    tas.set_topologies([Topology("default", case.levels)])
    tas.set_flavors([FLAVOR, SIBLING])
    for node in case.nodes:
        tas.set_node(node)
    workload = Workload(
        "test-ns",
        "test-wl",
        "test-wl",
        "lq",
        (PodSet("main", case.count, POD, topology=case.request),),
    )
    admission = Admission(
        "test-cq",
        (
            PodSetAssignment(
                "main",
                {"cpu": FLAVOR.name},
                {"cpu": POD["cpu"] * case.admission_count},
                case.admission_count,
                case.existing,
            ),
        ),
    )
    if case.prior:
        tas.hold("test-ns/prior-wl", [Held(SIBLING.name, "main", hosts(*case.prior), dict(POD))])
    # The table's cache holds none of the workload's own cpu (see the module docstring).
    tas.hold(workload.key, [Held(FLAVOR.name, "main", case.existing, {})])
    reasons: list[str] = []
    place_within = TopologySnapshot.place_within

    def spy(
        self: TopologySnapshot, pod_set: PodSetPlacement, within: str | None
    ) -> TopologyAssignment | str:
        found = place_within(self, pod_set, within)
        if isinstance(found, str):
            reasons.append(found)
        return found

    monkeypatch.setattr(TopologySnapshot, "place_within", spy)
    got = tas.replace(workload, admission)
    if isinstance(got, Admission):
        return ("assignment", got.pod_set_assignments[0].topology)
    return ("failure", got, reasons)


def _want_replacement(case: Replacement) -> tuple[Any, ...]:
    if case.want is not None:
        return ("assignment", case.want)
    message = (
        f"Workload was evicted as there was no replacement for unhealthy node(s): {case.unhealthy}"
    )
    return ("failure", message, [case.reason])


@pytest.mark.parametrize("case", [pytest.param(c, id=f"L{c.line}-{c.name}") for c in REPLACEMENTS])
def test_kueue_multi_layer_replacement(case: Replacement, monkeypatch: pytest.MonkeyPatch) -> None:
    """tas_cache_test.go L8445, each case at its line."""
    assert _run_replacement(case, monkeypatch) == _want_replacement(case)


# ----- 2. tas_flavor_snapshot_test.go ---------------------------------------------------------

LEVELS = ("level-1", "level-2")

# TestHasLevel (L526): the request as the Workload's API carries it (None: no request).
HAS_LEVEL: list[tuple[int, str, Mapping[str, Any] | None, bool]] = [
    (533, "topology request nil", None, False),
    (537, "topology request empty", {}, False),
    (541, "required", {"required": "level-1"}, True),
    (547, "required – invalid level", {"required": "invalid-level"}, False),
    (553, "preferred", {"preferred": "level-1"}, True),
    (559, "preferred – invalid level", {"preferred": "invalid-level"}, False),
    (565, "unconstrained", {"unconstrained": True}, True),
    (571, "slice-only", {"podSetSliceRequiredTopology": "level-1"}, True),
    (577, "slice-only – invalid level", {"podSetSliceRequiredTopology": "invalid-level"}, False),
]


@pytest.mark.parametrize(
    ("raw", "want"), [pytest.param(r, w, id=f"L{line}-{name}") for line, name, r, w in HAS_LEVEL]
)
def test_kueue_has_level(raw: Mapping[str, Any] | None, want: bool) -> None:
    """tas_flavor_snapshot_test.go L526: Kueue's HasLevel takes levelKey, no implied fallback."""
    request = topology_request(raw) or TopologyRequest()
    assert has_levels(request, LEVELS, False) is want


# TestIsTopologyAssignmentStale (L157): one node n1 in block b1 (rack r1 in the second tree).
STALE_BLOCK = "cloud.provider.com/topology-block"
STALE_RACK = "cloud.provider.com/topology-rack"
STALE: list[tuple[int, str, tuple[str, ...], tuple[str, ...], tuple[bool, str]]] = [
    (188, "existing hostname leaf is not stale", (STALE_BLOCK, HOSTNAME), ("n1",), (False, "")),
    (194, "missing hostname leaf is stale", (STALE_BLOCK, HOSTNAME), ("n2",), (True, "n2")),
    (
        202,
        "deleted node is stale even when its hostname matches an existing root domain ID",
        (STALE_BLOCK, HOSTNAME),
        ("b1",),
        (True, "b1"),
    ),
    (
        210,
        "existing non-hostname leaf is not stale",
        (STALE_BLOCK, STALE_RACK),
        ("b1", "r1"),
        (False, ""),
    ),
    (
        216,
        "missing non-hostname leaf is stale",
        (STALE_BLOCK, STALE_RACK),
        ("b1", "r2"),
        (True, "b1"),
    ),
]


@pytest.mark.parametrize(
    ("levels", "values", "want"),
    [pytest.param(lv, v, w, id=f"L{line}-{name}") for line, name, lv, v, w in STALE],
)
def test_kueue_is_topology_assignment_stale(
    levels: tuple[str, ...], values: tuple[str, ...], want: tuple[bool, str]
) -> None:
    """tas_flavor_snapshot_test.go L157: an assignment is stale when one of its domains has
    no leaf in the snapshot; Kueue names that domain by its first value."""
    labels = {STALE_BLOCK: "b1", STALE_RACK: "r1", HOSTNAME: "n1"}
    node = Node("n1", {k: v for k, v in labels.items() if k in levels})
    snap = TopologySnapshot(Topology("default", levels), [node])
    named = (HOSTNAME,) if levels[-1] == HOSTNAME else levels  # an assignment's levels
    assignment = TopologyAssignment(named, (DomainAssignment(values, 1),))
    stale = [d for d in assignment.domains if snap.leaf_of(d.values) is None]
    assert ((True, stale[0].values[0]) if stale else (False, "")) == want


# TestSortedDomainsWithLeader (L601) and TestSortedDomains (L884): (id, value, counts).
GATE_AFFINITY = "Kueue feature gate TASRespectNodeAffinityPreferred=on (off by default in v0.19.2)"

# (leaders, slices with leader, pods with leader) per domain; affinity scores are not kept
# by Tower (the gate is off by default).
WITH_LEADER: list[tuple[int, str, list[tuple[str, str, tuple[int, int, int]]], bool, list[str], str | None]] = [
    (610, "affinityScore descending: higher affinity score comes first",
     [("low-affinity", "a", (1, 5, 10)), ("high-affinity", "b", (1, 5, 10))], False,
     ["high-affinity", "low-affinity"], GATE_AFFINITY),
    (635, "affinityScore ignored when feature gate is disabled",
     [("low-affinity", "a", (1, 5, 10)), ("high-affinity", "b", (1, 5, 10))], False,
     ["low-affinity", "high-affinity"], None),
    (660, "leaderCount descending: domains that can host leader come first",
     [("no-leader", "a", (0, 10, 10)), ("has-leader", "b", (1, 1, 1))], False,
     ["has-leader", "no-leader"], None),
    (682, "leader capability prioritized over preferred affinity",
     [("preferred-no-leader", "a", (0, 0, 0)), ("non-preferred-has-leader", "b", (1, 5, 10))],
     False, ["non-preferred-has-leader", "preferred-no-leader"], GATE_AFFINITY),
    (707, "BestFit: sliceCountWithLeader descending",
     [("a", "a", (1, 3, 1)), ("b", "b", (1, 1, 1)), ("c", "c", (1, 2, 1))], False,
     ["a", "c", "b"], None),
    (737, "LeastFreeCapacity: sliceCountWithLeader ascending",
     [("a", "a", (1, 3, 1)), ("b", "b", (1, 1, 1)), ("c", "c", (1, 2, 1))], True,
     ["b", "c", "a"], None),
    (767, "BestFit: podCountWithLeader ascending as tiebreaker",
     [("large", "a", (1, 5, 100)), ("small", "b", (1, 5, 10)), ("medium", "c", (1, 5, 50))],
     False, ["small", "medium", "large"], None),
    (797, "LeastFreeCapacity: podCountWithLeader ascending as tiebreaker",
     [("large", "a", (1, 5, 100)), ("small", "b", (1, 5, 10)), ("medium", "c", (1, 5, 50))],
     True, ["small", "medium", "large"], None),
    (827, "levelValues ascending as final tiebreaker",
     [("c", "c", (1, 5, 10)), ("a", "a", (1, 5, 10)), ("b", "b", (1, 5, 10))], False,
     ["a", "b", "c"], None),
]  # fmt: skip

# (slices, pods) per domain.
PLAIN: list[tuple[int, str, list[tuple[str, str, tuple[int, int]]], bool, list[str], str | None]] = [
    (893, "affinityScore descending: higher affinity score comes first",
     [("low-affinity", "a", (5, 10)), ("high-affinity", "b", (5, 10))], False,
     ["high-affinity", "low-affinity"], GATE_AFFINITY),
    (916, "affinityScore ignored when feature gate is disabled",
     [("low-affinity", "a", (5, 10)), ("high-affinity", "b", (5, 10))], False,
     ["low-affinity", "high-affinity"], None),
    (939, "BestFit: sliceCount descending",
     [("a", "a", (3, 1)), ("b", "b", (1, 1)), ("c", "c", (2, 1))], False, ["a", "c", "b"], None),
    (966, "LeastFreeCapacity: sliceCount ascending",
     [("a", "a", (3, 1)), ("b", "b", (1, 1)), ("c", "c", (2, 1))], True, ["b", "c", "a"], None),
    (993, "BestFit: podCount ascending as tiebreaker",
     [("large", "a", (5, 100)), ("small", "b", (5, 10)), ("medium", "c", (5, 50))], False,
     ["small", "medium", "large"], None),
    (1020, "LeastFreeCapacity: podCount ascending as tiebreaker",
     [("large", "a", (5, 100)), ("small", "b", (5, 10)), ("medium", "c", (5, 50))], True,
     ["small", "medium", "large"], None),
    (1047, "levelValues ascending as final tiebreaker",
     [("c", "c", (5, 10)), ("a", "a", (5, 10)), ("b", "b", (5, 10))], False, ["a", "b", "c"], None),
]  # fmt: skip


def _gated(line: int, name: str, skip: str | None) -> Any:
    marks = [pytest.mark.skip(reason=skip)] if skip else []
    return {"id": f"L{line}-{name}", "marks": marks}


@pytest.mark.parametrize(
    ("domains", "unconstrained", "want"),
    [pytest.param(d, u, w, **_gated(line, n, s)) for line, n, d, u, w, s in WITH_LEADER],
)
def test_kueue_sorted_domains_with_leader(
    domains: list[tuple[str, str, tuple[int, int, int]]], unconstrained: bool, want: list[str]
) -> None:
    """tas_flavor_snapshot_test.go L601 (Tower: tas_placement's order of domains with a
    leader; unconstrained is LeastFreeCapacity, TASProfileMixed being on by default)."""
    built = []
    for id_, value, (leaders, slices, pods) in domains:
        d = Domain(id_, (value,), 0)
        d.leaders, d.slices_with_leader, d.pods_with_leader = leaders, slices, pods
        built.append(d)
    assert [d.id for d in _sorted_with_leader(built, unconstrained)] == want


@pytest.mark.parametrize(
    ("domains", "unconstrained", "want"),
    [pytest.param(d, u, w, **_gated(line, n, s)) for line, n, d, u, w, s in PLAIN],
)
def test_kueue_sorted_domains(
    domains: list[tuple[str, str, tuple[int, int]]], unconstrained: bool, want: list[str]
) -> None:
    """tas_flavor_snapshot_test.go L884 (Tower: tas_placement's order of domains)."""
    built = []
    for id_, value, (slices, pods) in domains:
        d = Domain(id_, (value,), 0)
        d.slices, d.pods = slices, pods
        built.append(d)
    assert [d.id for d in _sorted(built, unconstrained)] == want


# TestCompareDomainLevelValues (L1096): two domains' label values, widest first; the sign
# Kueue's comparator gives. Tower orders domains of equal counts by these values (the final
# key of its sort): -1 keeps a before b, 1 puts b first, 0 keeps either order.
COMPARE: list[tuple[int, str, tuple[str, ...], tuple[str, ...], int]] = [
    (1110, "isLowestLevelNode with same-parent sibling domains: ascending by hostname",
     ("b1", "r1", "node-a"), ("b1", "r1", "node-b"), -1),
    (1116, "isLowestLevelNode with same-parent sibling domains: descending by hostname",
     ("b1", "r1", "node-b"), ("b1", "r1", "node-a"), 1),
    (1122, "isLowestLevelNode with same-parent sibling domains: equal hostname",
     ("b1", "r1", "node-a"), ("b1", "r1", "node-a"), 0),
    (1128, "fallback comparator: multi-level inputs with different parents sorted "
     "lexicographically across levels", ("b1", "r1", "node-z"), ("b1", "r2", "node-a"), -1),
    (1134, "fallback comparator: non-hostname levels sorted lexicographically across levels",
     ("b1", "r1"), ("b1", "r2"), -1),
]  # fmt: skip


@pytest.mark.parametrize(
    ("a", "b", "want"), [pytest.param(a, b, w, id=f"L{line}-{n}") for line, n, a, b, w in COMPARE]
)
def test_kueue_compare_domain_level_values(
    a: tuple[str, ...], b: tuple[str, ...], want: int
) -> None:
    """tas_flavor_snapshot_test.go L1096."""

    def order(first: Domain, second: Domain) -> list[str]:
        return [d.id for d in _sorted([first, second], False)]

    da, db = Domain("a", a, len(a) - 1), Domain("b", b, len(b) - 1)
    forward, backward = order(da, db), order(db, da)
    got = 0 if forward != backward else (-1 if forward == ["a", "b"] else 1)
    assert got == want


# TestCountPodsInAssignment (L1153).
@pytest.mark.parametrize(
    ("domains", "want"),
    [
        pytest.param((), 0, id="L1158-empty assignment"),
        pytest.param((("node-a", 3),), 3, id="L1165-single domain"),
        pytest.param((("node-a", 2), ("node-b", 3), ("node-c", 1)), 6, id="L1174-multiple domains"),
    ],
)
def test_kueue_count_pods_in_assignment(domains: Sequence[tuple[str, int]], want: int) -> None:
    """tas_flavor_snapshot_test.go L1153."""
    assignment = TopologyAssignment(
        ("hostname",), tuple(DomainAssignment((h,), n) for h, n in domains)
    )
    assert assignment.total() == want


# TestComputeAssumedUsageFromAssignment (L1197): one pod's requests (cpu 1000m, memory
# 1024) on each domain of the assignment, with its `pods` slot. Tower charges an assignment
# on its leaves with TopologyDomains.use; the table's level is "hostname" (not the node
# label kubernetes.io/hostname), so a leaf is named by its values.
@pytest.mark.parametrize(
    ("domains", "want"),
    [
        pytest.param((), {}, id="L1207-empty assignment"),
        pytest.param(
            (("node-a", 1),),
            {"node-a": {"cpu": 1000, "memory": 1024, "pods": 1}},
            id="L1214-single domain with one pod",
        ),
        pytest.param(
            (("node-a", 2), ("node-b", 3)),
            {
                "node-a": {"cpu": 2000, "memory": 2048, "pods": 2},
                "node-b": {"cpu": 3000, "memory": 3072, "pods": 3},
            },
            id="L1229-multiple domains",
        ),
    ],
)
def test_kueue_compute_usage_per_domain(
    domains: Sequence[tuple[str, int]], want: Mapping[str, Mapping[str, int]]
) -> None:
    """tas_flavor_snapshot_test.go L1197."""
    nodes = [Node(n, {"hostname": n}) for n in ("node-a", "node-b")]
    snap = TopologySnapshot(Topology("t", ("hostname",)), nodes)
    assignment = TopologyAssignment(
        ("hostname",), tuple(DomainAssignment((h,), n) for h, n in domains)
    )
    snap.use(assignment, {"cpu": 1000, "memory": 1024})
    assert snap.used == want

"""The counts kept per request and brought up to date as usage changes decide as counting
afresh does: random placements and releases on one long-lived snapshot, each compared with a
snapshot built anew from the same nodes and holds (the oracle)."""

from __future__ import annotations

import random

import pytest

from extender.core.api.models import Admission, PodSet, PodSetAssignment, ResourceFlavor, Workload
from extender.core.api.topology import (
    HOSTNAME,
    PREFERRED,
    REQUIRED,
    UNCONSTRAINED,
    SliceLayer,
    Topology,
    TopologyAssignment,
    TopologyRequest,
)
from extender.core.placement.model import Node
from extender.core.tas.placement import PodSetPlacement, TopologySnapshot
from extender.core.tas.scheduling import TopologyScheduling

BLOCK, RACK = "block", "rack"
TOPOLOGY = Topology("default", (BLOCK, RACK, HOSTNAME))


def nodes(rng: random.Random) -> list[Node]:
    out = []
    for b in range(3):
        for r in range(3):
            for h in range(rng.randrange(1, 4)):
                name = f"b{b}-r{r}-h{h}"
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOSTNAME: name}
                out.append(
                    Node(name, labels, (), {"cpu": rng.choice((2, 4, 8)) * 1000, "pods": 110})
                )
    return out


def request(rng: random.Random) -> TopologyRequest:
    kind = rng.randrange(5)
    if kind == 0:
        return TopologyRequest(REQUIRED, rng.choice((BLOCK, RACK, HOSTNAME)))
    if kind == 1:
        return TopologyRequest(PREFERRED, rng.choice((BLOCK, RACK)))
    if kind == 2:
        return TopologyRequest(UNCONSTRAINED)
    if kind == 3:
        return TopologyRequest(REQUIRED, BLOCK, (SliceLayer(HOSTNAME, 2),))
    return TopologyRequest()


@pytest.mark.parametrize("seed", range(8))
def test_kept_counts_place_as_fresh_counts(seed: int) -> None:
    rng = random.Random(seed)
    node_list = nodes(rng)
    kept = TopologySnapshot(TOPOLOGY, node_list)
    held: list[tuple[TopologyAssignment, dict[str, int]]] = []
    for step in range(150):
        if held and rng.random() < 0.3:
            assignment, requests = held.pop(rng.randrange(len(held)))
            kept.use(assignment, requests, -1)
            continue
        req = request(rng)
        pods = rng.choice((1, 2, 3, 4, 6, 8))
        requests = {"cpu": rng.choice((500, 1000, 2000))}
        placement = PodSetPlacement(f"ps{step}", pods, requests, req, req.mode == "implicit")
        fresh = TopologySnapshot(TOPOLOGY, node_list)
        for assignment, reqs in held:
            fresh.use(assignment, reqs)
        got, want = kept.assign([placement]), fresh.assign([placement])
        assert got == want, (seed, step)
        _assert_same_records(kept, fresh, (seed, step))
        # On empty domains (usage ignored) too: those counts are kept across holds.
        empty = kept.assign([placement], simulate_empty=True)
        assert empty == fresh.assign([placement], simulate_empty=True), (seed, step)
        if not got.failed:
            assignment = got.assignments[placement.name]
            kept.use(assignment, requests)
            held.append((assignment, requests))


def _assert_same_records(
    kept: TopologySnapshot, fresh: TopologySnapshot, where: tuple[int, int]
) -> None:
    """Every count the long-lived snapshot keeps, brought up to date, holds on every
    domain what a count made afresh on the oracle holds, and excludes the same leaves."""
    kept.settle()
    for counts in kept._counts.values():
        assert counts.leader_req is None  # no leaders in this test
        assert counts.search is not None
        other = fresh.counts_for(counts.pod_set, None, {}, counts.empty, None, counts.search)
        by_id = {d.id: r for d, r in counts.records.items()}
        assert by_id == {d.id: r for d, r in other.records.items()}, where
        assert counts.tally == other.tally, where
        assert {d.id: w for d, w in counts.excluded.items()} == {
            d.id: w for d, w in other.excluded.items()
        }, where


def _probe(name: str, rng: random.Random) -> tuple[Workload, Admission]:
    req = request(rng)
    pods = rng.choice((1, 2, 3, 4, 6))
    cpu = rng.choice((500, 1000, 2000))
    workload = Workload(
        "default", name, name, "lq", (PodSet("main", pods, {"cpu": cpu}, topology=req),)
    )
    admission = Admission(
        "cq", (PodSetAssignment("main", {"cpu": "tas"}, {"cpu": cpu * pods}, pods),)
    )
    return workload, admission


def _scheduling(node_list: list[Node]) -> TopologyScheduling:
    tas = TopologyScheduling()
    tas.set_topologies([TOPOLOGY])
    tas.set_flavors([ResourceFlavor("tas", {}, topology_name=TOPOLOGY.name)])
    for n in node_list:
        tas.set_node(n)
    return tas


@pytest.mark.parametrize("seed", range(6))
def test_trying_a_placement_without_victims_leaves_the_kept_counts_true(seed: int) -> None:
    """Preemption and the cycle's sticky check take holds off and put them back
    (fits_without, reserve); the counts nobody read meanwhile keep their marks. Every
    placement still decides as one on a TopologyScheduling built afresh from the holds."""
    rng = random.Random(seed)
    node_list = nodes(rng)
    kept = _scheduling(node_list)
    for step in range(120):
        keys = list(kept.held)
        roll = rng.random()
        if keys and roll < 0.2:
            kept.release(rng.choice(keys))
            continue
        workload, admission = _probe(f"w{step}", rng)
        if keys and roll < 0.5:
            victims = rng.sample(keys, rng.randrange(1, len(keys) + 1))
            kept.fits_without(workload, admission, victims)
            if rng.random() < 0.5:
                kept.reserve(workload, admission, victims)
                kept.end_cycle()
            continue
        fresh = _scheduling(node_list)
        for key, holds in kept.held.items():
            fresh.hold(key, holds)
        want = fresh(workload, admission)
        got = kept(workload, admission)
        assert got == want, (seed, step)

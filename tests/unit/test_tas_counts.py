"""The counts kept per request and brought up to date as usage changes decide as counting
afresh does: random placements and releases on one long-lived snapshot, each compared with a
snapshot built anew from the same nodes and holds (the oracle)."""

from __future__ import annotations

import random

import pytest

from extender.core.placement_model import Node
from extender.core.tas_model import (
    HOSTNAME,
    PREFERRED,
    REQUIRED,
    UNCONSTRAINED,
    SliceLayer,
    Topology,
    TopologyAssignment,
    TopologyRequest,
)
from extender.core.tas_placement import PodSetPlacement, TopologySnapshot

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
        if not got.failed:
            assignment = got.assignments[placement.name]
            kept.use(assignment, requests)
            held.append((assignment, requests))

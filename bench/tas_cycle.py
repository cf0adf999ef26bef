"""Scheduling cycles with topology-aware scheduling at 5,000 nodes in 4 levels, against the same
workloads in a flavor without a topology.

    python bench/tas_cycle.py [--nodes-per-rack 10] [--workloads 2000] [--seed 1]

5 zones x 10 blocks x 10 racks x 10 hosts (8 GPUs, 64 cpu, 110 pods each). Ten ClusterQueues
share one flavor; 2,000 workloads arrive in waves of 100: a quarter ask for one rack (8 pods of
8 GPUs), a quarter for one block (16 pods of 4 GPUs), a quarter prefer a block (32 pods of
2 GPUs) and a quarter are unconstrained (8 pods of 1 GPU). Each wave is followed by cycles
until nothing more is admitted; a tenth of what runs then finishes. The same waves run three
times in one process: without a topology on quota alone; without a topology with Tower's node
planner on the same nodes (every GPU pod given a node before admission, as `run` does with
physical resources on); and with the flavor naming the Topology (each admission placed on
domains; the planner is attached too and leaves topology flavors to it). Prints one JSON
object: cycles, their p50/p99/max, admissions, the time spent releasing finished workloads
(outside the cycles), the time spent queueing them (with topology, counting each new
request shape), and the ratios of the topology run to each.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from extender.core.api.labels import LabelSelector
from extender.core.api.models import (
    ClusterQueue,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    Workload,
)
from extender.core.api.topology import (
    HOSTNAME,
    PREFERRED,
    REQUIRED,
    UNCONSTRAINED,
    Topology,
    TopologyRequest,
)
from extender.core.placement.fit import Inventory, PlacementCheck
from extender.core.placement.model import Node
from extender.core.scheduling.cycle import ClusterState
from extender.core.tas.scheduling import TopologyScheduling
from extender.gc_tuning import tune_for_scheduling

GPU = "example.com/gpu"
ZONE, BLOCK, RACK = "cloud.com/zone", "cloud.com/block", "cloud.com/rack"
TOPOLOGY = Topology("default", (ZONE, BLOCK, RACK, HOSTNAME))


def nodes(per_rack: int) -> list[Node]:
    out = []
    for z in range(5):
        for b in range(10):
            for r in range(10):
                for h in range(per_rack):
                    name = f"z{z}-b{b}-r{r}-h{h}"
                    labels = {
                        "pool": "gpu",
                        ZONE: f"z{z}",
                        BLOCK: f"z{z}-b{b}",
                        RACK: f"z{z}-b{b}-r{r}",
                        HOSTNAME: name,
                    }
                    allocatable = {GPU: 8, "cpu": 64_000, "pods": 110}
                    out.append(Node(name, labels, (), allocatable))
    return out


SHAPES = (
    (TopologyRequest(REQUIRED, RACK), 8, 8),
    (TopologyRequest(REQUIRED, BLOCK), 16, 4),
    (TopologyRequest(PREFERRED, BLOCK), 32, 2),
    (TopologyRequest(UNCONSTRAINED), 8, 1),
)


def workloads(count: int, seed: int, with_topology: bool) -> list[Workload]:
    """The same workloads either way; without topology they carry no topology request (a
    podSet that asks for one is kept off a plain flavor, as in Kueue)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        request, pods, gpus = SHAPES[rng.randrange(len(SHAPES))]
        topology = request if with_topology else None
        pod_set = PodSet("main", pods, {GPU: gpus, "cpu": 1000}, topology=topology)
        queue = f"lq{i % 10}"
        out.append(Workload("default", f"w{i}", f"w{i}", queue, (pod_set,), creation_time=i))
    return out


def state(with_topology: bool, node_list: list[Node], planner: bool = False) -> ClusterState:
    """The ClusterState of one run: quota only, or with Tower's node planner on the same
    nodes (as `run --physical-resources` wires it), and with topology on top."""
    flavor = ResourceFlavor(
        "gpus", {"pool": "gpu"}, topology_name="default" if with_topology else None
    )
    quota = ResourceGroup(
        (GPU, "cpu"),
        (FlavorQuotas("gpus", (ResourceQuota(GPU, 4_000), ResourceQuota("cpu", 10**9))),),
    )
    s = ClusterState()
    s.configure(
        flavors=[flavor],
        cluster_queues=[
            ClusterQueue(f"cq{i}", (quota,), "all", namespace_selector=LabelSelector())
            for i in range(10)
        ],
        local_queues=[LocalQueue("default", f"lq{i}", f"cq{i}") for i in range(10)],
        topologies=[TOPOLOGY] if with_topology else [],
    )
    if planner:
        inventory = Inventory()
        inventory.set_flavors([flavor])
        for n in node_list:
            inventory.set_node(n)
        s.add_admission_check(PlacementCheck(inventory))
        s.on_release(inventory.forget)
    if with_topology:
        tas = TopologyScheduling()
        tas.set_topologies([TOPOLOGY])
        tas.set_flavors([flavor])
        for n in node_list:
            tas.set_node(n)
        s.add_admission_check(tas)
        s.on_release(tas.release)
        s.scheduler.topology = tas  # preemption's and the cycle's topology hooks
    return s


def run(
    with_topology: bool,
    node_list: list[Node],
    wls: list[Workload],
    seed: int,
    planner: bool = False,
) -> dict[str, Any]:
    s = state(with_topology, node_list, planner)
    rng = random.Random(seed)
    cycles: list[float] = []
    admitted: list[str] = []
    released = 0.0  # time spent giving back finished workloads' quota (and their domains)
    queued = 0.0  # time spent queueing workloads (with topology: counting new request shapes)
    now = 0.0
    for start in range(0, len(wls), 100):
        began = time.perf_counter()
        for w in wls[start : start + 100]:
            s.add_workload(w)
        queued += time.perf_counter() - began
        while True:
            now += 1
            began = time.perf_counter()
            result = s.schedule(now)
            cycles.append(time.perf_counter() - began)
            admitted += [a.workload.key for a in result.admitted]
            if not result.admitted:
                break
        rng.shuffle(admitted)
        done, admitted = admitted[: len(admitted) // 10], admitted[len(admitted) // 10 :]
        began = time.perf_counter()
        for key in done:
            s.finish(key)
        released += time.perf_counter() - began
    ms = sorted(c * 1000 for c in cycles)
    return {
        "cycles": len(ms),
        "cycle_p50_ms": round(statistics.median(ms), 3),
        "cycle_p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 3),
        "cycle_max_ms": round(ms[-1], 3),
        "core_cpu_s": round(sum(cycles), 3),
        # Kept topology counts are brought up to date when a workload's domains are given
        # back, not in the next cycle: that cost is here, outside the cycles.
        "release_cpu_s": round(released, 3),
        # A queued workload's request shape is counted when it is queued (tas.prepare), once
        # per shape, not in the cycle that places it: that cost is here.
        "queue_cpu_s": round(queued, 3),
        "admitted_at_end": len(admitted),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes-per-rack", type=int, default=10)
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tune_for_scheduling()
    node_list = nodes(args.nodes_per_rack)
    plain = run(False, node_list, workloads(args.workloads, args.seed, False), args.seed)
    planned = run(
        False, node_list, workloads(args.workloads, args.seed, False), args.seed, planner=True
    )
    placed = run(
        True, node_list, workloads(args.workloads, args.seed, True), args.seed, planner=True
    )
    print(
        json.dumps(
            {
                "nodes": len(node_list),
                "levels": len(TOPOLOGY.levels),
                "workloads": args.workloads,
                "without_topology": plain,
                "without_topology_node_planner": planned,
                "with_topology": placed,
                "ratio_p99": round(placed["cycle_p99_ms"] / plain["cycle_p99_ms"], 2),
                "ratio_p50": round(placed["cycle_p50_ms"] / plain["cycle_p50_ms"], 2),
                "ratio_p99_vs_planner": round(placed["cycle_p99_ms"] / planned["cycle_p99_ms"], 2),
                "ratio_p50_vs_planner": round(placed["cycle_p50_ms"] / planned["cycle_p50_ms"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()

"""One scheduling cycle in which every ClusterQueue preempts: its CPU time, repeated.

Five cohorts of six ClusterQueues (20 cpu nominal, borrowingLimit 100, withinClusterQueue
LowerPriority, reclaimWithinCohort Any), each full of 20 one-cpu workloads of priority 50,
each with a pending workload of priority 200 asking 4 cpu: the cycle preempts 4 workloads in
every ClusterQueue. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from extender.core.api.labels import LabelSelector
from extender.core.api.models import (
    Admission,
    ClusterQueue,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    PodSetAssignment,
    Preemption,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WithinClusterQueue,
    Workload,
)
from extender.core.scheduling.cycle import ClusterState
from extender.gc_tuning import tune_for_scheduling


def _workload(name: str, queue: str, cpu: int, priority: int) -> Workload:
    return Workload(
        "default", name, name, queue, (PodSet("main", 1, {"cpu": cpu}),), priority=priority
    )


def build() -> ClusterState:
    quota = ResourceGroup(
        ("cpu",), (FlavorQuotas("default", (ResourceQuota("cpu", 20_000, 100_000),)),)
    )
    preemption = Preemption(WithinClusterQueue.LOWER_PRIORITY, ReclaimWithinCohort.ANY)
    cqs = [
        ClusterQueue(
            f"cq{c}-{i}",
            (quota,),
            f"co{c}",
            namespace_selector=LabelSelector(),
            preemption=preemption,
        )
        for c in range(5)
        for i in range(6)
    ]
    state = ClusterState()
    state.configure(
        flavors=[ResourceFlavor("default")],
        cluster_queues=cqs,
        local_queues=[LocalQueue("default", cq.name, cq.name) for cq in cqs],
    )
    for cq in cqs:
        for j in range(20):
            low = _workload(f"{cq.name}-low-{j}", cq.name, 1000, 50)
            usage = PodSetAssignment("main", {"cpu": "default"}, {"cpu": 1000}, 1)
            state.assume(low, Admission(cq.name, (usage,)), float(j))
        high = _workload(f"{cq.name}-high", cq.name, 4000, 200)
        state.add_workload(high)
    return state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=300)
    args = parser.parse_args()
    tune_for_scheduling()
    times = []
    evicted = 0
    for _ in range(args.repeat):
        state = build()
        start = time.process_time()
        result = state.schedule(100.0)
        times.append((time.process_time() - start) * 1000)
        evicted = len(result.evicted)
    print(
        json.dumps(
            {
                "cluster_queues": 30,
                "evictions_per_cycle": evicted,
                "cycles": args.repeat,
                "cycle_cpu_ms_median": round(statistics.median(times), 3),
                "cycle_cpu_ms_p90": round(sorted(times)[int(0.9 * len(times))], 3),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

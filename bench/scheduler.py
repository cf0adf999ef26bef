"""Kueue's scheduler benchmark (test/performance/scheduler) run through Tower's simulator.

Scenarios follow shared/reference/performance.md §1.2-1.3: cohorts of ClusterQueues with
nominal 20 cpu, borrowingLimit 100, reclaimWithinCohort Any, withinClusterQueue
LowerPriority, and three workload classes arriving at fixed intervals per ClusterQueue.
Each scenario runs in its own process so peak RSS is its own. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import sys
import sysconfig
import time
from collections import defaultdict
from typing import Any

from extender.core.api.labels import LabelSelector
from extender.core.api.models import (
    ClusterQueue,
    FlavorQuotas,
    LocalQueue,
    Preemption,
    PriorityClass,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WithinClusterQueue,
)
from extender.core.placement.fit import Node
from extender.gc_tuning import tune_for_scheduling
from extender.sim.engine import Simulator
from extender.sim.loader import Scenario, SimJob

# name: (count per ClusterQueue, interval s, runtime s, priority, cpu)
BASELINE = {
    "cohorts": 5,
    "queues": 6,
    "classes": {
        "small": (350, 0.100, 0.200, 50, 1),
        "medium": (100, 0.500, 0.500, 100, 5),
        "large": (50, 1.200, 1.000, 200, 20),
    },
}
LARGE = {
    "cohorts": 10,
    "queues": 100,
    "classes": {
        "small": (35, 0.060, 0.150, 50, 1),
        "medium": (11, 0.300, 0.350, 100, 5),
        "large": (4, 0.700, 0.700, 200, 20),
    },
}
# Kueue's published averages (ms) to compare time to admission against.
KUEUE_TTA_MS = {
    "baseline": {"large": 16501, "medium": 76768, "small": 215468},
    "large": {"large": 105604, "medium": 256413, "small": 700379},
}
PRIORITY_CLASS_BY_VALUE = {50: "small", 100: "medium", 200: "large"}


ACCELERATOR = "example.com/accelerator"
# With --nodes: accelerators per pod of each class, and per node (a node holds any one pod).
ACCELERATORS = {"small": 1, "medium": 4, "large": 8}
NODE_ACCELERATORS = 8


def build(spec: dict[str, Any], burst: bool, nodes: int = 0) -> Scenario:
    scenario = Scenario()
    scenario.config.flavors.append(ResourceFlavor("default"))
    for i in range(nodes):
        node = Node(
            f"node-{i:05d}",
            {"kubernetes.io/hostname": f"node-{i:05d}"},
            allocatable={"cpu": 96_000, ACCELERATOR: NODE_ACCELERATORS},
        )
        scenario.nodes.append((0.0, node))
    for c in range(spec["cohorts"]):
        for q in range(spec["queues"]):
            name = f"cq-{c}-{q}"
            quotas = [ResourceQuota("cpu", 20_000, borrowing_limit=100_000)]
            if nodes:
                quotas.append(ResourceQuota(ACCELERATOR, 20, borrowing_limit=100))
            covered = tuple(q.name for q in quotas)
            scenario.config.cluster_queues.append(
                ClusterQueue(
                    name=name,
                    cohort=f"cohort-{c}",
                    resource_groups=(
                        ResourceGroup(covered, (FlavorQuotas("default", tuple(quotas)),)),
                    ),
                    namespace_selector=LabelSelector(),
                    preemption=Preemption(
                        WithinClusterQueue.LOWER_PRIORITY, ReclaimWithinCohort.ANY
                    ),
                )
            )
            scenario.config.local_queues.append(LocalQueue("default", name, name))
            for cls, (count, interval, runtime, _priority, cpu) in spec["classes"].items():
                requests = {"cpu": str(cpu)}
                if nodes:
                    requests[ACCELERATOR] = str(ACCELERATORS[cls])
                pod_spec = {
                    "containers": [{"name": "c", "resources": {"requests": requests}}],
                    "priorityClassName": cls,
                }
                for i in range(count):
                    job_name = f"{name}-{cls}-{i}"
                    obj = {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "metadata": {
                            "name": job_name,
                            "namespace": "default",
                            "labels": {"kueue.x-k8s.io/queue-name": name},
                        },
                        "spec": {"suspend": True, "template": {"spec": pod_spec}},
                    }
                    uid = f"{len(scenario.jobs):08d}-0000-4000-8000-000000000000"
                    arrival = 0.0 if burst else round(i * interval, 6)
                    scenario.jobs.append(
                        SimJob(
                            "Job", "default", job_name, uid, obj, arrival, runtime, True, job_name
                        )
                    )
    for value, cls in PRIORITY_CLASS_BY_VALUE.items():
        scenario.config.priority_classes[cls] = PriorityClass(cls, value)
    return scenario


def interpreter() -> dict[str, str]:
    """Which CPython ran: a build without profile-guided optimization (pyenv's default) runs
    the cycle measurably slower than the python:3.11-slim image's or Debian's."""
    return {
        "version": platform.python_version(),
        "executable": sys.executable,
        "configure": str(sysconfig.get_config_var("CONFIG_ARGS") or ""),
        "profile_use_flags": str(sysconfig.get_config_var("PGO_PROF_USE_FLAG") or ""),
    }


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run(name: str, burst: bool, nodes: int = 0, quota_only: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = BASELINE if name == "baseline" else LARGE
    scenario = build(spec, burst, nodes)
    if quota_only:
        scenario.nodes.clear()
    tune_for_scheduling()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    simulator = Simulator(scenario, timer=time.perf_counter, cpu_timer=time.process_time)
    sim = simulator.run()
    sim_cycle_cpu = simulator.cycle_cpu_seconds
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0

    created: dict[str, float] = {}
    first_admitted: dict[str, float] = {}
    cls_of: dict[str, str] = {}
    running: dict[str, tuple[float, str, int]] = {}
    used: defaultdict[str, float] = defaultdict(float)  # cpu-seconds per ClusterQueue
    admissions = evictions = 0
    cpu_of = {cls: c[4] for cls, c in spec["classes"].items()}
    for e in sim.events:
        key = e["name"]
        if e["event"] == "Created":
            created[key] = e["time"]
            cls_of[key] = key.rsplit("-", 2)[1]
        elif e["event"] == "Admitted":
            admissions += 1
            first_admitted.setdefault(key, e["time"])
            running[key] = (e["time"], e["clusterQueue"], cpu_of[cls_of[key]])
        elif e["event"] in ("Finished", "Evicted"):
            start, cq, amount = running.pop(key)
            used[cq] += (e["time"] - start) * amount
            evictions += e["event"] == "Evicted"
    span = max(e["time"] for e in sim.events) - min(e["time"] for e in sim.events)
    usage = [100 * used[cq.name] / (20 * span) for cq in scenario.config.cluster_queues]
    tta = defaultdict(list)
    for key, when in first_admitted.items():
        tta[cls_of[key]].append(when - created[key])
    cycles_ms = [s * 1000 for s in sim.cycle_seconds]
    return {
        "scenario": name
        + ("-burst" if burst else "")
        + (f"-{nodes}-nodes" if nodes else "")
        + ("-quota-only" if quota_only else ""),
        "python": interpreter(),
        "nodes": nodes,
        "workloads": len(scenario.jobs),
        "cluster_queues": len(scenario.config.cluster_queues),
        "admissions": admissions,
        "evictions": evictions,
        "never_admitted": len(created) - len(first_admitted),
        "core_cpu_s": round(sim.core_cpu_seconds, 3),
        "process_cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "admissions_per_core_cpu_s": round(admissions / max(1e-9, sim.core_cpu_seconds)),
        "cycles": len(cycles_ms),
        "cycle_p50_ms": round(percentile(cycles_ms, 50), 3),
        "cycle_p99_ms": round(percentile(cycles_ms, 99), 3),
        "cycle_max_ms": round(max(cycles_ms), 3),
        "cycle_cpu_p99_ms": round(percentile([s * 1000 for s in sim_cycle_cpu], 99), 3),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "virtual_makespan_s": round(span, 3),
        "avg_time_to_admission_ms": {
            c: round(1000 * statistics.mean(v)) for c, v in sorted(tta.items())
        },
        "kueue_avg_time_to_admission_ms": KUEUE_TTA_MS.get(name),
        "cq_usage_percent": {"min": round(min(usage), 1), "mean": round(statistics.mean(usage), 1)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenario", choices=("baseline", "large"))
    parser.add_argument(
        "--burst",
        action="store_true",
        help="create every workload at t=0 (the 50,000-pending cycle test)",
    )
    parser.add_argument(
        "--nodes",
        type=int,
        default=0,
        help=f"add this many nodes of {NODE_ACCELERATORS} {ACCELERATOR}; every pod then "
        "requests some, so each admission needs a placement plan",
    )
    parser.add_argument(
        "--quota-only",
        action="store_true",
        help="with --nodes: the same workloads and quotas, but the nodes left out (no "
        "physical fit), to tell the planner's cost from the second resource's",
    )
    args = parser.parse_args()
    json.dump(run(args.scenario, args.burst, args.nodes, args.quota_only), sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

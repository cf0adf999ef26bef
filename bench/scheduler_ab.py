"""Interleaved before/after runs of bench/scheduler.py, each pinned to one core.

    python bench/scheduler_ab.py BEFORE_TREE AFTER_TREE --pairs 8 [--scenario large] [--burst]
        [--core 1] [--out bench/results/scheduler-cycle-idle-ab.json]

Each tree is a checkout with its own .venv (git worktree add ...; scripts/venv.sh). Pair by
pair, one run of each side (the side that goes first alternates), each in its own process
under `taskset -c CORE`. Besides bench/scheduler.py's JSON, a run reports its 1,000-head
cycles by kind: admitting (admits, evicts nothing), idle (nominates heads, admits and evicts
nothing), first_judgement (idle at the first instant: every class judged for the first
time) and preempting. Prints and stores every run, the per-pair after/before ratios and
their median and quartiles; --out keeps one report per scenario in the file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# Run inside each tree's own interpreter: bench/scheduler.py's run(), with every cycle's
# decisions counted (not timed: the simulator times the cycles as it always does).
CHILD = r"""
import json, sys
sys.path.insert(0, ".")
import bench.scheduler as bs
from extender.core.scheduling.cycle import ClusterState
from extender.sim import engine
kinds = []
schedule = ClusterState.schedule
def counting(self, now):
    result = schedule(self, now)
    kinds.append((now, result.heads, len(result.admitted), len(result.evicted)))
    return result
ClusterState.schedule = counting
sims = []
run = engine.Simulator.run
def keeping(self):
    sim = run(self)
    sims.append(sim)
    return sim
engine.Simulator.run = keeping
out = bs.run(sys.argv[1], sys.argv[2] == "burst")
by_kind = {"admitting": [], "idle": [], "first_judgement": [], "preempting": []}
for (now, heads, admitted, evicted), seconds in zip(kinds, sims[0].cycle_seconds, strict=True):
    if heads < 500:
        continue
    kind = "preempting" if evicted else "admitting" if admitted else "idle"
    if kind == "idle" and now == kinds[0][0]:
        kind = "first_judgement"  # the first instant: every class is judged for the first time
    by_kind[kind].append(round(seconds * 1000, 3))
out["cycles_by_kind_ms"] = by_kind
print(json.dumps(out))
"""


def run_one(tree: Path, scenario: str, burst: bool, core: int) -> dict[str, Any]:
    python = tree / ".venv" / "bin" / "python"
    args = ["taskset", "-c", str(core), str(python), "-c", CHILD, scenario]
    args.append("burst" if burst else "steady")
    done = subprocess.run(args, cwd=tree, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def summary(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    before = [r["before"][key] for r in runs]
    after = [r["after"][key] for r in runs]
    ratios = [a / b for a, b in zip(after, before, strict=True)]
    q1, median, q3 = quartiles(ratios)
    return {
        "before_median": statistics.median(before),
        "before_quartiles": quartiles(before)[::2],
        "after_median": statistics.median(after),
        "after_quartiles": quartiles(after)[::2],
        "paired_after_over_before": {"q1": q1, "median": median, "q3": q3},
    }


def kind_medians(run: dict[str, Any]) -> dict[str, float | None]:
    medians: dict[str, float | None] = {
        kind: (statistics.median(ms) if ms else None)
        for kind, ms in run["cycles_by_kind_ms"].items()
    }
    admitting = run["cycles_by_kind_ms"]["admitting"]
    medians["slowest_admitting"] = max(admitting) if admitting else None
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--scenario", default="large", choices=("baseline", "large"))
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--core", type=int, default=1)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    pairs = []
    for i in range(args.pairs):
        sides = ("before", "after") if i % 2 == 0 else ("after", "before")
        pair: dict[str, Any] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "first": sides[0]}
        for side in sides:
            tree = args.before if side == "before" else args.after
            pair[side] = run_one(tree, args.scenario, args.burst, args.core)
            pair[side]["cycle_median_by_kind_ms"] = kind_medians(pair[side])
        pairs.append(pair)
        b, a = pair["before"], pair["after"]
        print(
            f"pair {i + 1}: p99 {b['cycle_p99_ms']:.1f} -> {a['cycle_p99_ms']:.1f} ms; "
            f"idle {b['cycle_median_by_kind_ms']['idle']} -> "
            f"{a['cycle_median_by_kind_ms']['idle']} ms; admitting "
            f"{b['cycle_median_by_kind_ms']['admitting']} -> "
            f"{a['cycle_median_by_kind_ms']['admitting']} ms; first judgement "
            f"{b['cycle_median_by_kind_ms']['first_judgement']} -> "
            f"{a['cycle_median_by_kind_ms']['first_judgement']} ms",
            file=sys.stderr,
            flush=True,
        )
    decisions = ("admissions", "evictions", "avg_time_to_admission_ms", "virtual_makespan_s")
    first = {k: pairs[0]["before"][k] for k in (*decisions, "cycles")}
    same = all(
        {k: p[side][k] for k in (*decisions, "cycles")} == first
        for p in pairs
        for side in ("before", "after")
    )
    for side in ("before", "after"):
        for p in pairs:
            for kind, value in p[side]["cycle_median_by_kind_ms"].items():
                p[f"{side}_{kind}_median_ms"] = value
    report = {
        "scenario": args.scenario + ("-burst" if args.burst else ""),
        "before": str(args.before),
        "after": str(args.after),
        "pinned_core": args.core,
        "pairs": len(pairs),
        "same_decisions_every_run": same,
        "cycle_p99_ms": summary(pairs, "cycle_p99_ms"),
        "cycle_p50_ms": summary(pairs, "cycle_p50_ms"),
        "core_cpu_s": summary(pairs, "core_cpu_s"),
        "runs": pairs,
    }
    for kind in ("idle", "first_judgement", "admitting", "slowest_admitting"):
        flat = [
            {side: {"v": p[f"{side}_{kind}_median_ms"]} for side in ("before", "after")}
            for p in pairs
            if p[f"before_{kind}_median_ms"] and p[f"after_{kind}_median_ms"]
        ]
        if flat:
            report[f"{kind}_cycle_median_ms"] = summary(flat, "v")
    if args.out:
        # One file holds a report per scenario: a run of another scenario is added to it.
        stored = json.loads(args.out.read_text()) if args.out.exists() else {}
        stored[report["scenario"]] = report
        args.out.write_text(json.dumps(stored, indent=1) + "\n")
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))


if __name__ == "__main__":
    main()

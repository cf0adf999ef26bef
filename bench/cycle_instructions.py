"""Instructions the admission core spends on chosen cycles of bench/scheduler.py, counted.

    python bench/cycle_instructions.py --first 1 --last 2 [--scenario large] [--burst]
        [--trees BEFORE_TREE AFTER_TREE]

This machine's speed moves by a factor of two from minute to minute, more than most changes
to the cycle; instruction counts do not move. Each count runs the scenario under valgrind
(callgrind, no cache simulation, PYTHONHASHSEED=0) until just before a cycle starts, and
exits there: the cycles first..last cost Ir(stop before last+1) − Ir(stop before first). The
difference also holds what the simulator does between those cycles (applying their decisions,
the arrivals and finishes in between), which is the same on both sides of a comparison.
Each tree is a checkout with its own .venv; by default this one. Needs valgrind (apt-get
install valgrind). A count takes a minute or two.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# Run inside each tree's interpreter: the scenario, exiting just before cycle N.
CHILD = r"""
import os, sys
sys.path.insert(0, ".")
import bench.scheduler as bs
from extender.core.scheduling.cycle import ClusterState
stop_before, started = int(sys.argv[1]), [0]
schedule = ClusterState.schedule
def counting(self, now):
    if started[0] == stop_before:
        os._exit(0)
    started[0] += 1
    return schedule(self, now)
ClusterState.schedule = counting
bs.run(sys.argv[2], sys.argv[3] == "burst")
"""


def instructions(tree: Path, stop_before: int, scenario: str, burst: bool) -> int:
    """Instructions executed until just before cycle `stop_before` starts."""
    python = tree / ".venv" / "bin" / "python"
    done = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--cache-sim=no",
            "--callgrind-out-file=/dev/null",
            str(python),
            "-c",
            CHILD,
            str(stop_before),
            scenario,
            "burst" if burst else "steady",
        ],
        cwd=tree,
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"valgrind reported no count for {tree}: {done.stderr[-500:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--first", type=int, required=True, help="first cycle counted, 0-based")
    parser.add_argument("--last", type=int, required=True, help="the last cycle counted")
    parser.add_argument("--scenario", default="large", choices=("baseline", "large"))
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--trees", type=Path, nargs="+", default=[Path(".")])
    args = parser.parse_args()
    if args.last < args.first:
        raise SystemExit("--last must not come before --first")
    jobs = [(tree, stop) for tree in args.trees for stop in (args.first, args.last + 1)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        counts = list(pool.map(lambda j: instructions(j[0], j[1], args.scenario, args.burst), jobs))
    report = {
        "scenario": args.scenario + ("-burst" if args.burst else ""),
        "cycles": [args.first, args.last],
        "instructions": {
            str(tree): counts[2 * i + 1] - counts[2 * i] for i, tree in enumerate(args.trees)
        },
    }
    json.dump(report, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

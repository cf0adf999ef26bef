"""The sha256 of the simulator's events and pending report on Kueue's scheduler scenarios.

A refactor that must not change behaviour keeps these digests byte-identical: run it before
and after, and compare. Prints one JSON object: scenario -> {events, pending, sha256}.
"""

from __future__ import annotations

import hashlib
import json
import sys

from extender.sim.engine import simulate

sys.path.insert(0, "bench")
from scheduler import BASELINE, LARGE, build

SCENARIOS = {
    "baseline": (BASELINE, False, 0),
    "large": (LARGE, False, 0),
    "baseline-500-nodes": (BASELINE, False, 500),
}


def digest(spec: dict[str, object], burst: bool, nodes: int) -> dict[str, object]:
    sim, pending = simulate(build(spec, burst, nodes))
    out = json.dumps({"events": sim.events, "pending": pending}, sort_keys=True).encode()
    return {
        "events": len(sim.events),
        "pending": len(pending),
        "sha256": hashlib.sha256(out).hexdigest(),
    }


def main() -> None:
    names = sys.argv[1:] or list(SCENARIOS)
    result = {name: digest(*SCENARIOS[name]) for name in names}
    json.dump(result, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

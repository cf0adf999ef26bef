"""How fast `python -m extender simulate` loads what it decides on (issue: the simulator must
load as fast as it decides).

Writes Kueue's baseline scenario (bench/scheduler.py: 15,000 Jobs, 30 ClusterQueues) as one
multi-document manifest, then measures, each in its own process: parsing it with PyYAML's C
loader, and the whole `python -m extender simulate -o json` run. Prints one JSON object with
both CPU times, their ratio (target ≤ 3) and the output's sha256 (unchanged by speed work).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from controller import scenario_objects  # noqa: E402
from scheduler import BASELINE, PRIORITY_CLASS_BY_VALUE, build  # noqa: E402

V2 = "kueue.x-k8s.io/v1beta2"


def manifest() -> str:
    scenario = build(BASELINE, burst=False)
    docs: list[dict[str, Any]] = [
        {"apiVersion": V2, "kind": "ResourceFlavor", "metadata": {"name": "default"}}
    ]
    for value, name in PRIORITY_CLASS_BY_VALUE.items():
        docs.append(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    # The same ClusterQueues and LocalQueues the controller benchmark applies.
    for kind, obj in scenario_objects(BASELINE["cohorts"], BASELINE["queues"])[1:]:
        docs.append({"apiVersion": kind.api_version, "kind": kind.kind, **obj})
    for job in scenario.jobs:
        obj = json.loads(json.dumps(job.obj))
        obj["metadata"]["annotations"] = {
            "tower.dev/sim-arrival": f"{job.arrival:g}s",
            "tower.dev/sim-duration": f"{job.duration:g}s",
        }
        docs.append(obj)
    return yaml.dump_all(docs, Dumper=yaml.CSafeDumper, sort_keys=False)


def cpu_of(args: list[str]) -> tuple[float, bytes]:
    """CPU seconds (user + system) of one child process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(args, cwd=ROOT, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "baseline.yaml")
        Path(path).write_text(manifest())
        size = os.path.getsize(path)
        parse = (
            "import yaml,sys; list(yaml.load_all(open(sys.argv[1]).read(), "
            "Loader=yaml.CSafeLoader))"
        )
        parse_cpu, _ = cpu_of([sys.executable, "-c", parse, path])
        sim_cpu, out = cpu_of([sys.executable, "-m", "extender", "simulate", "-o", "json", path])
    json.dump(
        {
            "manifest_mib": round(size / 2**20, 2),
            "c_loader_parse_cpu_s": round(parse_cpu, 2),
            "simulate_cpu_s": round(sim_cpu, 2),
            "ratio": round(sim_cpu / parse_cpu, 2),
            "output_sha256": hashlib.sha256(out).hexdigest(),
        },
        sys.stdout,
        indent=2,
    )
    print()


if __name__ == "__main__":
    main()

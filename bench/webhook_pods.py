"""Webhook latency for pods against the Job path: the same Tower server (gunicorn over TLS)
answers POST /mutate--v1-pod and /mutate-batch-v1-job at a fixed rate, measured with hey.

The Job review is the one a real kube-apiserver sent for the seed Job (shared/fixtures); the
pod review is the same request for a pod of that Job's template, labelled for a queue, as
tests/fixtures.as_pod makes it. The two paths are measured in alternation, round by round, so
that drifts of this shared machine hit both alike; medians are compared. Prints one JSON
object.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures import admission_review, as_pod  # noqa: E402
from tests.servers import free_port, generate  # noqa: E402

_spec = importlib.util.spec_from_file_location("bench_webhook", ROOT / "bench" / "webhook.py")
assert _spec is not None
assert _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

PATHS = {"job": "/mutate-batch-v1-job", "pod": "/mutate--v1-pod"}


def hey(port: int, path: str, body: Path, rate: int, seconds: int) -> dict[str, float]:
    bench.PATH = path  # bench.hey posts to its module's PATH
    result: dict[str, float] = bench.hey(port, body, rate, seconds)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()
    if shutil.which("hey") is None:
        raise SystemExit("hey is missing: run bench/run.sh, which installs it")
    tmp = Path(tempfile.mkdtemp(prefix="tower-webhook-pods-bench-"))
    certs = tmp / "certs"
    generate(certs)
    job = admission_review("01-mutate.job-CREATE-generateName.seed-job")
    bodies = {"job": tmp / "job.json", "pod": tmp / "pod.json"}
    bodies["job"].write_text(json.dumps(job))
    bodies["pod"].write_text(json.dumps(as_pod(job)))
    port = free_port()
    proc = bench.start_tower(port, certs, args.workers, args.threads, tmp)
    samples: dict[str, list[dict[str, float]]] = {"job": [], "pod": []}
    try:
        bench.wait_ready(port, proc)
        for kind in PATHS:
            hey(port, PATHS[kind], bodies[kind], args.rate, 2)  # warm up
        for _ in range(args.rounds):
            for kind in PATHS:
                samples[kind].append(hey(port, PATHS[kind], bodies[kind], args.rate, args.seconds))
                print(json.dumps({kind: samples[kind][-1]}), file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(timeout=20)

    def median(kind: str, key: str) -> float:
        values = sorted(s[key] for s in samples[kind])
        return round(values[len(values) // 2], 1)

    result = {
        "rate": args.rate,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "workers": args.workers,
        "threads": args.threads,
        **{f"{kind}_p50_ms": median(kind, "p50_ms") for kind in PATHS},
        **{f"{kind}_p99_ms": median(kind, "p99_ms") for kind in PATHS},
        "non_200": sum(s["non_200"] for kind in PATHS for s in samples[kind]),
        "pod_over_job_p99": round(median("pod", "p99_ms") / median("job", "p99_ms"), 3),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()

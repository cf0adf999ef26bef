"""Prints benchmark result files as one Markdown table (the README's performance section)."""

from __future__ import annotations

import json
import sys

ROWS = [
    ("workloads", "workloads"),
    ("cluster_queues", "ClusterQueues"),
    ("core_cpu_s", "CPU seconds in the core"),
    ("admissions", "admissions (incl. re-admissions after preemption)"),
    ("admissions_per_core_cpu_s", "admission decisions per core CPU second"),
    ("cycles", "scheduling cycles"),
    ("cycle_p50_ms", "cycle p50 (ms)"),
    ("cycle_p99_ms", "cycle p99 (ms)"),
    ("cycle_max_ms", "cycle max (ms)"),
    ("peak_rss_mib", "peak RSS (MiB)"),
    ("evictions", "preemptions"),
    ("virtual_makespan_s", "virtual time to drain (s)"),
]


def main(paths: list[str]) -> None:
    results = []
    for path in paths:
        with open(path) as handle:
            results.append(json.load(handle))
    print("| | " + " | ".join(r["scenario"] for r in results) + " |")
    print("|---|" + "---|" * len(results))
    for key, label in ROWS:
        print(f"| {label} | " + " | ".join(str(r[key]) for r in results) + " |")
    for cls in ("large", "medium", "small"):
        cells = []
        for r in results:
            ours = r["avg_time_to_admission_ms"].get(cls)
            kueue = (r.get("kueue_avg_time_to_admission_ms") or {}).get(cls)
            cells.append(f"{ours} (Kueue {kueue})" if kueue else str(ours))
        print(f"| avg time to admission, {cls} (ms, virtual) | " + " | ".join(cells) + " |")
    usage = [f"{r['cq_usage_percent']['min']} / {r['cq_usage_percent']['mean']}" for r in results]
    print("| ClusterQueue usage, min / mean (%) | " + " | ".join(usage) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])

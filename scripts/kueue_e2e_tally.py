"""The Kueue e2e tally of one real control plane, merged from every run made on it.

Each run of tests/e2e/kueue appends its cases' outcomes to a results log (tests/e2e/kueue/
conftest.py, `record_outcomes`). A whole run of the package takes over an hour; runs of single
files on the same plane are merged here, the latest outcome of each case winning, and printed
as the suite prints its tally, with a table per Go file and the commits the outcomes came from.

    python scripts/kueue_e2e_tally.py [--log PATH] [--plane UID] [--markdown]

The plane defaults to the one TOWER_E2E_KUBECONFIG reaches now (its kube-system uid).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.kueue.cases import all_cases  # noqa: E402
from tests.e2e.kueue.conftest import NOT_EXPRESSIBLE, results_log  # noqa: E402


def current_plane() -> str:
    kubeconfig = os.environ.get("TOWER_E2E_KUBECONFIG", "")
    done = subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "get", "namespace", "kube-system",
         "-o", "jsonpath={.metadata.uid}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.stdout.strip()


def latest(log: Path, plane: str, dirty: bool = False) -> dict[str, dict[str, str]]:
    """Each case's last recorded outcome on the plane, from committed code only unless
    `dirty` (a run from a tree with uncommitted changes is marked "+dirty")."""
    found: dict[str, dict[str, str]] = {}
    for line in log.read_text().splitlines():
        if not line.strip():
            continue
        entry = json.loads(line)
        if entry.get("plane") != plane:
            continue
        if entry.get("commit", "").endswith("+dirty") and not dirty:
            continue
        found[entry["case"]] = entry  # the log is in time order: later runs win
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, default=None)
    parser.add_argument("--plane", default=None, help="kube-system uid (default: the current)")
    parser.add_argument("--markdown", action="store_true", help="the per-file table too")
    parser.add_argument("--dirty", action="store_true", help="count runs of uncommitted code")
    args = parser.parse_args()
    log = args.log or results_log()
    if log is None or not log.exists():
        print("no results log: set TOWER_E2E_WORK or TOWER_E2E_KUEUE_RESULTS, or pass --log",
              file=sys.stderr)  # fmt: skip
        return 2
    plane = args.plane or current_plane()
    if not plane:
        print("no plane: set TOWER_E2E_KUBECONFIG or pass --plane", file=sys.stderr)
        return 2
    outcomes = latest(log, plane, args.dirty)
    counts: Counter[str] = Counter()
    per_file: dict[str, Counter[str]] = defaultdict(Counter)
    commits: Counter[str] = Counter()
    cases = all_cases()
    for key, case in cases.items():
        if key in NOT_EXPRESSIBLE:
            outcome = "not expressible"
        else:
            entry = outcomes.get(key)
            outcome = "no outcome" if entry is None else entry["outcome"]
            if outcome == "skipped":
                outcome = "not expressible"
            if entry is not None:
                commits[entry["commit"]] += 1
        counts[outcome] += 1
        per_file[case.file][outcome] += 1
    expressible = len(cases) - counts["not expressible"]
    share = 100.0 * counts["passed"] / expressible if expressible else 0.0
    print(
        f"{counts['passed']} of {len(cases)} Kueue e2e cases pass; {counts['differs']} differ on "
        f"purpose; {counts['not expressible']} not expressible here; {counts['failed']} fail; "
        f"{counts['not run']} not run; {counts['no outcome']} with no outcome on this plane "
        f"({share:.0f}% of the {expressible} expressible cases pass; the target is 95%)"
    )
    print(f"plane {plane}; outcomes from commits " + ", ".join(
        f"{c} ({n})" for c, n in commits.most_common()))  # fmt: skip
    if args.markdown:
        print("\n| Go file | pass | differs | fail | not run | no outcome | not expressible |")
        print("|---|---|---|---|---|---|---|")
        for file in sorted(per_file):
            c = per_file[file]
            print(f"| {file} | {c['passed']} | {c['differs']} | {c['failed']} | "
                  f"{c['not run']} | {c['no outcome']} | {c['not expressible']} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

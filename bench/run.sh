#!/usr/bin/env bash
# Runs every benchmark, each scenario in its own process; writes bench/results/*.json and prints
# a summary. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
log=$(mktemp)
.venv/bin/python -m pip install --disable-pip-version-check -e . >"$log" 2>&1 || {
  cat "$log" >&2; echo "installing Tower failed (log above)" >&2; exit 1; }
mkdir -p bench/results
for scenario in "baseline" "large" "large --burst"; do
  name=${scenario// --/-}
  echo "== scheduler: $scenario" >&2
  .venv/bin/python bench/scheduler.py $scenario > "bench/results/scheduler-$name.json"
done
.venv/bin/python bench/summary.py bench/results/scheduler-*.json

#!/usr/bin/env bash
# Runs every benchmark, each scenario in its own process; writes bench/results/*.json and prints
# a summary. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
install_tower
mkdir -p bench/results
for scenario in "baseline" "large" "large --burst"; do
  name=${scenario// --/-}
  echo "== scheduler: $scenario" >&2
  .venv/bin/python bench/scheduler.py $scenario > "bench/results/scheduler-$name.json"
done
.venv/bin/python bench/summary.py bench/results/scheduler-*.json

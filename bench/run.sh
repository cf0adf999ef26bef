#!/usr/bin/env bash
# Runs every benchmark, each scenario in its own process; writes bench/results/*.json and prints
# summaries. Not part of CI. Installs wrk, hey and nginx (Debian packages) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
install_tower test
mkdir -p bench/results
for scenario in "baseline" "large" "large --burst"; do
  name=${scenario// --/-}
  echo "== scheduler: $scenario" >&2
  .venv/bin/python bench/scheduler.py $scenario > "bench/results/scheduler-$name.json"
done
.venv/bin/python bench/summary.py bench/results/scheduler-*.json

missing=()
for tool in wrk hey nginx; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]} (apt-get)" >&2
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "== webhook: Tower vs bare WSGI vs nginx over TLS" >&2
.venv/bin/python bench/webhook.py > bench/results/webhook.json
.venv/bin/python -c "import json; print(json.dumps(json.load(open('bench/results/webhook.json'))['best'], indent=2))"

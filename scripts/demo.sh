#!/usr/bin/env bash
# Installs Tower into .venv and replays the seed quick-start through the simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
log=$(mktemp)
.venv/bin/python -m pip install --disable-pip-version-check -e . >"$log" 2>&1 || {
  cat "$log" >&2; echo "installing Tower failed (log above)" >&2; exit 1; }
exec .venv/bin/python -m extender simulate examples/quickstart/01-queues.yaml \
  examples/quickstart/02-jobs.yaml "$@"

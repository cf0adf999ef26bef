#!/usr/bin/env bash
# Installs Tower into .venv and replays the seed quick-start: first through the simulator, then
# live — kubectl, the webhook and the controller against the API double (no cluster needed).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
install_tower
echo "== the seed quick-start in the simulator (virtual time)"
.venv/bin/python -m extender simulate examples/quickstart/01-queues.yaml \
  examples/quickstart/02-jobs.yaml "$@"
echo
echo "== the same, live: kubectl, the webhook and the controller (about 30 seconds)"
.venv/bin/python scripts/live_demo.py

#!/usr/bin/env bash
# Installs Tower into .venv and replays the seed quick-start through the simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
install_tower
exec .venv/bin/python -m extender simulate examples/quickstart/01-queues.yaml \
  examples/quickstart/02-jobs.yaml "$@"

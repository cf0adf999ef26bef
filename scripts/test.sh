#!/usr/bin/env bash
# Installs Tower and its test tools into .venv, checks the import rule, lint and types, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh
install_tower test
.venv/bin/lint-imports --no-cache
.venv/bin/ruff check .
.venv/bin/mypy
# One pytest worker per core, at most four: most tests wait on real processes (gunicorn, the
# controller, kubectl), and a worker that ran out of tests takes another's (worksteal).
# pytest exits 5 when it collects no test, with workers too: a failure here, never green.
exec .venv/bin/python -m pytest -n auto --maxprocesses 4 --dist worksteal "$@"

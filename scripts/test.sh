#!/usr/bin/env bash
# Installs Tower and its test tools into .venv, checks the import rule, lint and types, runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
log=$(mktemp)
.venv/bin/python -m pip install --disable-pip-version-check -e '.[test]' >"$log" 2>&1 || {
  cat "$log" >&2; echo "installing Tower failed (log above)" >&2; exit 1; }
.venv/bin/lint-imports --no-cache
.venv/bin/ruff check .
.venv/bin/mypy
# pytest exits 5 when it collects no test: that is a failure here, never green.
exec .venv/bin/python -m pytest "$@"

# Sourced by the scripts: makes .venv and installs Tower into it, quietly unless it fails.
# Usage: install_tower [EXTRAS]   e.g. install_tower test
install_tower() {
  local spec="."
  [ -n "${1:-}" ] && spec=".[$1]"
  python3 -m venv .venv
  local log
  log=$(mktemp)
  .venv/bin/python -m pip install --disable-pip-version-check -e "$spec" >"$log" 2>&1 || {
    cat "$log" >&2; echo "installing Tower failed (log above)" >&2; return 1; }
}

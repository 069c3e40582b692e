#!/usr/bin/env bash
# Set up what one job needs, without root, in the virtualenv .venv:
#   bash scripts/bootstrap.sh demo   pairwatch[demo] only (httpx, requests): what `pairwatch demo`
#                                    imports; no npm, no dashboard tooling, seconds on a fresh box
#   bash scripts/bootstrap.sh dev    (the default) every extra, plus the npm packages the tests
#                                    start (anvil, MCP servers) in tests/servers/node_modules
# Sourced by scripts/demo.sh (demo) and scripts/test.sh (dev); PAIRWATCH_EXTRAS overrides.
# Each set of extras keeps its own stamp in .venv, so running the demo never makes the next
# test run reinstall, and work is redone only when pyproject.toml (or, for dev, the npm
# manifests) changed.  A dev install contains the demo's extras, so it satisfies the demo too.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PAIRWATCH_PYTHON:-python3}"
extras="${PAIRWATCH_EXTRAS:-${1:-dev}}"

stamp_of() {  # what an install of extras $1 depends on
  if [ "$1" = dev ]; then
    cat pyproject.toml tests/servers/package*.json 2>/dev/null | sha256sum | cut -c1-16
  else
    sha256sum < pyproject.toml | cut -c1-16
  fi
}
current() { [ "$(cat ".venv/.pairwatch-stamp.$1" 2>/dev/null || true)" = "$(stamp_of "$1")" ]; }

if [ ! -x .venv/bin/python ] || ! { current "$extras" || { [ "$extras" = demo ] && current dev; }; }; then
  echo "bootstrap: installing pairwatch[$extras] into .venv" >&2
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  if [ "$extras" = dev ]; then  # the demo's path skips the pip self-upgrade: it is not needed
    .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  fi
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]" \
    2> >(grep -v "^WARNING: Location" >&2)
  if [ -f tests/servers/package.json ] && [ "$extras" = dev ]; then
    echo "bootstrap: installing npm packages into tests/servers/node_modules" >&2
    if [ -f tests/servers/package-lock.json ]; then
      npm ci --prefix tests/servers --no-audit --no-fund --loglevel=error
    else
      npm install --prefix tests/servers --no-audit --no-fund --loglevel=error
    fi
  fi
  stamp_of "$extras" > ".venv/.pairwatch-stamp.$extras"
fi

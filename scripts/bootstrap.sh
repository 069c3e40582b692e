#!/usr/bin/env bash
# Set up everything pairwatch's demo and tests need, without root: a virtualenv with every
# extra in .venv, and the npm packages the tests start (anvil, MCP servers) in
# tests/servers/node_modules.  Re-running is cheap: work is redone only when pyproject.toml or
# tests/servers/package*.json changed.  Sourced by scripts/test.sh and scripts/demo.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PAIRWATCH_PYTHON:-python3}"
extras=dev

stamp_of() { cat pyproject.toml tests/servers/package*.json 2>/dev/null | sha256sum | cut -c1-16; echo "$extras"; }
want="$(stamp_of)"
have="$(cat .venv/.pairwatch-stamp 2>/dev/null || true)"
if [ ! -x .venv/bin/python ] || [ "$want" != "$have" ]; then
  echo "bootstrap: installing pairwatch[$extras] into .venv" >&2
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extras]" 2> >(grep -v "^WARNING: Location" >&2)
  if [ -f tests/servers/package.json ] && [ "$extras" = dev ]; then
    echo "bootstrap: installing npm packages into tests/servers/node_modules" >&2
    if [ -f tests/servers/package-lock.json ]; then
      npm ci --prefix tests/servers --no-audit --no-fund --loglevel=error
    else
      npm install --prefix tests/servers --no-audit --no-fund --loglevel=error
    fi
  fi
  echo "$want" > .venv/.pairwatch-stamp
fi

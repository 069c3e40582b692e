#!/usr/bin/env bash
# The integrations against the oldest and the newest version of each client library they
# support (src/pairwatch/integrations/supported.py; the oldest is also each extra's floor in
# pyproject.toml).  One venv per end, kept as .venv-libs-*; each runs the integration tests
# of the HTTP clients, websockets and web3.py.  (MCP's range is one minor version: the main
# suite covers it.)
# Usage: bash scripts/test_library_range.sh [oldest|newest]...  (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
floor() {  # the oldest version of a library, as supported.py's RANGES says
  .venv/bin/python -c "from pairwatch.integrations.supported import RANGES; print(RANGES['$1'][0])"
}
libs=(httpx httpx2 requests aiohttp web3 websockets)
ends=("$@")
[ ${#ends[@]} -eq 0 ] && ends=(oldest newest)
for end in "${ends[@]}"; do
  venv=".venv-libs-$end"
  pins=()
  for lib in "${libs[@]}"; do
    if [ "$end" = oldest ]; then pins+=("$lib==$(floor "$lib")"); else pins+=("$lib"); fi
  done
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -U pip
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e ".[test,sse]" 2>&1 \
    | grep -v "^WARNING: Location" || true
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -U "${pins[@]}" 2>&1 \
    | grep -v "^WARNING: Location" || true
  echo "== client libraries ($end): $("$venv/bin/python" -c "
from importlib.metadata import version
print(', '.join(f'{n} {version(n)}' for n in '${libs[*]}'.split()))")" >&2
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -p no:randomly \
    tests/integrations tests/websockets tests/web3
done

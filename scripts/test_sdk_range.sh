#!/usr/bin/env bash
# The SDK shortcuts against the oldest and the newest opentelemetry-sdk that pyproject allows.
#
# pairwatch takes a few shortcuts past the public OpenTelemetry API, all in
# src/pairwatch/otel/sdk/; each checks itself against the public API when first wanted and
# turns itself off when anything differs.  This builds one venv per end of the range, prints
# which shortcuts are on (`pairwatch sdk --check`: it fails when one turned itself off on a
# version listed in otel/sdk TESTED, and only warns on any other), and runs the equivalence
# tests that compare each shortcut with the public API.
# Usage: bash scripts/test_sdk_range.sh [oldest|newest]...  (default: both)
set -euo pipefail
cd "$(dirname "$0")/.."
oldest=$(sed -n 's/.*"opentelemetry-sdk>=\([0-9.]*\)".*/\1/p' pyproject.toml | head -1)
ends=("$@")
[ ${#ends[@]} -eq 0 ] && ends=(oldest newest)
for end in "${ends[@]}"; do
  venv=".venv-sdk-$end"
  if [ "$end" = oldest ]; then pins=("opentelemetry-api==$oldest" "opentelemetry-sdk==$oldest");
  else pins=("opentelemetry-api" "opentelemetry-sdk"); fi
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check -U pip
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -U "${pins[@]}" \
    msgspec prometheus-client wrapt pytest pytest-timeout pytest-asyncio hypothesis 2>&1 \
    | grep -v "^WARNING: Location" || true
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps -e . 2>&1 \
    | grep -v "^WARNING: Location" || true
  echo "== opentelemetry-sdk $("$venv/bin/python" -c 'from importlib.metadata import version as v; print(v("opentelemetry-sdk"))') ($end)" >&2
  "$venv/bin/python" -m pairwatch sdk --check
  "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/equivalence/test_sdk_*.py \
    tests/pairing/test_depth_guard.py tests/test_bounds.py
done

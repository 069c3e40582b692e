#!/usr/bin/env bash
# The README's test command: set up (no root needed), then lint, type-check and test.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k pairing -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bootstrap.sh dev
echo "== ruff" >&2
.venv/bin/ruff check .
echo "== mypy --strict src/" >&2
.venv/bin/mypy
echo "== pytest" >&2
.venv/bin/python -m pytest "$@"
# The fast paths on the oldest and newest opentelemetry-sdk pyproject allows (about a minute
# and a half, two small venvs kept as .venv-sdk-*); PAIRWATCH_SDK_RANGE=0 skips it offline.
if [ "${PAIRWATCH_SDK_RANGE:-1}" = 1 ]; then
  echo "== opentelemetry-sdk range" >&2
  bash scripts/test_sdk_range.sh
fi
# A few seconds; fails only on a gross regression (a median above twice its target), so
# that a noisy machine cannot fail CI.  The full table: python benchmarks/run.py
echo "== benchmarks --short" >&2
PYTHONPATH=src exec .venv/bin/python benchmarks/run.py --short

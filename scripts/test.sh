#!/usr/bin/env bash
# The README's test command: set up (no root needed), then lint, type-check and test.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh -k pairing -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bootstrap.sh
echo "== ruff" >&2
.venv/bin/ruff check .
echo "== mypy --strict src/" >&2
.venv/bin/mypy
echo "== pytest" >&2
exec .venv/bin/python -m pytest "$@"

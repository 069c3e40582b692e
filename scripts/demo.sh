#!/usr/bin/env bash
# The README's main-job command: set up (no root needed), then run the demo.
# Arguments go to the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bootstrap.sh
exec .venv/bin/pairwatch demo "$@"

#!/usr/bin/env bash
# The README's main-job command: set up (no root needed), then run the demo.
# Arguments go to the demo.  The setup installs only the requirements of pairwatch[demo]
# (httpx, requests) and the demo runs from src/, so a fresh machine reaches the live view in
# seconds; the test suite's extras and npm packages are scripts/test.sh's business.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bootstrap.sh demo
PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" exec .venv/bin/python -m pairwatch demo "$@"

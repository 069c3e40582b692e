#!/usr/bin/env bash
# The README's main-job command: set up (no root needed), then run the demo.
# Arguments go to the demo.  The setup installs only pairwatch[demo] (httpx, requests): a
# fresh machine reaches the live view in seconds; the test suite's extras and npm packages
# are scripts/test.sh's business.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bootstrap.sh demo
exec .venv/bin/pairwatch demo "$@"

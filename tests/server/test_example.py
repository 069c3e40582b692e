"""examples/server_middleware.py runs and prints what its docstring promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from components import need

ROOT = Path(__file__).resolve().parents[2]


def test_the_server_example_finds_the_reply_lost_in_transit():
    need("starlette", "pip install -e '.[test]'")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples/server_middleware.py")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "the client got ids [1, 3]",
        "client side: {'batch.closed': 1, 'batch.missing_response': 1, "
        "'batch.requests': 3, 'batch.response_count_mismatch': 1}",
        "server side: {'batch.closed': 1, 'batch.requests': 3}",
        "verdict: lost_in_transit: 1 request of 3 closed without a reply at the client "
        "(body_end) although the server answered it (2)",
    ]

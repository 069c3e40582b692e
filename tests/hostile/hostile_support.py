"""Running one hostile case in a child process under a memory limit (see child.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
MIB = 1024 * 1024


def run_child(spec: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    """Run one case in a child (see child.py); its result, or a failure naming the case."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run(
        [sys.executable, str(HERE / "child.py"), json.dumps(spec)],
        capture_output=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode != 0 or not lines:
        pytest.fail(
            f"child {spec} ended with {proc.returncode}:\n"
            + proc.stderr.decode(errors="replace")[-3000:]
        )
    result: dict[str, Any] = json.loads(lines[-1])
    result["stderr"] = proc.stderr.decode(errors="replace")
    return result


def both(spec: dict[str, Any], timeout: float = 120) -> tuple[dict[str, Any], dict[str, Any]]:
    """The case bare, then instrumented: (bare, instrumented)."""
    bare = run_child({**spec, "mode": "bare"}, timeout)
    seen = run_child({**spec, "mode": "instrumented"}, timeout)
    return bare, seen

"""multilspy's client against its offline-capable Python server, in its own virtualenv.

multilspy 0.1.1 pins pygls 1.x (through jedi-language-server 0.41) and ``requests==2.33.0``,
so it cannot share the dev virtualenv with pygls 2.x: ``scripts/bootstrap.sh`` installs it in
``.venv-multilspy`` and the session runs there, in a child (``multilspy_child.py``), with
pairwatch from ``src/``.  Its other languages' servers are downloaded at run time, which
cannot work offline: only Python is tested.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from components import require
from lsp_support import ROOT, SOURCE

pytestmark = pytest.mark.timeout(120)

VENV = ROOT / ".venv-multilspy"
INSTALL = "bash scripts/bootstrap.sh installs it into .venv-multilspy"


def run(repo: Path, mode: str) -> dict[str, Any]:
    python = VENV / "bin" / "python"
    require(python.exists(), "multilspy (in .venv-multilspy)", INSTALL)
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src"),
        "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        [str(python), str(Path(__file__).with_name("multilspy_child.py")), str(repo), mode],
        capture_output=True,
        text=True,
        timeout=100,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_multilspy_with_its_python_server_books_are_exact(tmp_path: Path):
    (tmp_path / "m.py").write_text(SOURCE)
    bare = run(tmp_path, "bare")
    seen = run(tmp_path, "instrumented")
    assert seen["seen"] == bare["seen"]  # definition, references, hover, completions
    assert seen["seen"][2:] == [True, True]
    # initialize, definition, references, hover, completion, shutdown; initialized, exit and
    # a didOpen and didClose around each request close as notifications
    assert seen["counters"] == {
        "batch.requests": 6,
        "batch.closed[complete]": 6,
        "batch.closed[no_response_expected]": 10,
        "labels": ["multilspy", "stdio"],
    }

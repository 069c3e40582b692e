"""Real language servers for the LSP tests, and the drivers both client libraries share.

pyright comes from npm (``tests/servers``), pylsp from PyPI (the ``test`` extra), the scripted
faulty server is ``python -m pairwatch.chaos lsp``.  A server that is absent skips its tests,
naming the install step; under ``CI=true`` it fails them (:mod:`components`).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import sys
from pathlib import Path

from components import require

ROOT = Path(__file__).resolve().parents[2]
PYRIGHT = ROOT / "tests/servers/node_modules/pyright/langserver.index.js"
INSTALL_NPM = "bash scripts/bootstrap.sh installs it (npm ci --prefix tests/servers)"
INSTALL_PIP = "bash scripts/bootstrap.sh installs it (pip install -e '.[dev]')"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

FAULTS = (
    "batch.missing_response",
    "batch.response_count_mismatch",
    "batch.unknown_id_response",
    "batch.null_id_response",
    "batch.invalid_response",
    "batch.duplicate_id",
)
"""Counters a healthy LSP session leaves at zero."""

SOURCE = "import os\n\n\ndef twice(x: int) -> int:\n    return 2 * x\n\n\ntwice(1)\nos.pa\n"
"""The document every session opens: a definition, a call of it, a completion point."""


def pyright_command() -> list[str]:
    require(shutil.which("node") is not None and PYRIGHT.is_file(), "pyright (npm)", INSTALL_NPM)
    return ["node", str(PYRIGHT), "--stdio"]


def pylsp_command() -> list[str]:
    require(importlib.util.find_spec("pylsp") is not None, "pylsp (python-lsp-server)", INSTALL_PIP)
    return [sys.executable, "-m", "pylsp"]


def chaos_command(script: str | None = None) -> list[str]:
    argv = [sys.executable, "-m", "pairwatch.chaos", "lsp"]
    return [*argv, f"--script={script}"] if script else argv


def freeze(pid: int) -> None:
    """Stop a server in place: it reads nothing and answers nothing until killed."""
    os.kill(pid, signal.SIGSTOP)


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)

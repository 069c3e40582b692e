"""The README's marked blocks run as written, and print what the README says they print.

A block is marked by an HTML comment on the line before its fence (invisible on PyPI):

* ``<!-- readme-test: background -->``: a shell command ending in ``&``, started and left
  running (its ``--port`` is waited on) for the blocks after it;
* ``<!-- readme-test: run -->``: a Python block, run with this environment's interpreter;
  the next ``<!-- readme-test: output -->`` block is its exact standard output;
* ``<!-- readme-test: file=NAME -->``: a file the next shell block uses, written as is;
* ``<!-- readme-test: shell -->``: shell lines run in an empty directory with this
  environment's ``pairwatch`` on ``PATH``;
* ``<!-- readme-test: fresh-venv -->``: shell lines run in a new virtualenv whose ``pip``
  finds pairwatch as a wheel built from this checkout (``PIP_FIND_LINKS``) and everything
  else on the package index, as a pip user's would.

Ports are the README's own (18545 for the server, 9464 for metrics): the blocks are what a
reader pastes, so they are not rewritten for the test.
"""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest
from components import require

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
BIN = Path(sys.executable).parent  # the `pairwatch` command of this environment
MARKED = re.compile(
    r"(?ms)^<!-- readme-test: (?P<mark>[^>]*?) -->\n```(?P<lang>\w+)\n(?P<body>.*?)^```"
)


def blocks() -> list[tuple[str, str, str]]:
    return [(m["mark"], m["lang"], m["body"]) for m in MARKED.finditer(README)]


def marked(mark: str) -> list[str]:
    return [body for found, _lang, body in blocks() if found == mark]


def env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def wait_for(port: int, proc: subprocess.Popen[bytes], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the README's server exited with {proc.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on {port} after {seconds} s")


@pytest.fixture(scope="module")
def server() -> Iterator[None]:
    """The README's background block: the fault-injecting server, as a reader starts it."""
    (command,) = marked("background")
    line = command.strip()
    assert line.endswith("&"), line
    argv = shlex.split(line[:-1])
    port = int(argv[argv.index("--port") + 1])
    proc = subprocess.Popen(argv, env=env(), stdout=subprocess.DEVNULL)
    try:
        wait_for(port, proc)
        yield
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_marked_blocks_are_where_the_readme_says():
    marks = [mark for mark, _lang, _body in blocks()]
    assert marks == ["background", "run", "output", "file=app.py", "fresh-venv", "shell"]


def test_the_first_run_prints_what_the_readme_shows(server: None, tmp_path: Path) -> None:
    (code,) = marked("run")
    (expected,) = marked("output")
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    logged = re.search(r"\(`(pairwatch: batch of .*?)`\)", README, re.S)
    assert logged is not None
    assert " ".join(logged[1].split()) in done.stderr


def test_the_zero_code_route_from_a_fresh_pip_install(
    server: None, wheel: Path, tmp_path: Path
) -> None:
    """The exact install command and run line, in a new virtualenv: the app's own page
    carries the missing reply, and nothing prints a traceback."""
    require(
        os.environ.get("PAIRWATCH_OFFLINE") != "1",
        "the package index (PAIRWATCH_OFFLINE=1 skips the fresh install)",
        "unset PAIRWATCH_OFFLINE",
    )
    (app,) = marked("file=app.py")
    (script,) = marked("fresh-venv")
    (tmp_path / "app.py").write_text(app)
    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(home)
    fresh = {
        **os.environ,
        "PATH": f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(home),
        "PIP_FIND_LINKS": str(wheel.parent),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONPATH": "",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=fresh,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "2 replies" in lines, done.stdout[-3000:]
    (found,) = [line for line in lines if line.startswith("batch_missing_response_total")]
    assert 'pairwatch_close_reason="body_end"' in found
    assert found.endswith(" 1.0"), found
    where = subprocess.run(
        [str(home / "bin" / "python"), "-c", "import pairwatch; print(pairwatch.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(home)), where.stdout  # the wheel, not the checkout


def test_the_shell_blocks_run_as_written(tmp_path: Path) -> None:
    """The dashboards export, as the README writes it: rules rendered for those flags."""
    (script,) = marked("shell")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    readme = (tmp_path / "monitoring" / "README.md").read_text()
    assert "| availability objective (`--objective`) | 99.9% of requests answered |" in readme
    assert "`cluster`, `namespace`" in readme
    alerts = (tmp_path / "monitoring" / "rules" / "pairwatch-alerts.yaml").read_text()
    assert "https://wiki.example.com/pairwatch/runbook.md#" in alerts
    assert "cluster" in alerts

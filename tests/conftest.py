"""Fixtures every test folder shares: exported telemetry, a hand-moved clock, chaos servers."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from components import need
from otel_support import FakeClock, Otel

from pairwatch.chaos import ChaosServer


@pytest.fixture
def otel() -> Otel:
    return Otel()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def chaos() -> Iterator[Callable[..., ChaosServer]]:
    """Factory: a ChaosServer in a thread (a proxy when given upstream=); stopped at teardown.

    Folders that want one server per module (tests/robustness) override this name.
    """
    started: list[ChaosServer] = []

    def make(*args: Any, **kwargs: Any) -> ChaosServer:
        srv = ChaosServer(*args, **kwargs).run_in_thread()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop_thread()


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pairwatch built into a wheel from this checkout, once per session (offline)."""
    need("hatchling", "pip install 'pairwatch[test]' (hatchling builds the wheel offline)")
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            str(out),
            str(Path(__file__).resolve().parents[1]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (found,) = out.glob("pairwatch-*.whl")
    return found

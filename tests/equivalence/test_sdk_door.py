"""The SDK shortcuts as a whole: on where they agree, off when told or when they differ,
and nothing exported changes either way.

The per-shortcut files beside this one compare each shortcut with the public API case by
case; here the door itself: the environment switch, the free-threaded fallback, a check
that finds a difference, what ``pairwatch sdk`` prints, and two child processes running the
same batches with every shortcut on and every one off.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pairwatch.cli import main
from pairwatch.otel import sdk
from pairwatch.otel.sdk import histograms

HERE = Path(__file__).resolve().parent


@pytest.fixture
def fresh_verdicts() -> Iterator[None]:
    """Each shortcut decides once per process: these tests decide again, then restore."""
    sdk.verdict.cache_clear()
    yield
    sdk.verdict.cache_clear()


def _scenarios(shortcuts: str) -> dict[str, object]:
    env = {**os.environ, "PAIRWATCH_SDK_SHORTCUTS": shortcuts}
    done = subprocess.run(
        [sys.executable, str(HERE / "sdk_scenarios.py")],
        capture_output=True, text=True, env=env, timeout=120, check=True,
    )  # fmt: skip
    found: dict[str, object] = json.loads(done.stdout)
    return found


def test_every_shortcut_on_and_every_one_off_export_the_same() -> None:
    _tested()
    on, off = _scenarios("true"), _scenarios("false")
    assert on.pop("status") == dict.fromkeys(sdk.SHORTCUTS, True)
    assert off.pop("status") == dict.fromkeys(sdk.SHORTCUTS, False)
    assert on == off
    # Every run made spans and points: a comparison of two empty runs proves nothing.
    ratio = on["ratio"]
    assert isinstance(ratio, dict)
    assert 0 < len(ratio["spans"]) < len(on["always"]["spans"])  # type: ignore[index]
    assert len(ratio["points"]) == 54  # zero series included (docs/metrics.md, Counters at zero)


def _tested() -> None:
    """A newer SDK than the tested ones may turn a shortcut off on its own, and should:
    ``pairwatch sdk --check`` warns there, and these exact expectations do not apply."""
    if sdk.sdk_version() not in sdk.TESTED:
        pytest.skip(f"opentelemetry-sdk {sdk.sdk_version()} is not among {sdk.TESTED}")


def test_every_shortcut_is_on_on_this_tested_sdk() -> None:
    _tested()
    assert {name: on for name, (on, _) in sdk.status().items()} == dict.fromkeys(
        sdk.SHORTCUTS, True
    )


def test_the_switch_turns_every_shortcut_off(fresh_verdicts, monkeypatch) -> None:
    monkeypatch.setenv("PAIRWATCH_SDK_SHORTCUTS", "false")
    assert all(not on for on, _ in sdk.status().values())
    assert not any(sdk.fell_back(name) for name in sdk.SHORTCUTS)  # told, not failed


def test_a_free_threaded_interpreter_turns_every_shortcut_off(fresh_verdicts, monkeypatch):
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: False, raising=False)
    assert {why for _, why in sdk.status().values()} == {
        "off: a free-threaded interpreter (the shortcuts assume the GIL)"
    }


def test_a_check_that_finds_a_difference_turns_its_shortcut_off_with_one_line(
    fresh_verdicts, monkeypatch, caplog
) -> None:
    monkeypatch.setattr(histograms, "check", lambda name: "buckets differ")
    with caplog.at_level(logging.WARNING, logger="pairwatch"):
        assert not sdk.on("histograms")
        assert not sdk.on("histograms")  # decided once
    assert sdk.status()["histograms"] == (False, "off: buckets differ")
    assert sdk.fell_back("histograms")
    lines = [r.getMessage() for r in caplog.records if "histograms" in r.getMessage()]
    assert len(lines) == 1
    assert "buckets differ" in lines[0]
    assert sdk.on("child_spans")  # the others are unaffected


def test_a_check_that_raises_turns_its_shortcut_off(fresh_verdicts, monkeypatch) -> None:
    def broken(name: str) -> str | None:
        raise RuntimeError("moved")

    monkeypatch.setattr(histograms, "check", broken)
    on, why = sdk.verdict("histograms")
    assert not on
    assert why == "off: its check raised RuntimeError('moved')"


def test_pairwatch_sdk_prints_each_shortcut(capsys) -> None:
    _tested()
    assert main(["sdk"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"opentelemetry-sdk {sdk.sdk_version()} (tested)"
    assert [line.split()[0] for line in out[1:]] == list(sdk.SHORTCUTS)
    assert all(line.split()[1] == "on" for line in out[1:])


@pytest.mark.parametrize(("tested", "status"), [(True, 1), (False, 0)])
def test_pairwatch_sdk_check_fails_only_on_a_tested_version(
    fresh_verdicts, monkeypatch, capsys, tested, status
) -> None:
    monkeypatch.setattr(histograms, "check", lambda name: "buckets differ")
    version = sdk.sdk_version()
    monkeypatch.setattr(sdk, "TESTED", (version,) if tested else ("0.0.1",))
    assert main(["sdk", "--check"]) == status
    err = capsys.readouterr().err
    word = "error" if tested else "warning"
    assert err.strip().splitlines()[-1].startswith(f"{word}: histograms fell back")

"""The committed dashboard JSON is exactly what dashboards/generate.py produces.

grafana_foundation_sdk not importable: skipped with an install hint, failed under CI=true.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
GENERATOR = REPO_ROOT / "dashboards" / "generate.py"
COMMITTED = REPO_ROOT / "dashboards" / "pairwatch.json"


def generate(output: Path) -> str:
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--output", str(output)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return output.read_text(encoding="utf-8")


def test_committed_json_is_up_to_date(grafana_sdk: None, tmp_path: Path) -> None:
    fresh = generate(tmp_path / "pairwatch.json")
    assert fresh == COMMITTED.read_text(encoding="utf-8"), (
        "dashboards/pairwatch.json is stale: run `python dashboards/generate.py` and commit"
    )


def test_generator_is_deterministic(grafana_sdk: None, tmp_path: Path) -> None:
    assert generate(tmp_path / "a.json") == generate(tmp_path / "b.json")


def test_check_flag_detects_a_stale_file(grafana_sdk: None, tmp_path: Path) -> None:
    stale = tmp_path / "stale.json"
    stale.write_text("{}\n", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, str(GENERATOR), "--check", "--output", str(stale)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "stale" in result.stderr

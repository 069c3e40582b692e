"""The README is the package description on PyPI and a pip user's only guide: it must render
there, link nowhere relative, and say what the code does (extras, flags, fault kinds, the
serve_metrics signature, the two contributor commands)."""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

from components import need

import pairwatch
from pairwatch.chaos import KINDS

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")
CONTRIBUTOR_EXTRAS = {"test", "dashboards", "dev"}


def section(title: str) -> str:
    """The text of one ``## title`` section, up to the next ``## ``."""
    found = re.search(rf"(?ms)^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README)
    assert found, title
    return found.group(1)


def pyproject_extras() -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    block = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return set(re.findall(r"(?m)^([a-z0-9_-]+) = \[", block))


def test_the_readme_renders_as_pypi_renders_it_with_no_relative_links_or_images():
    markdown = need("readme_renderer.markdown", "pip install 'pairwatch[test]'")
    html = markdown.render(README)
    assert html is not None
    assert "<h1" in html
    assert "<table>" in html
    targets = re.findall(r'<(?:a|img)\b[^>]*?\b(?:href|src)="([^"]*)"', html)
    own = [t for t in targets if not t.startswith("#user-content-")]  # the renderer's anchors
    relative = [t for t in own if not re.match(r"https?://|mailto:", t)]
    assert relative == []
    assert "<img" not in html  # no picture that only resolves inside the repository


def test_every_extra_is_in_the_install_table_and_contributor_extras_under_development():
    install = section("Install")
    listed = set(re.findall(r"(?m)^\| `([a-z0-9_-]+)` \|", install))
    assert listed == pyproject_extras() - CONTRIBUTOR_EXTRAS
    development = section("Development")
    for extra in CONTRIBUTOR_EXTRAS:
        assert f"`{extra}`" in development, extra
    assert 'pip install "pairwatch[httpx]"' in install


def test_the_python_examples_are_valid_python():
    blocks = re.findall(r"(?ms)^```python\n(.*?)^```", README)
    assert len(blocks) >= 3
    for block in blocks:
        ast.parse(block.replace("\n...\n", "\npass\n"))


def test_serve_metrics_is_documented_with_its_real_defaults():
    signature = inspect.signature(pairwatch.serve_metrics)
    assert signature.parameters["port"].default == 9464
    assert signature.parameters["addr"].default == "127.0.0.1"
    assert 'serve_metrics(port=9464, addr="127.0.0.1")' in section("Export the metrics")
    for variable in (
        "OTEL_METRICS_EXPORTER",
        "OTEL_TRACES_EXPORTER",
        "OTEL_SERVICE_NAME",
        "OTEL_EXPORTER_PROMETHEUS_PORT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ):
        assert variable in section("Export the metrics"), variable
    assert "opentelemetry-distro" in section("Export the metrics")


def test_the_demo_table_names_every_flag_and_fault_kind_the_command_has():
    demo = section("The demo")
    documented = set(re.findall(r"`(--[a-z-]+)", demo))
    help_text = subprocess.run(
        [sys.executable, "-m", "pairwatch", "demo", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    real = set(re.findall(r"(--[a-z][a-z-]+)", help_text)) - {"--help"}
    assert documented == real
    kinds_row = next(line for line in demo.splitlines() if line.startswith("| `--faults"))
    assert set(re.findall(r"`([a-z_]+)`", kinds_row)) - {"none"} == set(KINDS)


def test_the_contributor_quick_start_runs_the_demo_and_the_tests():
    development = section("Development")
    assert "bash scripts/demo.sh" in development
    assert "bash scripts/test.sh" in development
    demo_sh = (REPO / "scripts" / "demo.sh").read_text()
    assert "source scripts/bootstrap.sh demo\n" in demo_sh
    assert "-m pairwatch demo" in demo_sh
    assert "source scripts/bootstrap.sh dev\n" in (REPO / "scripts" / "test.sh").read_text()
    assert "pairwatch dashboards export" in section("Dashboards and alerts")

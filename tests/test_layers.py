"""The arrows point down: integrations -> channel -> otel -> pairing, read from the imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "pairwatch"


def imports_of(path: Path) -> set[str]:
    """Every module a file imports, absolute (``from .x import y`` resolved)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _files(part: str) -> list[Path]:
    root = SRC / part
    return sorted(root.rglob("*.py")) if root.is_dir() else [root.with_suffix(".py")]


FORBIDDEN = {
    "pairing": ("opentelemetry", "pairwatch.otel", "pairwatch.channel", "pairwatch.integrations",
                "pairwatch.api", "pairwatch.audit", "pairwatch.cli", "pairwatch.chaos"),
    "otel": ("pairwatch.channel", "pairwatch.integrations", "pairwatch.api",
             "pairwatch.instrumentor", "pairwatch.audit", "pairwatch.cli", "pairwatch.chaos"),
    "channel": ("pairwatch.integrations", "pairwatch.api", "pairwatch.instrumentor",
                "pairwatch.audit", "pairwatch.cli", "pairwatch.chaos"),
    "chaos": ("pairwatch.pairing", "pairwatch.otel", "pairwatch.channel"),
    # The middleware stands where integrations stand: it may use the channel and the
    # integrations' body tap, never the client-patching surface above them.
    "server": ("pairwatch.api", "pairwatch.instrumentor", "pairwatch.audit", "pairwatch.cli",
               "pairwatch.chaos"),
    "integrations": ("pairwatch.server", "pairwatch.api", "pairwatch.audit", "pairwatch.cli",
                     "pairwatch.chaos"),
}  # fmt: skip


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_no_upward_imports(part):
    bad = {
        (path.relative_to(SRC).as_posix(), name)
        for path in _files(part)
        for name in imports_of(path)
        for prefix in FORBIDDEN[part]
        if name == prefix or name.startswith(prefix + ".")
    }
    assert bad == set()


def test_the_vocabulary_and_names_import_no_opentelemetry():
    for module in ("names", "vocabulary"):
        found = imports_of(SRC / "otel" / f"{module}.py")
        assert {n for n in found if n.startswith(("opentelemetry", "prometheus_client"))} == set()
        assert {n for n in found if n.startswith("pairwatch")} <= {
            "pairwatch.otel.names",
            "pairwatch.otel.names.LATENCY_BUCKETS",
            "pairwatch.otel.names.SIZE_BUCKETS",
        }


def test_the_scan_sees_absolute_and_relative_imports():
    """The checks above can fail: the scan finds what real files import, both spellings."""
    assert "pairwatch.pairing.records" in imports_of(SRC / "otel" / "telemetry.py")
    assert "opentelemetry.metrics" in imports_of(SRC / "otel" / "telemetry.py")
    assert "pairwatch.chaos.engine" in imports_of(SRC / "chaos" / "stdio_transport.py")

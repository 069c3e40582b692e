"""Shared fixtures for the dashboard and alert-rule tests.

Tools these tests need but pip does not install (promtool, prometheus) and the optional
Python packages of the `dashboards` extra are *skipped* when missing on a developer machine,
with a hint how to get them, and make the test *fail* when CI=true, where .ci/run installs
them and a skip would hide a broken pipeline.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS_DIR = REPO_ROOT / "dashboards"

PROMTOOL_HINT = "promtool not installed: run `apt-get install prometheus` (done by .ci/run)"
PROMETHEUS_HINT = "prometheus not installed: run `apt-get install prometheus` (done by .ci/run)"

# dashboards/ is not a package: make dashboards/queries.py importable as `queries`.
if str(DASHBOARDS_DIR) not in sys.path:
    sys.path.insert(0, str(DASHBOARDS_DIR))


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def missing(hint: str) -> None:
    """Skip with `hint`, or fail under CI=true."""
    if in_ci():
        pytest.fail(f"{hint} [required because CI=true]")
    pytest.skip(hint)


def need_python_module(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        missing(
            f"{module} not importable: pip install -e '.[dashboards]' "
            f"(provides {package}; done by .ci/run)"
        )


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing(PROMTOOL_HINT)
    assert path is not None
    return path


@pytest.fixture(scope="session")
def prometheus_bin() -> str:
    path = shutil.which("prometheus")
    if path is None:
        missing(PROMETHEUS_HINT)
    assert path is not None
    return path


@pytest.fixture(scope="session")
def yaml_module() -> object:
    need_python_module("yaml", "pyyaml")
    import yaml

    return yaml


@pytest.fixture(scope="session")
def grafana_sdk() -> None:
    need_python_module("grafana_foundation_sdk", "grafana-foundation-sdk")


@pytest.fixture(scope="session")
def prometheus_client_available() -> None:
    need_python_module("prometheus_client", "prometheus-client")


@pytest.fixture(scope="session")
def matplotlib_available() -> None:
    need_python_module("matplotlib", "matplotlib")

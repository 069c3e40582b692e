"""Ship the dashboards, alert rules and runbook inside the wheel, as package data.

A pip user has no checkout, so ``pairwatch dashboards export DIR`` must find these files in
the installed package.  The hook copies whatever ``dashboards/`` holds except the Python
tooling that generates and renders it (that needs the repository's dev extras), so a rule
file or a dashboard added later ships without touching this list.  An editable install
skips it: the command reads the checkout's ``dashboards/`` directly, so edits show at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = "dashboards"
TARGET = "pairwatch/_dashboards"
TOOLING_SUFFIXES = (".py", ".pyc")


def shipped(relative: Path) -> bool:
    """True for the monitoring files a user deploys; False for generators and caches."""
    return relative.suffix not in TOOLING_SUFFIXES and "__pycache__" not in relative.parts


class DashboardsHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        root = Path(self.root) / SOURCE
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if path.is_file() and shipped(relative):
                build_data["force_include"][str(path)] = f"{TARGET}/{relative.as_posix()}"

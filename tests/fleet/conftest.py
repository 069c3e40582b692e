"""The fleet tests reuse dashboards/live.py (start Prometheus, poll with a deadline)."""

from __future__ import annotations

import sys
from pathlib import Path

DASHBOARDS_DIR = Path(__file__).resolve().parents[2] / "dashboards"
if str(DASHBOARDS_DIR) not in sys.path:
    sys.path.insert(0, str(DASHBOARDS_DIR))

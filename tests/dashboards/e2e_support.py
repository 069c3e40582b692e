"""What the end-to-end dashboard tests check against a running Prometheus.

Shared by test_e2e_prometheus.py (a real `pairwatch demo`) and test_e2e_fake_exporter.py
(a structural fake); starting processes lives in dashboards/live.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from live import api_get
from queries import DASHBOARD, PanelQuery, load_dashboard, panel_queries, substitute


@dataclass(frozen=True)
class EmptyQuery:
    """A dashboard query that returned nothing (or failed)."""

    query: PanelQuery
    sent: str
    reason: str

    def __str__(self) -> str:
        return (
            f"panel {self.query.panel_id} ({self.query.panel_title}) {self.query.ref_id}: "
            f"{self.reason}\n    {self.sent}"
        )


def queries_without_data(
    base_url: str,
    dashboard_path: Path = DASHBOARD,
    values: Mapping[str, str] | None = None,
) -> list[EmptyQuery]:
    """Run every panel query of the dashboard through /api/v1/query; return the empty ones.

    Template variables are replaced as Grafana's "All" would (`.*` regex matches; see
    dashboards/queries.py), or by `values`. A query that errors counts as empty, with the
    error as its reason.
    """
    empty: list[EmptyQuery] = []
    for query in panel_queries(load_dashboard(dashboard_path)):
        sent = substitute(query.expr, values)
        try:
            body = api_get(base_url, "/api/v1/query", {"query": sent})
        except OSError as error:  # HTTP 400 for a bad query, connection errors
            empty.append(EmptyQuery(query, sent, f"error: {error}"))
            continue
        if body.get("status") != "success":
            empty.append(EmptyQuery(query, sent, f"error: {body.get('error')}"))
        elif not body["data"]["result"]:
            empty.append(EmptyQuery(query, sent, "no data"))
    return empty


def active_alerts(base_url: str) -> list[dict[str, Any]]:
    """Pending and firing alerts, as /api/v1/alerts lists them."""
    body = api_get(base_url, "/api/v1/alerts")
    alerts: list[dict[str, Any]] = body["data"]["alerts"]
    return alerts


def alert_state(alerts: list[dict[str, Any]], name: str, **labels: str) -> str | None:
    """State of the first alert `name` carrying all of `labels`, or None if none is active."""
    for alert in alerts:
        have = alert["labels"]
        if have["alertname"] == name and all(have.get(k, "") == v for k, v in labels.items()):
            return str(alert["state"])
    return None

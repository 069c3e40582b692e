"""``pairwatch.side`` as a user reads it: one scrape, both sides of one server, two values.

A wrapped WSGI app under waitress and an instrumented httpx client share one
``serve_metrics`` endpoint; the scrape shows every series twice, once per side, told apart by
``pairwatch_side`` alone (the label a dashboard row and the ``lost_in_transit`` rule select on).
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import httpx
from components import need
from prometheus_client.parser import text_string_to_metric_families
from server_apps import wsgi_app
from server_support import call, wait_until, waitress_server

import pairwatch
from pairwatch.otel.labels import Labels
from pairwatch.otel.names import SIDE, SIDES

ROOT = Path(__file__).resolve().parents[2]


def scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return [
        (s.name, dict(s.labels), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def test_one_scrape_holds_both_sides_of_one_server():
    need("waitress", "pip install -e '.[test]'")
    with pairwatch.serve_metrics(port=0) as metrics:
        app = pairwatch.PairwatchWSGIMiddleware(wsgi_app, meter_provider=metrics.meter_provider)
        with waitress_server(app) as base:
            client = pairwatch.instrument(httpx.Client(), meter_provider=metrics.meter_provider)
            try:
                body = json.dumps([call(0), call(1, "drop"), call(2)])
                client.post(base + "/", content=body)
            finally:
                client.close()

            def closed_on_both() -> bool:
                pairwatch.flush()
                sides = {
                    labels.get("pairwatch_side")
                    for name, labels, value in scrape(metrics.url)
                    if name == "batch_closed_total" and value
                }
                return sides == {"client", "server"}

            wait_until(closed_on_both, what="a closed batch on each side")
        samples = scrape(metrics.url)

    def total(name: str, side: str) -> float:
        return sum(v for n, labels, v in samples if n == name and labels["pairwatch_side"] == side)

    for side in SIDES:
        assert total("batch_requests_total", side) == 3
        assert total("batch_missing_response_total", side) == 1  # the app never answered 1
        assert total("batch_pair_latency_seconds_count", side) == 2
    names = {
        side: {n for n, labels, v in samples if labels.get("pairwatch_side") == side}
        for side in SIDES
    }
    assert names["client"] == names["server"]  # the same series names on both sides
    assert "batch_missing_response_total" in names["server"]
    # Both sides name the same server: a rule can set one against the other by host.
    hosts = {labels.get("server_address") for n, labels, v in samples if n.startswith("batch_")}
    assert hosts == {"127.0.0.1"}


def test_the_side_is_bounded_and_documented():
    assert Labels("http", "manual", None, side="anything").base[SIDE] == "client"
    assert Labels("http", "asgi", None, side="server").base[SIDE] == "server"
    docs = (ROOT / "docs/metrics.md").read_text(encoding="utf-8")
    row = re.search(r"^\| `pairwatch\.side` \| `pairwatch_side` \|(.*)$", docs, re.M)
    assert row is not None
    assert all(f"`{side}`" in row.group(1) for side in SIDES)

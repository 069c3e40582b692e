"""The row that sets the client's books of a server against the server's own books.

With a client integration on one end and pairwatch's ASGI/WSGI middleware on the other, every
counter exists twice per server (`pairwatch_side`). Missing at the client but not at the
server means the server answered and the reply was lost between them (network, proxy, a
dropped stream): `lost_in_transit`, recorded per server by the pairwatch-cross-side group of
rules/pairwatch-recording.yaml. Missing on both sides is the server's own doing.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import timeseries as ts_b
from panel_kit import query, timeseries
from promql import METHOD, R_MISSING, SIDE_BY, sel

ANCHOR = "lost-in-transit-client-against-server"


def missing_by_side(panel_id: int, runbook: str) -> ts_b.Panel:
    return timeseries(
        panel_id,
        "Missing responses per second: client side against server side",
        "One server's missing responses as its clients counted them (pairwatch_side="
        '"client") and as the server\'s own middleware did ("server"). Equal lines: the '
        "server left them unanswered. A client line above the server's: the server answered "
        "and the replies never reached the clients (lost in transit; the recorded series "
        "server_address:batch_lost_in_transit:increase5m is the gap). A client line alone: "
        "the server keeps no books of its own.",
        [
            query(
                f"sum by ({SIDE_BY}) ({R_MISSING}{sel(METHOD)})",
                "{{server_address}} {{pairwatch_side}}",
                "A",
            )
        ],
        unit="reqps",
        width=24,
        runbook=runbook,
        anchor=ANCHOR,
    )

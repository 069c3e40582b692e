"""An instrumented client, the chaos proxy, an instrumented server: where did a reply go?

The proxy drops one reply element on its way back.  The server's books show it answered
every request; the client's show one missing.  Set side by side (the ``pairwatch.side``
series, and per batch the in-process :class:`~pairwatch.server.Crosscheck`), the drop is
``lost_in_transit``; a request the server itself never answered stays ``responses_missing``
on both sides, the server's fault.
"""

from __future__ import annotations

import httpx
from otel_support import Otel
from server_apps import starlette_app
from server_support import call, uvicorn_server, wait_until

import pairwatch
from pairwatch.chaos import Fault
from pairwatch.pairing import diagnosis
from pairwatch.server import Crosscheck


def test_proxy_drops_are_client_missing_server_paired_and_lost_in_transit(otel: Otel, chaos):
    crosscheck = Crosscheck()
    app = pairwatch.PairwatchMiddleware(
        starlette_app(),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        on_batch_closed=crosscheck.server,
    )
    batches = [
        [call(0), call(1), call(2)],  # the proxy drops the reply to id 0
        [call(10), call(11)],  # clean
        [call(20), call(21, "drop")],  # the server never answers 21
        [call(30), call(31), call(32), call(33)],  # the proxy drops the replies to 31 and 33
    ]
    with uvicorn_server(app) as base:
        proxy = chaos(
            [Fault("drop", indices=(0,)), [], [], Fault("drop", indices=(1, 3))],
            upstream=base + "/",
        )
        with httpx.Client(timeout=5) as client:
            pairwatch.instrument(
                client,
                meter_provider=otel.meter_provider,
                tracer_provider=otel.tracer_provider,
                on_batch_closed=crosscheck.client,
                propagate=True,
            )
            replies = [client.post(proxy.url, json=b).json() for b in batches]
        wait_until(lambda: len(crosscheck.verdicts) == 4, what="four joined batches")
    assert [[r["id"] for r in reply] for reply in replies] == [[1, 2], [10, 11], [20], [30, 32]]
    assert [i.kind for i in proxy.injected] == ["drop", "drop"]

    def side(name: str, which: str) -> int:
        return otel.value(name, pairwatch__side=which)

    assert side("batch.requests", "client") == side("batch.requests", "server") == 11
    assert side("batch.missing_response", "client") == 1 + 1 + 2  # drops + 21
    assert side("batch.missing_response", "server") == 1  # 21 only
    assert otel.hist("batch.pair_latency", pairwatch__side="client")[0] == 11 - 4
    assert otel.hist("batch.pair_latency", pairwatch__side="server")[0] == 11 - 1
    assert side("batch.unknown_id_response", "client") == 0

    verdicts = sorted(crosscheck.verdicts, key=lambda v: v.client.keys[0])
    assert [v.diagnosis for v in verdicts] == [
        diagnosis.LOST_IN_TRANSIT,
        diagnosis.OK,
        diagnosis.RESPONSES_MISSING,
        diagnosis.LOST_IN_TRANSIT,
    ]
    assert [v.client.diagnosis for v in verdicts] == [diagnosis.RESPONSES_MISSING] * 1 + [
        diagnosis.OK,
        diagnosis.RESPONSES_MISSING,
        diagnosis.RESPONSES_MISSING,
    ]
    assert verdicts[0].words == (
        "1 request of 3 closed without a reply at the client (body_end) although the server "
        "answered it (0)"
    )
    assert verdicts[2].words == "1 request went unanswered on both sides (21)"
    assert verdicts[3].words == (
        "2 requests of 4 closed without a reply at the client (body_end) although the server "
        "answered them (31, 33)"
    )
    assert crosscheck.waiting("client") == crosscheck.waiting("server") == 0

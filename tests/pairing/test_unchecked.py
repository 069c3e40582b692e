"""Unchecked is not missing: an exchange pairwatch could not read counts neither as answered
nor as missing, blames nobody, and its spans carry no error."""

from __future__ import annotations

import json

from opentelemetry.trace import StatusCode
from otel_support import Otel

import pairwatch


def req(i: int, method: str = "m") -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": i, "method": method}


def test_the_pending_requests_of_an_unchecked_exchange_are_unchecked(otel: Otel):
    channel = pairwatch.open_channel(
        bound=True, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    channel.sent(json.dumps([req(1, "a"), req(2, "b"), req(3, "b")]))
    channel.received(json.dumps([{"jsonrpc": "2.0", "id": 1, "result": 1}]))  # an SSE event
    channel.unchecked("body_cap")
    channel.close("stream_end")  # nothing left to close
    pairwatch.flush()
    assert otel.counters() == {
        "batch.requests": 3,
        "batch.closed": 1,
        "batch.unchecked_request": 2,
    }
    assert otel.value("batch.unchecked_request", pairwatch__reason="body_cap") == 2
    closed = otel.value(
        "batch.closed", pairwatch__diagnosis="ok", pairwatch__close_reason="unchecked"
    )
    assert closed == 1
    assert otel.hist("batch.pair_latency")[0] == 1
    spans = {s.name: s for s in otel.spans()}
    children = [s for s in otel.spans() if s.name != "jsonrpc batch"]
    assert sorted(s.attributes.get("pairwatch.outcome", "paired") for s in children) == [
        "paired",
        "unchecked",
        "unchecked",
    ]
    assert all(s.status.status_code is not StatusCode.ERROR for s in children)
    assert spans["jsonrpc batch"].attributes["pairwatch.missing"] == 0


def test_an_unchecked_close_leaves_later_exchanges_counted_as_usual(otel: Otel):
    channel = pairwatch.open_channel(
        meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    channel.sent(json.dumps(req(1)))
    channel.unchecked("body_budget")
    other = pairwatch.open_channel(
        meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    other.sent(json.dumps(req(1)))
    other.close("stream_end")
    pairwatch.flush()
    assert otel.value("batch.unchecked_request", pairwatch__reason="body_budget") == 1
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_end") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="responses_missing") == 1

"""Exchanges to one address share their sink; an event stream's relabel stays its own.

The sink of an HTTP exchange is built once per (options, integration, address) and shared
by every exchange made with them.  An exchange whose reply turns out to be an event stream
relabels its channel ``sse``: that must not relabel the exchanges before or after it, which
are plain ``http``.
"""

from __future__ import annotations

import json

import httpx
from http_drivers import SCRIPTS

import pairwatch

REQUEST = json.dumps(
    [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0", "id": 2, "method": "b"}]
).encode()
REPLY = b'[{"jsonrpc":"2.0","id":1,"result":"A"},{"jsonrpc":"2.0","id":2,"result":"B"}]'
EVENTS = (
    b'data: {"jsonrpc":"2.0","id":1,"result":"A"}\n\n'
    b'data: {"jsonrpc":"2.0","id":2,"result":"B"}\n\n'
)


def test_an_event_stream_relabels_only_its_own_exchange(otel, scripted):
    SCRIPTS["/shared-json"] = (200, {"Content-Type": "application/json"}, [REPLY], False)
    SCRIPTS["/shared-sse"] = (200, {"Content-Type": "text/event-stream"}, [EVENTS], False)
    client = pairwatch.instrument(
        httpx.Client(timeout=5),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
    )
    with client:
        for path in ("/shared-json", "/shared-sse", "/shared-json", "/shared-sse"):
            with client.stream("POST", scripted + path, content=REQUEST) as r:
                assert b"".join(r.iter_bytes()) == (EVENTS if "sse" in path else REPLY)
        assert client.post(scripted + "/shared-json", content=REQUEST).content == REPLY
    assert otel.counters() == {"batch.requests": 10, "batch.closed": 5}
    assert otel.value("batch.closed", pairwatch__transport="http") == 3
    assert otel.value("batch.closed", pairwatch__transport="sse") == 2
    sse_ended = {"pairwatch__transport": "sse", "pairwatch__close_reason": "stream_end"}
    assert otel.value("batch.closed", **sse_ended) == 2
    assert otel.hist("batch.pair_latency", pairwatch__transport="http")[0] == 6
    assert otel.hist("batch.pair_latency", pairwatch__transport="sse")[0] == 4

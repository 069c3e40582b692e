"""Replies on another channel: the legacy SSE transport, with every client instrumented.

The legacy transport POSTs each message and gets ``202 Accepted``; the reply comes on the
SSE stream.  With the global instrumentor on (httpx2 wrapped class-wide, every
``ClientSession`` instrumented as it is made), the POSTs belong to the session: the HTTP
integration must not count a 202 as a missing reply and ``Accepted`` as an unparseable one
(users saw 386 missing and 570 unparseable over the SDK's SSE tests).  A reply the server
really drops from the stream still counts as missing, at the session, although its POST
got its 202.
"""

from __future__ import annotations

from collections.abc import Iterator

import mcp.client.sse as sdk_sse
import mcp.client.stdio as sdk_stdio
import pytest
import wrapt
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError
from mcp_support import sampling, sdk_http, text
from otel_support import Otel

from pairwatch.instrumentor import PairwatchInstrumentor
from pairwatch.integrations.mcp import raw as mcp_raw

pytestmark = pytest.mark.timeout(60)

M = "batch.missing_response"


@pytest.fixture
def everything(otel: Otel) -> Iterator[Otel]:
    instrumentor = PairwatchInstrumentor()
    instrumentor.instrument(
        meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    try:
        yield otel
    finally:
        instrumentor.uninstrument()
    # Sessions the instrumentor instrumented let go of the SDK once their streams ended.
    assert not isinstance(sdk_stdio._parse_line, wrapt.ObjectProxy)
    assert not isinstance(sdk_sse.types, mcp_raw._TypesTap)


def integrations(otel: Otel) -> set[tuple[str, str]]:
    return {
        (a["pairwatch.integration"], a["pairwatch.transport"]) for a in otel.attrs("batch.requests")
    }


async def test_sse_transport_posts_acknowledged_202_pair_at_the_session(everything: Otel):
    with sdk_http("sse") as url:
        async with sse_client(url) as (r, w), ClientSession(r, w, sampling_callback=sampling) as s:
            await s.initialize()
            assert text(await s.call_tool("add", {"a": 2, "b": 3})) == "5"
            assert text(await s.call_tool("ask_llm", {"prompt": "hi"})) == "sampled"
    counters = everything.counters()
    # initialize, tools/list, add, ask_llm: each POST got a 202, each reply came on the stream
    assert counters["batch.requests"] == everything.hist("batch.pair_latency")[0] == 4
    assert integrations(everything) == {("mcp", "sse")}  # no HTTP-level books for the POSTs
    for name in (M, "batch.invalid_response", "batch.unknown_id_response"):
        assert counters.get(name, 0) == 0, name


async def test_a_reply_dropped_from_the_sse_stream_is_missing_at_the_session(everything: Otel):
    with sdk_http("sse-drop") as url:
        async with sse_client(url) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            with pytest.raises(MCPError) as caught:
                await s.call_tool("dropped", {}, read_timeout_seconds=1.0)
            assert text(await s.call_tool("add", {"a": 1, "b": 1})) == "2"
    assert caught.value.error.code == -32001  # the SDK's own read timeout
    counters = everything.counters()
    assert counters["batch.requests"] == 4  # initialize, tools/list, dropped, add
    assert everything.hist("batch.pair_latency")[0] == 3
    assert counters[M] == everything.value(M, pairwatch__close_reason="timeout") == 1
    assert {a["pairwatch.integration"] for a in everything.attrs(M)} == {"mcp"}
    assert integrations(everything) == {("mcp", "sse")}
    for name in ("batch.invalid_response", "batch.unknown_id_response"):
        assert counters.get(name, 0) == 0, name

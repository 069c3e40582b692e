"""Faults injected by the pairwatch.chaos HTTP proxy in front of the real SDK server.

The upstream is the SDK server with JSON replies in stateless mode (the proxy forwards bodies,
not MCP session headers).  The proxy answers the client with a JSON body, or with one SSE
event per response (``?sse=1``), which is where the SDK rewrites ids.  Each fault hits the
third exchange (initialize, ``notifications/initialized``, then ``tools/call add``); sessions
run concurrently, each with its own in-memory reader.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import sdk_http, text
from otel_support import Otel

import pairwatch
from pairwatch.chaos import ChaosServer, Fault, FaultScript
from pairwatch.instrumentor import PairwatchInstrumentor

pytestmark = pytest.mark.timeout(60)

U, N, M, I = (  # noqa: E741 - short names keep the table readable
    "batch.unknown_id_response",
    "batch.null_id_response",
    "batch.missing_response",
    "batch.invalid_response",
)

# (fault, reply mode) -> (what the caller sees, counters that moved, missing close reason)
EXPECTED: dict[tuple[str, str], tuple[object, dict[str, int], str | None]] = {
    # JSON body, id never sent: the SDK does not rewrite it, drops it and times out
    ("wrong_id", "json"): (-32001, {U: 1, M: 1}, "timeout"),
    # SSE event, id never sent: the SDK rewrites it to the POST's id and the caller gets it
    ("wrong_id", "sse"): ("5", {U: 1, M: 1}, "body_end"),
    # "2" for 2 on SSE: rewritten, paired by the SDK; another id by JSON identity
    ("id_type", "sse"): ("5", {U: 1, M: 1}, "body_end"),
    # null-id result: the SDK cannot parse it and answers the caller with -32700 itself
    ("null_id", "json"): (-32700, {N: 1, M: 1}, "body_end"),
    ("null_id", "sse"): (-32700, {N: 1, M: 1}, "body_end"),
    # garbage body: invalid, the request gets no reply
    ("unparseable", "json"): (-32700, {I: 1, M: 1}, "body_end"),
    # no reply at all (202): the SDK synthesizes an error, pairwatch counts it missing
    ("drop", "json"): (-32600, {M: 1}, "body_end"),
    ("drop", "sse"): (-32600, {M: 1}, "body_end"),
    # half an SSE event, then the connection closes
    ("cut", "sse"): (-32000, {M: 1}, "stream_dropped"),  # a chunked body cut mid-event: broke
    # jsonrpc "1.0": pairs by id and is invalid; the SDK refuses it (-32700)
    ("bad_version", "sse"): (-32700, {I: 1}, None),
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    with sdk_http("json", "stateless") as url:
        yield url


async def run_fault(url: str, otel: Otel, key: tuple[str, str], seen: dict) -> None:
    async with (
        streamable_http_client(url) as (r, w),
        ClientSession(r, w, read_timeout_seconds=10) as s,
    ):
        pairwatch.instrument(
            s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )
        await s.initialize()
        try:
            seen[key] = text(await s.call_tool("add", {"a": 2, "b": 3}, read_timeout_seconds=1))
        except MCPError as exc:
            seen[key] = exc.error.code
        pairwatch.uninstrument(s)


async def test_each_http_fault_is_counted_exactly(upstream):
    await each_fault_counted_exactly(upstream)


async def test_each_http_fault_is_counted_once_with_every_client_instrumented(upstream):
    """The global instrumentor on as well (httpx2 wrapped class-wide): the transport's
    exchanges are the session's, so the HTTP integration counts none of them."""
    http_level = Otel()
    instrumentor = PairwatchInstrumentor()
    instrumentor.instrument(
        meter_provider=http_level.meter_provider, tracer_provider=http_level.tracer_provider
    )
    try:
        await each_fault_counted_exactly(upstream)
    finally:
        instrumentor.uninstrument()
    assert http_level.counters(zeros=True) == {}


async def each_fault_counted_exactly(upstream: str) -> None:
    otels = {key: Otel() for key in EXPECTED}
    seen: dict[tuple[str, str], object] = {}
    proxies = []
    try:
        async with anyio.create_task_group() as tg:
            for key, otel in otels.items():
                fault, mode = key
                plan = FaultScript([None, None, [Fault(fault)]])
                proxy = ChaosServer(plan, upstream=upstream, empty_status=202)
                proxy.__enter__()
                proxies.append(proxy)
                url = proxy.url + ("?sse=1" if mode == "sse" else "?sse=0")
                tg.start_soon(run_fault, url, otel, key, seen)
    finally:
        for proxy in proxies:
            proxy.__exit__(None, None, None)
    observed = {}
    for key, otel in otels.items():
        counters = otel.counters()
        moved = {name: counters[name] for name in (U, N, M, I) if counters.get(name)}
        reasons = {a["pairwatch.close_reason"] for a in otel.attrs(M)}
        observed[key] = (seen.get(key), moved, reasons.pop() if reasons else None)
    assert observed == EXPECTED
    for proxy in proxies:  # every fault took effect exactly once
        assert sum(proxy.counts.values()) == 1

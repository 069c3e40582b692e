"""MCP 2026-07-28 sessions: a subscription the caller ends is withdrawn, never missing.

``Client(url)`` against the SDK's own ``MCPServer`` over streamable HTTP negotiates
2026-07-28 (``server/discover``).  A ``subscriptions/listen`` request is never answered: its
caller ends it (the SDK cancels the request), which is ``batch.withdrawn_request`` with
reason ``subscription_ended``.  The session around it pairs every call, and nothing counts
as missing, as a count mismatch or as an unknown id.
"""

from __future__ import annotations

import pytest
from mcp import Client
from mcp_support import FAULTS, sdk_http, sdk_target, targets, text
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)


async def one_subscription_around_a_call(url: str, otel: Otel | None) -> list[str]:
    seen: list[str] = []
    async with Client(url) as client:
        if otel is not None:
            pairwatch.instrument(
                client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
        async with client.listen(tools_list_changed=True):
            seen.append(text(await client.call_tool("add", {"a": 1, "b": 2})))
        for i in range(4):
            seen.append(text(await client.call_tool("add", {"a": i, "b": i})))
        if otel is not None:
            pairwatch.uninstrument(client)
    return seen


@pytest.mark.parametrize("mode", [(), ("json",)], ids=["sse", "json"])
async def test_a_subscription_the_caller_ends_is_withdrawn(mode: tuple[str, ...]):
    with sdk_http(*mode) as url:
        expected = await one_subscription_around_a_call(url, None)
        otel = Otel()
        assert await one_subscription_around_a_call(url, otel) == expected
    counters = otel.counters()
    paired = otel.hist("batch.pair_latency")[0]
    assert counters["batch.withdrawn_request"] == 1
    assert otel.value("batch.withdrawn_request", pairwatch__reason="subscription_ended") == 1
    assert counters["batch.requests"] == paired + 1
    for name in FAULTS:
        assert counters.get(name, 0) == 0, name
    assert {a["pairwatch.diagnosis"] for a in otel.attrs("batch.closed")} == {"ok"}
    methods = {a.get("rpc.method") for a in otel.attrs("batch.pair_latency")}
    assert "tools/call" in methods


@pytest.mark.parametrize(("kind", "mode"), targets())
async def test_every_transport_and_mode_pairs_concurrent_calls_and_a_cancel(kind: str, mode: str):
    """Five concurrent calls, one call the caller cancels, one more call; modern (auto
    negotiates 2026-07-28) and legacy (2025-11-25), over stdio, in-process and streamable
    HTTP (SSE replies, JSON replies, stateless): nothing is missing or unknown, the cancel is
    withdrawn, and every span carries the MCP conventions' attributes."""
    import anyio
    from opentelemetry.semconv._incubating.attributes import (
        gen_ai_attributes as gen_ai,
    )
    from opentelemetry.semconv._incubating.attributes import (
        mcp_attributes as mcp_attrs,
    )

    async def run(target: object) -> tuple[str | None, Otel]:
        otel = Otel()
        async with Client(target, mode=mode) as client:
            pairwatch.instrument(
                client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
            async with anyio.create_task_group() as tg:
                for i in range(5):
                    tg.start_soon(client.call_tool, "add", {"a": i, "b": 1})
            with anyio.move_on_after(0.3):
                await client.call_tool("slow", {"seconds": 10})
            assert text(await client.call_tool("add", {"a": 9, "b": 9})) == "18"
            version = getattr(client.session, "protocol_version", None)
            pairwatch.uninstrument(client)
        return version, otel

    with sdk_target(kind) as target:
        version, otel = await run(target)
    assert version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
    counters = otel.counters()
    assert counters["batch.withdrawn_request"] == 1
    assert counters["batch.requests"] == otel.hist("batch.pair_latency")[0] + 1
    for name in FAULTS:
        assert counters.get(name, 0) == 0, name
    calls = [s for s in otel.spans() if (s.attributes or {}).get("rpc.method") == "tools/call"]
    assert len(calls) == 7
    for span in calls:
        attrs = span.attributes or {}
        assert attrs[mcp_attrs.MCP_METHOD_NAME] == "tools/call"
        assert attrs[gen_ai.GEN_AI_TOOL_NAME] in ("add", "slow")
        assert attrs[gen_ai.GEN_AI_OPERATION_NAME] == "execute_tool"
        if kind != "memory" or mode == "legacy":  # in-process modern: no negotiated session
            assert attrs[mcp_attrs.MCP_PROTOCOL_VERSION] == version


async def test_the_version_probe_a_legacy_server_refuses_is_answered():
    """``Client(url)`` probes with ``server/discover``; server-everything (another SDK, which
    predates 2026-07-28) refuses it with HTTP 400 and id null, and the SDK falls back to
    ``initialize``.  With every session instrumented from its start (the instrumentor), the
    refusal pairs with the probe: no null-id reply, no missing probe, on every connect."""
    from components import require
    from mcp_support import INSTALL, everything_http, node_available

    from pairwatch.instrumentor import PairwatchInstrumentor

    require(node_available(), "node and @modelcontextprotocol/server-everything", INSTALL)
    otel = Otel()
    instrumentor = PairwatchInstrumentor()
    instrumentor.instrument(
        meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    try:
        with everything_http() as url:
            for _ in range(2):  # two connects, two probes
                async with Client(url) as client:
                    assert client.session.protocol_version == "2025-11-25"
                    await client.call_tool("echo", {"message": "x"})
    finally:
        instrumentor.uninstrument()
    counters = otel.counters()
    assert counters["batch.requests"] == otel.hist("batch.pair_latency")[0]
    discover = [a for a in otel.attrs("batch.pair_latency") if a["rpc.method"] == "server/discover"]
    assert len(discover) == 1  # one series, two observations
    assert otel.hist("batch.pair_latency", rpc__method="server/discover")[0] == 2
    for name in FAULTS:
        assert counters.get(name, 0) == 0, name
    assert {a["pairwatch.diagnosis"] for a in otel.attrs("batch.closed")} == {"ok"}


@pytest.mark.parametrize("mode", [(), ("json",)], ids=["sse", "json"])
async def test_a_multi_round_trip_call_is_two_answered_requests(mode: tuple[str, ...]):
    """The first request is answered by its ``input_required`` result; the retry is a new
    request, with a new id, answered by the final result: two requests, two paired."""
    with sdk_http(*mode) as url:
        otel = Otel()
        async with Client(url) as client:
            pairwatch.instrument(
                client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
            assert text(await client.call_tool("two_rounds", {})) == "done in two"
            pairwatch.uninstrument(client)
    counters = otel.counters()
    calls = otel.hist("batch.pair_latency", rpc__method="tools/call")[0]
    assert calls == 2
    assert counters["batch.requests"] == otel.hist("batch.pair_latency")[0]
    for name in FAULTS:
        assert counters.get(name, 0) == 0, name


@pytest.mark.parametrize(("kind", "mode"), [("stdio", "auto"), ("http-sse", "legacy")])
async def test_an_id_used_again_after_its_reply_is_a_new_request(kind: str, mode: str):
    """2026-07-28: ids are unique only among requests in flight.  A caller-supplied id used
    again once its reply came (the SDK's ``request_id`` call option) is a new request that
    pairs, never a duplicate.  (Over HTTP the modern session also stamps headers that the
    dispatcher's option skips; legacy HTTP shows the same rule on that wire.)"""
    otel = Otel()
    envelope = {  # what the session stamps on a 2026-07-28 request
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": envelope}
    with sdk_target(kind) as target:
        async with Client(target, mode=mode) as client:
            pairwatch.instrument(
                client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
            for request_id in ("job-1", "job-1", 7, 7, "job-1"):
                # the SDK's request_id call option, which its dispatcher takes
                result = await client.session._dispatcher.send_raw_request(
                    "tools/call", params, {"request_id": request_id}
                )
                assert result["content"][0]["text"] == "3"
            pairwatch.uninstrument(client)
    counters = otel.counters()
    assert counters["batch.requests"] == otel.hist("batch.pair_latency")[0] == 5
    for name in FAULTS:
        assert counters.get(name, 0) == 0, name
    assert counters.get("batch.duplicate_id", 0) == 0
    ids = sorted(
        str(s.attributes["jsonrpc.request.id"]) for s in otel.spans() if s.parent is not None
    )
    assert ids == ["7", "7", "job-1", "job-1", "job-1"]

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
from mcp_support import sdk_http, text
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
    for name in (
        "batch.missing_response",
        "batch.response_count_mismatch",
        "batch.unknown_id_response",
        "batch.null_id_response",
    ):
        assert counters.get(name, 0) == 0, name
    assert {a["pairwatch.diagnosis"] for a in otel.attrs("batch.closed")} == {"ok"}
    methods = {a.get("rpc.method") for a in otel.attrs("batch.pair_latency")}
    assert "tools/call" in methods

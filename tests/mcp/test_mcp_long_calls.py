"""A tool call that takes a minute is neither missing nor late.

pairwatch keeps no clock of its own for an MCP session: a request stays open for as long as
the SDK waits for it (the session's ``read_timeout_seconds``, the call's own, or, with
neither, until the stream ends).  The test moves pairwatch's clock by hand (``clock=``) by
60 s while a real stdio server works on the call, and makes another request meanwhile, which
expires whatever pairwatch would have timed out (its default is 30 s; the session's own
timeout here is 10 s): with the SDK's clock followed, nothing is.
"""

from __future__ import annotations

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_support import sdk_stdio_command, text
from otel_support import FakeClock, Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("session_timeout", "call_timeout"),
    [(None, None), (10.0, 120.0)],
    ids=["no-timeout-waits-for-stream-end", "per-call-timeout-overrides-session"],
)
async def test_a_sixty_second_call_is_paired(session_timeout, call_timeout):
    otel, clock = Otel(), FakeClock()
    started = anyio.Event()

    async def logged(params: object) -> None:
        started.set()

    command, args = sdk_stdio_command()
    results: list[str] = []
    async with (
        stdio_client(StdioServerParameters(command=command, args=args)) as (r, w),
        ClientSession(r, w, read_timeout_seconds=session_timeout, logging_callback=logged) as s,
    ):
        pairwatch.instrument(
            s,
            meter_provider=otel.meter_provider,
            tracer_provider=otel.tracer_provider,
            clock=clock,
        )
        await s.initialize()

        async def long_call() -> None:
            result = await s.call_tool(
                "long_call", {"seconds": 1.0}, read_timeout_seconds=call_timeout
            )
            results.append(text(result))

        async with anyio.create_task_group() as tg:
            tg.start_soon(long_call)
            with anyio.fail_after(20):
                await started.wait()
            clock.advance(60.0)  # a minute passes for pairwatch while the server works
            results.append(text(await s.call_tool("add", {"a": 1, "b": 1})))
        pairwatch.uninstrument(s)
    assert results == ["2", "finished"]
    counters = otel.counters()
    # initialize, tools/list (the SDK learns output schemas once), long_call, add
    assert counters["batch.requests"] == otel.hist("batch.pair_latency")[0] == 4
    for name in ("batch.missing_response", "batch.unknown_id_response", "batch.late_response"):
        assert counters.get(name, 0) == 0, name
    # the long call's latency is the minute pairwatch's clock saw
    assert otel.hist("batch.pair_latency", rpc__method="tools/call")[1] >= 60.0

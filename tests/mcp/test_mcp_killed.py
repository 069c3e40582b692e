"""A server killed mid-call, over every wire the SDK's own server speaks, in both modes.

After one answered call, four calls are in flight when the server process dies (SIGKILL).
Over stdio the SDK sees the stream end and pairwatch reads the exit status; over streamable
HTTP the SDK either resolves the request with the error it gives a stream that ended, or
cancels the calls in flight and tells the (dead) server so.  Neither is the caller's doing:
all four are missing with ``stream_dropped``, none withdrawn.  The caller then re-issues the
same calls in a new session (new ids, as 2026-07-28 says a client does after a broken
stream): they pair.
"""

from __future__ import annotations

import anyio
import pytest
from mcp import Client
from mcp_support import FAULTS, KINDS, sdk_target, text
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)

WIRES = [(kind, mode) for kind in KINDS if kind != "memory" for mode in ("auto", "legacy")]


async def calls_in_flight_when_killed(target: object, mode: str, otel: Otel) -> int:
    """Three slow calls and the call that kills the server; how many raised to the caller."""
    raised = 0

    async def call(name: str, args: dict[str, float]) -> None:
        nonlocal raised
        try:
            await client.call_tool(name, args)
        except Exception:  # the SDK's error for a lost request
            raised += 1

    try:
        async with Client(target, mode=mode, read_timeout_seconds=20) as client:
            pairwatch.instrument(
                client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
            try:  # over HTTP the SDK cancels this body when its connection breaks
                # stdio: a line read since instrument() names the server process, whose exit
                # status tells a kill from an orderly end
                assert text(await client.call_tool("add", {"a": 1, "b": 1})) == "2"
                with anyio.move_on_after(15):
                    async with anyio.create_task_group() as tg:
                        for _ in range(3):
                            tg.start_soon(call, "slow", {"seconds": 30.0})
                        await anyio.sleep(0.3)
                        tg.start_soon(call, "crash_now", {})
                await anyio.sleep(0.2)  # stdio: the exit status reaches the loop a moment later
            finally:
                pairwatch.uninstrument(client)
    except Exception as exc:  # over HTTP the SDK's transport task ends the session with it
        ended = exc
    else:
        ended = None
    assert ended is None or "RemoteProtocolError" in repr(ended), repr(ended)
    return raised


@pytest.mark.parametrize(("kind", "mode"), WIRES)
async def test_a_killed_server_drops_what_is_in_flight(kind: str, mode: str) -> None:
    killed = Otel()
    with sdk_target(kind) as target:
        await calls_in_flight_when_killed(target, mode, killed)
    counters = killed.counters()
    answered = killed.hist("batch.pair_latency")[0]  # add, and the SDK's tools/list
    assert counters["batch.requests"] == answered + 4
    assert counters["batch.missing_response"] == 4
    reasons = [a["pairwatch.close_reason"] for a in killed.attrs("batch.missing_response")]
    assert reasons == ["stream_dropped"]
    assert counters.get("batch.withdrawn_request", 0) == 0
    assert counters.get("batch.unknown_id_response", 0) == 0
    assert counters.get("batch.null_id_response", 0) == 0

    again = Otel()  # the caller re-issues the lost calls in a new session: new ids, answered
    with sdk_target(kind) as target:
        async with Client(target, mode=mode) as client:
            pairwatch.instrument(
                client, meter_provider=again.meter_provider, tracer_provider=again.tracer_provider
            )
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(client.call_tool, "slow", {"seconds": 0.1})
            assert text(await client.call_tool("add", {"a": 2, "b": 2})) == "4"
            pairwatch.uninstrument(client)
    counters = again.counters()
    assert counters["batch.requests"] == again.hist("batch.pair_latency")[0] >= 4
    for name in FAULTS:
        assert counters.get(name, 0) == 0, name

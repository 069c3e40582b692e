"""Faults injected by ``python -m pairwatch.chaos stdio-proxy`` in front of the real SDK server.

Each fault hits the reply to one ``tools/call add`` (the script's third turn: the initialize
reply and the ``notifications/initialized`` notification take the first two).  The sessions
run concurrently, each with its own in-memory reader, so the exact counts per fault are
read in a few seconds.
"""

from __future__ import annotations

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from mcp_support import chaos_stdio_command, text
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)

# fault -> (what the caller sees, the counters that moved, missing close reason)
EXPECTED: dict[str, tuple[object, dict[str, int], str | None]] = {
    # no reply: the SDK's read timeout fires, pairwatch closes the request with it
    "drop": (-32001, {"batch.missing_response": 1}, "timeout"),
    # an id never sent: the SDK drops it silently and times out
    "wrong_id": (-32001, {"batch.unknown_id_response": 1, "batch.missing_response": 1}, "timeout"),
    # id null: the SDK cannot parse a null-id result at all
    "null_id": (-32001, {"batch.null_id_response": 1, "batch.missing_response": 1}, "timeout"),
    # "2" for 2: the SDK coerces and pairs; by JSON identity it is another id
    "id_type": (
        "5",
        {"batch.unknown_id_response": 1, "batch.missing_response": 1},
        "client_resolved",
    ),
    # result and error both: pairs, invalid; the SDK takes it as an error
    "both_result_error": (-32603, {"batch.invalid_response": 1}, None),
    # jsonrpc "1.0": pairs by id, invalid; the SDK refuses it and times out
    "bad_version": (-32001, {"batch.invalid_response": 1}, None),
    # not JSON: invalid, and the request never gets its reply
    "unparseable:data=garbage": (
        -32001,
        {"batch.invalid_response": 1, "batch.missing_response": 1},
        "timeout",
    ),
    # half a line, then stdout closes and the proxy exits with a failing status (its upstream
    # server's, killed): a server process that failed with the request pending dropped it
    "cut": (-32000, {"batch.missing_response": 1}, "stream_dropped"),
}
WATCHED = (
    "batch.unknown_id_response",
    "batch.null_id_response",
    "batch.missing_response",
    "batch.invalid_response",
)


async def run_fault(fault: str, otel: Otel, seen: dict[str, object]) -> None:
    command, args = chaos_stdio_command(script=f"-;-;{fault}")
    params = StdioServerParameters(command=command, args=args)
    async with stdio_client(params) as (r, w), ClientSession(r, w, read_timeout_seconds=15) as s:
        pairwatch.instrument(
            s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )
        await s.initialize()
        try:
            seen[fault] = text(await s.call_tool("add", {"a": 2, "b": 3}, read_timeout_seconds=1.0))
        except MCPError as exc:
            seen[fault] = exc.error.code
        # A server process's exit status reaches the event loop a moment after its stdout
        # closes: give it that moment, as a program that goes on running does.
        await anyio.sleep(0.3)
        pairwatch.uninstrument(s)


async def test_each_stdio_fault_is_counted_exactly():
    otels = {fault: Otel() for fault in EXPECTED}
    seen: dict[str, object] = {}
    async with anyio.create_task_group() as tg:
        for fault, otel in otels.items():
            tg.start_soon(run_fault, fault, otel, seen)
    observed = {}
    for fault, otel in otels.items():
        counters = otel.counters()
        moved = {name: counters[name] for name in WATCHED if counters.get(name)}
        reasons = {a["pairwatch.close_reason"] for a in otel.attrs("batch.missing_response")}
        observed[fault] = (seen.get(fault), moved, reasons.pop() if reasons else None)
        # initialize and add, always; the SDK's tools/list only after a successful call
        assert counters["batch.requests"] == (3 if isinstance(seen.get(fault), str) else 2)
    assert observed == EXPECTED

"""200 asyncio tasks sharing one MCP session, behind a fault-injecting stdio proxy.

Which reply a cycling fault script hits depends on arrival order under concurrency, so the
expected counts come from the proxy's own record of what it injected (an independent
component), and every caller that got an answer must have got its own.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest
from components import need
from otel_support import Otel

need("mcp", "pip install 'pairwatch[mcp]' (scripts/bootstrap.sh does)")
# Imported only once mcp is known to be there (so its absence skips, or fails in CI).

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

import pairwatch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mcp"))
from mcp_support import SDK_SERVER, text  # noqa: E402

pytestmark = pytest.mark.timeout(90)

TASKS = 200
SCRIPT = "-;-;-;-;-;-;drop;-;wrong_id;-;-;null_id"


async def test_200_tasks_on_one_session_count_exactly(tmp_path):
    otel = Otel()
    record = tmp_path / "injected.jsonl"
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "pairwatch.chaos",
            "stdio-proxy",
            f"--script={SCRIPT}",
            "--cycle",
            "--record",
            str(record),
            "--",
            sys.executable,
            SDK_SERVER,
        ],
    )
    results: dict[int, object] = {}
    async with stdio_client(params) as (r, w), ClientSession(r, w, read_timeout_seconds=15) as s:
        pairwatch.instrument(
            s, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )
        await s.initialize()

        async def call(i: int) -> None:
            # The per-call timeout only has to outlast a healthy reply on a loaded machine
            # (a healthy reply that times out would count missing beyond the injections).
            try:
                reply = await s.call_tool("add", {"a": i, "b": 1000}, read_timeout_seconds=6)
                results[i] = text(reply)
            except MCPError as exc:
                results[i] = exc.error.code

        async with anyio.create_task_group() as tg:
            for i in range(TASKS):
                tg.start_soon(call, i)
        pairwatch.uninstrument(s)

    injected = Counter(json.loads(line)["kind"] for line in record.read_text().splitlines())
    assert injected["drop"] > 0
    assert injected["wrong_id"] > 0
    assert injected["null_id"] > 0
    counters = otel.counters()
    # Each dropped, re-addressed or nulled reply leaves exactly one request unanswered.
    assert counters.get("batch.missing_response", 0) == (
        injected["drop"] + injected["wrong_id"] + injected["null_id"]
    )
    assert counters.get("batch.unknown_id_response", 0) == injected["wrong_id"]
    assert counters.get("batch.null_id_response", 0) == injected["null_id"]
    assert counters.get("batch.duplicate_id", 0) == 0
    # The books balance: every request was paired or declared missing, once.
    paired = otel.hist("batch.pair_latency")[0]
    assert paired + counters["batch.missing_response"] == counters["batch.requests"]
    # No cross-talk: a caller that got an answer got its own; the others timed out.
    answered = {i: v for i, v in results.items() if isinstance(v, str)}
    assert answered == {i: str(i + 1000) for i in answered}
    assert Counter(v for v in results.values() if not isinstance(v, str)) == {
        -32001: TASKS - len(answered)
    }

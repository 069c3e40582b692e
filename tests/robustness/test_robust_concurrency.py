"""Concurrency: shared clients under threads and asyncio tasks, exact books, no deadlock.

The chaos server cycles through five deterministic fault steps (``FaultScript(cycle=True)``,
one step per exchange in arrival order); every run makes a multiple of five exchanges, so
the totals are exact whatever order the exchanges arrive in.  Each request echoes a
parameter unique to its caller, so a caller that got another caller's result would show,
and per-diagnosis batch counts show any cross-talk between exchanges' channels.
"""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
import httpx
import pytest
import requests
from robust_support import settle

import pairwatch
from pairwatch.chaos import Fault, FaultScript

pytestmark = pytest.mark.timeout(60)

STEPS = [
    [Fault("drop", indices=[0])],  # missing 1, count mismatch
    [Fault("duplicate", indices=[1])],  # unknown 1, count mismatch
    [Fault("wrong_id", indices=[2])],  # unknown 1 + missing 1
    [Fault("reorder")],  # out of order
    None,
]
HEADERS = {"Content-Type": "application/json"}


def body(caller: int, n: int) -> tuple[bytes, set[str]]:
    params = {f"c{caller}-{n}-{i}" for i in range(4)}
    batch = [
        {"jsonrpc": "2.0", "id": i, "method": "echo", "params": [f"c{caller}-{n}-{i}"]}
        for i in range(4)
    ]
    return json.dumps(batch).encode(), params


def own_results(reply: bytes, params: set[str]) -> bool:
    """Every result in the reply is one of this caller's own echoed parameters."""
    got = json.loads(reply)
    return all(r["result"][0] in params for r in got if "result" in r)


def expect(otel: Any, exchanges: int) -> None:
    assert exchanges % len(STEPS) == 0
    k = exchanges // len(STEPS)
    settle()
    counters = otel.counters()
    assert {
        name: counters.get(name, 0)
        for name in (
            "batch.requests",
            "batch.missing_response",
            "batch.unknown_id_response",
            "batch.response_count_mismatch",
            "batch.out_of_order",
            "batch.null_id_response",
            "batch.invalid_response",
            "batch.duplicate_id",
            "batch.closed",
            "pairwatch.internal_errors",
        )
    } == {
        "batch.requests": 4 * exchanges,
        "batch.missing_response": 2 * k,
        "batch.unknown_id_response": 2 * k,
        "batch.response_count_mismatch": 2 * k,
        "batch.out_of_order": k,
        "batch.null_id_response": 0,
        "batch.invalid_response": 0,
        "batch.duplicate_id": 0,
        "batch.closed": exchanges,
        "pairwatch.internal_errors": 0,
    }
    assert otel.hist("batch.pair_latency")[0] == 4 * exchanges - 2 * k
    by_diagnosis = {
        d: otel.value("batch.closed", pairwatch__diagnosis=d)
        for d in ("responses_missing", "server_id_echo_fault", "client_duplicate_ids", "ok")
    }
    assert by_diagnosis == {
        "responses_missing": k,
        "server_id_echo_fault": 2 * k,  # duplicated replies, and re-addressed ones
        "client_duplicate_ids": 0,  # no id was sent twice
        "ok": 2 * k,
    }


def instrument(client: Any, otel: Any) -> Any:
    return pairwatch.instrument(
        client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )


@pytest.mark.parametrize("library", ["httpx", "requests"])
def test_eight_threads_share_one_sync_client(otel, chaos, library):
    chaos.set_faults(FaultScript(STEPS, cycle=True))
    client: Any = httpx.Client(timeout=10) if library == "httpx" else requests.Session()
    instrument(client, otel)
    threads, per_thread = 8, 10

    def work(caller: int) -> bool:
        ok = True
        for n in range(per_thread):
            data, params = body(caller, n)
            if library == "httpx":
                reply = client.post(chaos.url, content=data, headers=HEADERS).content
            else:
                reply = client.post(chaos.url, data=data, headers=HEADERS, timeout=10).content
            ok = ok and own_results(reply, params)
        return ok

    with client, ThreadPoolExecutor(threads) as pool:
        assert all(pool.map(work, range(threads)))
    expect(otel, threads * per_thread)


@pytest.mark.parametrize("library", ["httpx", "aiohttp"])
def test_two_hundred_tasks_share_one_async_client(otel, chaos, library):
    chaos.set_faults(FaultScript(STEPS, cycle=True))
    tasks = 200

    async def run() -> list[bool]:
        if library == "httpx":
            async with instrument(httpx.AsyncClient(timeout=20), otel) as c:

                async def one(caller: int) -> bool:
                    data, params = body(caller, 0)
                    r = await c.post(chaos.url, content=data, headers=HEADERS)
                    return own_results(r.content, params)

                return await asyncio.gather(*(one(i) for i in range(tasks)))
        async with aiohttp.ClientSession() as session:
            instrument(session, otel)

            async def one_aiohttp(caller: int) -> bool:
                data, params = body(caller, 0)
                async with session.post(chaos.url, data=data, headers=HEADERS) as r:
                    return own_results(await r.read(), params)

            return await asyncio.gather(*(one_aiohttp(i) for i in range(tasks)))

    assert all(asyncio.run(run()))
    expect(otel, tasks)


def test_threads_feeding_one_stream_channel(otel):
    """Several threads share one stream channel (a websocket, a stdio session) with
    disjoint ids: each sends batches of four and reads a reply with one answer dropped and
    one unknown id; totals are exact and no batch pairs another thread's answers."""
    channel = pairwatch.open_channel(
        transport="websocket",
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        timeout=3600.0,
        max_open_batches=4096,
    )
    threads, per_thread = 8, 250
    start = threading.Barrier(threads)

    def work(t: int) -> None:
        start.wait()
        for n in range(per_thread):
            ids = [f"t{t}-{n}-{i}" for i in range(4)]
            channel.sent([{"jsonrpc": "2.0", "id": i, "method": "m"} for i in ids])
            reply = [{"jsonrpc": "2.0", "id": i, "result": 1} for i in reversed(ids[1:])]
            reply.append({"jsonrpc": "2.0", "id": f"t{t}-{n}-stray", "result": 1})
            channel.received(reply)

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(work, range(threads)))
    assert channel.ledger.open_batches == threads * per_thread  # each waits for its id 0
    channel.close("stream_end")
    settle()
    batches = threads * per_thread
    assert otel.value("batch.requests") == 4 * batches
    assert otel.hist("batch.pair_latency")[0] == 3 * batches
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_end") == batches
    assert otel.value("batch.unknown_id_response") == batches
    assert otel.value("batch.out_of_order") == batches
    assert otel.value("batch.duplicate_id") == 0
    assert otel.value("batch.closed") == batches
    assert channel.ledger.pending_ids == 0

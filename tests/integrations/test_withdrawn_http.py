"""Over HTTP, the caller's own decisions are withdrawals too: a cancelled task, the off switch.

A real loopback server that answers slowly: an asyncio task awaiting an httpx or aiohttp
call is cancelled (the caller's "stop" button), and the exchange counts one withdrawn
request, no missing one.  Then the off switch flipped under load: threads post to a healthy
server while another toggles ``disable()``/``enable()``; nothing is missing, and every
request sent while on is paired or withdrawn (``switched_off``).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from http_drivers import HOOKS, SCRIPTS
from otel_support import Otel

import pairwatch

REQUEST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_call"}).encode()
REPLY = b'{"jsonrpc":"2.0","id":1,"result":"0x"}'
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def slow(scripted: str) -> str:
    SCRIPTS["/slow"] = (200, JSON, [REPLY], False)
    HOOKS["/slow"] = lambda index: time.sleep(2)
    yield scripted + "/slow"
    HOOKS.pop("/slow", None)


def assert_one_withdrawn(otel: Otel) -> None:
    pairwatch.flush()
    assert otel.counters() == {
        "batch.requests": 1,
        "batch.closed": 1,
        "batch.withdrawn_request": 1,
    }
    assert otel.value("batch.withdrawn_request", pairwatch__reason="cancelled") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 1


async def test_a_cancelled_httpx_call_is_withdrawn(otel: Otel, slow: str):
    async with httpx.AsyncClient(timeout=10) as client:
        pairwatch.instrument(client, meter_provider=otel.meter_provider)
        task = asyncio.create_task(client.post(slow, content=REQUEST, headers=JSON))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert_one_withdrawn(otel)


async def test_a_cancelled_aiohttp_call_is_withdrawn(otel: Otel, slow: str):
    import aiohttp

    async with aiohttp.ClientSession() as session:
        pairwatch.instrument(session, meter_provider=otel.meter_provider)

        async def call() -> bytes:
            async with session.post(slow, data=REQUEST, headers=JSON) as r:
                return await r.read()

        task = asyncio.create_task(call())
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert_one_withdrawn(otel)


def test_the_off_switch_under_load_pages_nobody(otel: Otel, scripted: str):
    """Four threads post for a second while the switch flips every few milliseconds."""
    SCRIPTS["/healthy"] = (200, JSON, [REPLY], False)
    url = scripted + "/healthy"
    stop = threading.Event()
    errors: list[BaseException] = []

    def post() -> None:
        with httpx.Client(timeout=5) as client:
            pairwatch.instrument(client, meter_provider=otel.meter_provider)
            while not stop.is_set():
                try:
                    assert client.post(url, content=REQUEST, headers=JSON).content == REPLY
                except BaseException as exc:  # reported below, after the threads stop
                    errors.append(exc)
                    return

    threads = [threading.Thread(target=post) for _ in range(4)]
    for t in threads:
        t.start()
    flips = 0
    deadline = time.monotonic() + 1.0
    try:
        while time.monotonic() < deadline:
            pairwatch.disable()
            time.sleep(0.003)
            pairwatch.enable()
            time.sleep(0.003)
            flips += 1
    finally:
        pairwatch.enable()
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors
    pairwatch.flush()
    counters = otel.counters()
    assert flips > 50
    requests = counters["batch.requests"]
    paired = otel.hist("batch.pair_latency")[0]
    withdrawn = counters.get("batch.withdrawn_request", 0)
    assert requests > 0
    assert paired + withdrawn == requests
    for name in ("batch.missing_response", "batch.response_count_mismatch"):
        assert counters.get(name, 0) == 0, name
    assert otel.value("batch.withdrawn_request", pairwatch__reason="cancelled") == 0

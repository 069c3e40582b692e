"""However an aiohttp caller reads a JSON reply, pairwatch pairs it once, exactly.

The tee shows pairwatch each read.  A read that ends the body and is the whole body (the
usual ``read()`` or ``json()``) is shown whole; a body read in pieces is buffered and
paired at its end; bytes still encoded (``auto_decompress=False``) are decoded privately.
Each way, over a real loopback server sending the reply in three chunks, the caller gets
the same bytes as without pairwatch and the books show both requests paired.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from http_drivers import HOOKS, JSON, SCRIPTS, bare, instrumenting

REQUEST = json.dumps(
    [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0", "id": 2, "method": "b"}]
).encode()
REPLY = b'[{"jsonrpc":"2.0","id":1,"result":"A"},{"jsonrpc":"2.0","id":2,"result":"B"}]'


async def _read(r: aiohttp.ClientResponse) -> bytes:
    return await r.read()


async def _json(r: aiohttp.ClientResponse) -> bytes:
    return json.dumps(await r.json(), separators=(",", ":")).encode()


async def _chunked(r: aiohttp.ClientResponse) -> bytes:
    return b"".join([c async for c in r.content.iter_chunked(7)])


async def _any(r: aiohttp.ClientResponse) -> bytes:
    return b"".join([c async for c in r.content.iter_any()])


async def _exactly_then_rest(r: aiohttp.ClientResponse) -> bytes:
    head = await r.content.readexactly(10)
    return head + await r.content.read()


READS: dict[str, Callable[[aiohttp.ClientResponse], Awaitable[bytes]]] = {
    "read": _read,
    "json": _json,
    "iter_chunked": _chunked,
    "iter_any": _any,
    "readexactly_then_read": _exactly_then_rest,
}


def _exchange(url: str, read: Any, instrument: Any, decompress: bool) -> bytes:
    async def run() -> bytes:
        async with aiohttp.ClientSession(auto_decompress=decompress) as session:
            instrument(session)
            async with session.post(url, data=REQUEST, headers=JSON) as r:
                return await read(r)  # type: ignore[no-any-return]

    return asyncio.run(run())


# json() of bytes still gzip-encoded fails in the caller, with or without pairwatch.
CASES = [
    pytest.param(how, decompress, id=f"{how}-{'decoded' if decompress else 'still_gzip'}")
    for how in sorted(READS)
    for decompress in (True, False)
    if decompress or how != "json"
]


@pytest.mark.parametrize(("how", "decompress"), CASES)
def test_every_way_of_reading_pairs_once(otel, scripted, how, decompress):
    body = gzip.compress(REPLY)
    path = f"/aiohttp-reads-{how}-{decompress}"
    thirds = [body[:9], body[9:20], body[20:]]
    SCRIPTS[path] = (
        200,
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
        thirds,
        False,
    )
    read = READS[how]
    without = _exchange(scripted + path, read, bare, decompress)
    with_pw = _exchange(scripted + path, read, instrumenting(otel), decompress)
    assert with_pw == without == (REPLY if decompress else body)
    assert otel.counters() == {"batch.requests": 2, "batch.closed": 1}
    assert otel.value("batch.closed", pairwatch__close_reason="body_end") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 1
    assert otel.hist("batch.pair_latency")[0] == 2


# ----------------------------------------------------------------- a body nobody reads
def _unread(url: str, instrument: Any, end: str, wait: float) -> dict[str, Any]:
    """Post, read nothing, wait ``wait`` s, then end the response with ``end`` (release or
    close) while still holding it; the books are read before the response is collected."""
    seen: dict[str, Any] = {}

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            instrument(session)
            r = await session.post(url, data=REQUEST, headers=JSON)
            await asyncio.sleep(wait)
            result = getattr(r, end)()
            if asyncio.iscoroutine(result):
                await result
            seen["held"] = r  # still referenced: only the release or close can count it

    asyncio.run(run())
    return seen


def _script(path: str, chunks: list[bytes], cut: bool = False, pause: float = 0.0) -> str:
    SCRIPTS[path] = (200, {"Content-Type": "application/json"}, chunks, cut)
    if pause:
        HOOKS[path] = lambda index: time.sleep(pause) if index else None
    return path


@pytest.mark.parametrize("end", ["release", "close"])
def test_a_body_released_before_its_end_is_dropped_at_once(otel, scripted, end):
    path = _script(f"/aiohttp-unread-{end}", [REPLY[:10], REPLY[10:]], pause=0.5)
    seen = _unread(scripted + path, instrumenting(otel), end, 0.05)
    assert otel.counters() == {
        "batch.requests": 2, "batch.closed": 1, "batch.missing_response": 2,
        "batch.response_count_mismatch": 1,
    }  # fmt: skip
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 2
    assert seen["held"].closed


@pytest.mark.parametrize("end", ["release", "close"])
def test_a_body_received_but_never_read_is_dropped(otel, scripted, end):
    path = _script(f"/aiohttp-received-{end}", [REPLY])
    seen = _unread(scripted + path, instrumenting(otel), end, 0.2)
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 2
    assert otel.value("batch.closed") == 1
    assert seen["held"].closed


@pytest.mark.parametrize("end", ["release", "close"])
def test_a_connection_lost_before_any_read_is_dropped(otel, scripted, end):
    """The reader already holds the connection's error when the caller gives up: aiohttp
    then leaves the reader alone, and pairwatch must still see the end."""
    path = _script(f"/aiohttp-lost-{end}", [REPLY[:10]], cut=True)
    seen = _unread(scripted + path, instrumenting(otel), end, 0.2)
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 2
    assert otel.value("batch.closed") == 1
    assert seen["held"].closed


def test_an_empty_body_nobody_reads_ends_normally(otel, scripted):
    SCRIPTS["/aiohttp-empty"] = (200, {"Content-Type": "application/json"}, [], False)
    seen = _unread(scripted + "/aiohttp-empty", instrumenting(otel), "release", 0.05)
    assert otel.value("batch.missing_response", pairwatch__close_reason="body_end") == 2
    assert otel.value("batch.closed", pairwatch__close_reason="body_end") == 1
    assert seen["held"].closed


# ------------------------------------------------------- the tee comes off at the end
def _reads_then_holds(url: str, read: Any, instrument: Any) -> dict[str, Any]:
    """Read the body ``read``'s way, then read again through the reader the caller got
    before its first read; report what the response holds afterwards."""
    seen: dict[str, Any] = {}

    async def run() -> None:
        async with aiohttp.ClientSession() as session:
            instrument(session)
            async with session.post(url, data=REQUEST, headers=JSON) as r:
                kept = r.content
                seen["body"] = await read(r)
                seen["after"] = type(r.content)
                seen["again"] = await kept.read()
                seen["at_eof"] = r.content.at_eof()

    asyncio.run(run())
    return seen


@pytest.mark.parametrize("how", sorted(READS))
def test_the_tee_comes_off_when_the_body_ends(otel, scripted, how):
    """Once the body has ended, the response holds aiohttp's own reader again, however the
    body was read (whole, or in pieces through a tap); a reader kept from before still
    reads through the tee, and nothing is counted twice."""
    path = _script(f"/aiohttp-tee-off-{how}", [REPLY[:9], REPLY[9:30], REPLY[30:]])
    read = READS[how]
    without = _reads_then_holds(scripted + path, read, bare)
    with_pw = _reads_then_holds(scripted + path, read, instrumenting(otel))
    assert with_pw == without
    assert with_pw["after"] is aiohttp.StreamReader
    assert with_pw["again"] == b""
    assert otel.counters() == {"batch.requests": 2, "batch.closed": 1}
    assert otel.value("batch.closed", pairwatch__close_reason="body_end") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 1

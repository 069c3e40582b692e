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
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from http_drivers import JSON, SCRIPTS, bare, instrumenting

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

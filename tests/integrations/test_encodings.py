"""Bodies are read as the client reads them: its content decoders, its charset rules.

Found by users: with ``brotli`` installed httpx asks for ``br`` by default, and every br reply
counted as all responses missing while the caller got the right answer; zstd likewise; one
Latin-1 byte inside one string result made every response of that body count as missing
although ``requests``' ``.json()`` returned them all.  Here a real loopback server sends each
encoding through each client library: the caller's bytes are the same with and without
pairwatch, and the books show every request paired, none missing.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from typing import Any

import aiohttp
import httpx
import pytest
import requests
from components import need
from http_drivers import DRIVERS, JSON, SCRIPTS, bare, decodes_or_skip, instrumenting

import pairwatch

INSTALL = "pip install 'pairwatch[test]' (brotli, zstandard, backports.zstd)"
REQUEST = json.dumps(
    [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0", "id": 2, "method": "b"}]
).encode()
REPLY = b'[{"jsonrpc":"2.0","id":1,"result":"A"},{"jsonrpc":"2.0","id":2,"result":"B"}]'
LATIN1 = b'[{"jsonrpc":"2.0","id":1,"result":"caf\xe9"},{"jsonrpc":"2.0","id":2,"result":"B"}]'


def encoded(encoding: str, body: bytes) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body)
    if encoding == "deflate":
        return zlib.compress(body)
    if encoding == "br":
        return bytes(need("brotli", INSTALL).compress(body))
    if encoding == "zstd":
        need("backports.zstd", INSTALL)  # what urllib3 and aiohttp decode zstd with
        return bytes(need("zstandard", INSTALL).ZstdCompressor().compress(body))
    raise AssertionError(encoding)


def script(path: str, encoding: str | None, body: bytes, content_type: str) -> None:
    headers = {"Content-Type": content_type}
    if encoding:
        headers["Content-Encoding"] = encoding
        body = encoded(encoding, body)
    # Two chunks, so that decoders see a body arrive in pieces.
    SCRIPTS[path] = (200, {**headers, "Transfer-Encoding": "chunked"}, [body[:7], body[7:]], False)


def healthy_books(otel: Any, batches: int = 1) -> None:
    """Every request paired, nothing else counted: the whole books in one assertion."""
    assert otel.counters() == {"batch.requests": 2 * batches, "batch.closed": batches}
    assert otel.value("batch.closed", pairwatch__close_reason="body_end") == batches
    assert otel.hist("batch.pair_latency")[0] == 2 * batches
    assert otel.value("batch.missing_response") == 0


@pytest.mark.parametrize("encoding", ["gzip", "deflate", "br", "zstd"])
def test_every_encoding_pairs_through_every_client(otel, scripted, driver, encoding):
    name, run = driver
    decodes_or_skip(name, encoding)
    path = f"/enc-{encoding}"
    script(path, encoding, REPLY, "application/json")
    without = run(scripted + path, REQUEST, False, bare)
    with_pw = run(scripted + path, REQUEST, False, instrumenting(otel))
    assert with_pw == without
    assert with_pw.body == REPLY, (name, encoding, with_pw)  # the client decoded it
    healthy_books(otel)


@pytest.mark.parametrize("encoding", ["br", "zstd"])
def test_encoded_event_stream_pairs_per_event(otel, scripted, driver, encoding):
    name, run = driver
    decodes_or_skip(name, encoding)
    path = f"/sse-{encoding}"
    events = (
        b'data: {"jsonrpc":"2.0","id":1,"result":"A"}\n\n'
        b'data: {"jsonrpc":"2.0","id":2,"result":"B"}\n\n'
    )
    script(path, encoding, events, "text/event-stream")
    without = run(scripted + path, REQUEST, True, bare)
    with_pw = run(scripted + path, REQUEST, True, instrumenting(otel))
    assert with_pw == without == type(with_pw)(events)
    assert otel.counters() == {"batch.requests": 2, "batch.closed": 1}
    assert otel.value("batch.closed", pairwatch__close_reason="stream_end") == 1
    assert otel.hist("batch.pair_latency")[0] == 2


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "application/json; charset=ISO-8859-1"],
)
def test_a_latin1_byte_in_one_result_misses_nothing(otel, scripted, driver, content_type):
    _, run = driver
    path = "/latin1-" + str(abs(hash(content_type)))
    script(path, None, LATIN1, content_type)
    without = run(scripted + path, REQUEST, False, bare)
    with_pw = run(scripted + path, REQUEST, False, instrumenting(otel))
    assert with_pw == without
    assert with_pw.body == LATIN1  # the caller's bytes, unchanged
    healthy_books(otel)
    assert otel.value("batch.invalid_response") == 0


def test_requests_json_returns_them_all_and_so_does_pairwatch(otel, scripted):
    """What the users saw: ``requests``' ``.json()`` reads the body; pairwatch must too."""
    script("/latin1-requests", "gzip", LATIN1, "application/json")
    session = pairwatch.instrument(
        requests.Session(), meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    with session:
        got = session.post(scripted + "/latin1-requests", data=REQUEST, headers=JSON, timeout=5)
        assert [r["id"] for r in got.json()] == [1, 2]
    healthy_books(otel)


@pytest.mark.parametrize("encoding", ["gzip", "br", "zstd"])
def test_requests_raw_reads_still_encoded_bytes(otel, scripted, encoding):
    """``raw.read(decode_content=False)`` hands the caller encoded bytes: pairwatch decodes
    its own copy with urllib3's decoder for that encoding, never the caller's."""
    decodes_or_skip("requests", encoding)
    path = f"/raw-{encoding}"
    script(path, encoding, REPLY, "application/json")
    session = pairwatch.instrument(
        requests.Session(), meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    with (
        session,
        session.post(scripted + path, data=REQUEST, headers=JSON, stream=True, timeout=5) as r,
    ):
        raw = r.raw.read(decode_content=False)
    assert raw != REPLY  # still encoded for the caller
    healthy_books(otel)


@pytest.mark.parametrize("encoding", ["gzip", "br", "zstd"])
def test_aiohttp_without_auto_decompress(otel, scripted, encoding):
    """A session that leaves decoding to its caller: pairwatch decodes a copy with aiohttp's
    own decompressor, the caller gets the encoded bytes it asked for."""
    decodes_or_skip("aiohttp", encoding)
    path = f"/aio-raw-{encoding}"
    script(path, encoding, REPLY, "application/json")

    async def run() -> bytes:
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            pairwatch.instrument(
                session, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
            async with session.post(scripted + path, data=REQUEST, headers=JSON) as r:
                return await r.read()

    body = asyncio.run(run())
    assert body != REPLY  # encoded, as asked
    healthy_books(otel)


def test_an_encoding_the_client_cannot_read_is_not_read_either(otel, scripted, driver):
    """``Content-Encoding: compress`` no client here decodes: the caller holds the encoded
    bytes and cannot parse them, and pairwatch counts what the caller experienced."""
    _, run = driver
    SCRIPTS["/lzw"] = (
        200,
        {"Content-Type": "application/json", "Content-Encoding": "compress"},
        [b"\x1f\x9d\x90[\x00"],
        False,
    )
    without = run(scripted + "/lzw", REQUEST, False, bare)
    with_pw = run(scripted + "/lzw", REQUEST, False, instrumenting(otel))
    assert with_pw == without
    if with_pw.error is None:  # httpx and requests hand the bytes over undecoded
        assert with_pw.body == b"\x1f\x9d\x90[\x00"
        assert otel.value("batch.missing_response", pairwatch__close_reason="body_end") == 2
        assert otel.value("batch.invalid_response", pairwatch__reason="unparseable") == 1
    else:  # aiohttp refuses the encoding: the body was never read
        assert otel.value("batch.missing_response") == 2


@pytest.mark.parametrize("rows", [True, False], ids=["rows", "raw"])
@pytest.mark.parametrize("name", ["httpx", "httpx_async"])
def test_httpx_headers_read_either_way(otel, scripted, monkeypatch, name, rows):
    """httpx's reply headers are read from the rows its ``Headers`` keeps, or, for a class
    that keeps none pairwatch knows, through ``Headers.raw``: the same type and encoding are
    found either way, so a gzipped event stream read whole pairs per event."""
    from pairwatch.integrations import httpx_client

    monkeypatch.setattr(httpx_client, "_ROWS", {} if rows else {httpx.Headers: False})
    path = f"/headers-{name}-{rows}"
    events = (
        b'data: {"jsonrpc":"2.0","id":1,"result":"A"}\n\n'
        b'data: {"jsonrpc":"2.0","id":2,"result":"B"}\n\n'
    )
    script(path, "gzip", events, "text/event-stream")
    assert DRIVERS[name](scripted + path, REQUEST, False, instrumenting(otel)).body == events
    assert otel.counters() == {"batch.requests": 2, "batch.closed": 1}
    assert otel.hist("batch.pair_latency")[0] == 2
    read_as = httpx_client._ROWS
    assert read_as == {httpx.Headers: rows}  # the way this test meant them to be read

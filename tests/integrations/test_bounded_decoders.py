"""pairwatch's bounded decoders agree byte for byte with each client library's own.

pairwatch decodes its copy of a body with its own decoders, a bounded step at a time (see
``pairwatch.integrations._kit.decoders``), so that a bomb costs one step; the library the
caller uses decodes with its own.  On ordinary bodies the two must agree exactly, whatever
the chunking and however small the steps: random bodies, each encoding, random chunk and
step sizes, against httpx's, urllib3's and aiohttp's decoders.
"""

from __future__ import annotations

import gzip
import itertools
import zlib
from collections.abc import Callable
from typing import Any

import pytest
from components import need
from http_drivers import decodes_or_skip
from hypothesis import given, settings
from hypothesis import strategies as st

from pairwatch.integrations._kit import decoders

INSTALL = "pip install 'pairwatch[test]' (brotli, zstandard, backports.zstd)"
ENCODINGS = ("gzip", "deflate", "br", "zstd")


def compress(encoding: str, body: bytes, raw_deflate: bool = False) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body)
    if encoding == "deflate":
        if raw_deflate:  # some servers send deflate without its zlib wrapper
            obj = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
            return obj.compress(body) + obj.flush()
        return zlib.compress(body)
    if encoding == "br":
        return bytes(need("brotli", INSTALL).compress(body))
    return bytes(need("zstandard", INSTALL).ZstdCompressor().compress(body))


def theirs(library: str, encoding: str) -> Callable[[list[bytes]], bytes]:
    """The library's own decoding of a chunked body."""
    if library == "httpx":
        table = need("httpx._decoders", INSTALL).SUPPORTED_DECODERS

        def run(chunks: list[bytes]) -> bytes:
            d = table[encoding]()
            return b"".join(d.decode(c) for c in chunks) + d.flush()

    elif library == "urllib3":
        get = need("urllib3.response", INSTALL)._get_decoder

        def run(chunks: list[bytes]) -> bytes:
            d = get(encoding)
            return b"".join(d.decompress(c) for c in chunks) + d.flush()

    else:
        utils = need("aiohttp.compression_utils", INSTALL)

        def run(chunks: list[bytes]) -> bytes:
            if encoding == "br":
                d: Any = utils.BrotliDecompressor()
            elif encoding == "zstd":
                d = utils.ZSTDDecompressor()
            else:
                d = utils.ZLibDecompressor(encoding=encoding)
            return b"".join(d.decompress_sync(c) for c in chunks) + d.flush()

    return run


def ours(library: str, encoding: str) -> decoders.Chosen:
    if library == "httpx":
        return decoders.for_httpx("httpx", encoding)
    if library == "urllib3":
        return decoders.for_urllib3(encoding)
    return decoders.for_aiohttp(encoding)


def bounded(decoder: Any, chunks: list[bytes], step: int) -> bytes:
    """Decode as the tap does: at most ``step`` bytes per call, then ``b""`` until empty."""
    out: list[bytes] = []
    for chunk in chunks:
        data = chunk
        while True:
            part = decoder.decode(data, step)
            assert len(part) <= step
            data = b""
            if not part:
                break
            out.append(part)
    out.append(decoder.flush())
    return b"".join(out)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds) if b > a] or [b""]


bodies = st.one_of(
    st.binary(max_size=4000),
    st.builds(lambda n, b: b * n, st.integers(1, 3000), st.binary(min_size=1, max_size=40)),
)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("library", ["httpx", "urllib3", "aiohttp"])
def test_bounded_decoding_agrees_with_the_library(library: str, encoding: str):
    decodes_or_skip(library, encoding)
    mine = ours(library, encoding)
    assert not isinstance(mine, type(decoders.UNSUPPORTED)), f"{library} decodes {encoding}"
    decode = theirs(library, encoding)

    @settings(max_examples=60, deadline=None)
    @given(bodies, st.lists(st.integers(0, 10**6), max_size=6), st.integers(1, 5000))
    def check(body: bytes, cuts: list[int], step: int) -> None:
        chunks = split(compress(encoding, body), cuts)
        expected = decode(chunks)
        assert expected == body
        assert bounded(ours(library, encoding), chunks, step) == expected

    check()


@pytest.mark.parametrize("library", ["httpx", "urllib3"])
def test_raw_deflate_is_read_as_the_library_reads_it(library: str):
    body = b'{"jsonrpc":"2.0","id":1,"result":"' + b"x" * 5000 + b'"}'
    chunks = split(compress("deflate", body, raw_deflate=True), [7, 100])
    assert theirs(library, "deflate")(chunks) == body
    assert bounded(ours(library, "deflate"), chunks, 1000) == body


def test_gzip_members_follow_urllib3_and_stop_for_httpx():
    """urllib3 reads every gzip member; httpx stops at the end of the first."""
    body = gzip.compress(b"first ") + gzip.compress(b"second")
    assert theirs("urllib3", "gzip")([body]) == b"first second"
    assert bounded(ours("urllib3", "gzip"), [body], 3) == b"first second"
    assert theirs("httpx", "gzip")([body]) == b"first "
    assert bounded(ours("httpx", "gzip"), [body], 3) == b"first "


def test_zstd_frames_follow_one_another():
    decodes_or_skip("httpx", "zstd")
    zstandard = need("zstandard", INSTALL)
    body = zstandard.ZstdCompressor().compress(b"one ") + zstandard.ZstdCompressor().compress(
        b"two"
    )
    assert theirs("httpx", "zstd")([body]) == b"one two"
    assert bounded(ours("httpx", "zstd"), split(body, [5, 9]), 2) == b"one two"


def test_a_bomb_costs_one_step():
    """100 MiB of zeros in about 100 KB: each call returns at most the step asked for."""
    obj = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = b"".join(obj.compress(bytes(1 << 20)) for _ in range(100)) + obj.flush()
    decoder = ours("httpx", "gzip")
    first = decoder.decode(bomb, 1 << 20)  # type: ignore[union-attr]
    assert len(first) == 1 << 20
    assert len(decoder.decode(b"", 1 << 20)) == 1 << 20  # type: ignore[union-attr]

"""Differential fuzzing: random bodies, headers and chunkings, each client, bare and not.

A real loopback server answers with a random body (a JSON-RPC reply, an event stream or
random bytes), under a random Content-Type and Content-Encoding (the body encoded with it,
or not: a lying header), cut into random chunks, sent with a length or chunked.  For each
HTTP client the caller must see exactly what it sees bare (bytes, decoded value or
exception), pairwatch must raise nothing into it, and its books must balance: every request
is paired, missing or unchecked.
"""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
import zlib

import pytest
from fuzz_strategies import fuzz_settings
from http_drivers import DRIVERS, SCRIPTS, Seen, bare
from hypothesis import given
from hypothesis import strategies as st
from otel_support import Otel
from robust_support import settle

import pairwatch

REQUEST = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "m"} for i in (1, 2, 3)]).encode()
_paths = itertools.count()


def _encode(encoding: str, body: bytes) -> bytes:
    if encoding == "gzip":
        return gzip.compress(body)
    if encoding == "deflate":
        return zlib.compress(body)
    if encoding == "br":
        import brotli

        return bytes(brotli.compress(body))
    import zstandard

    return bytes(zstandard.ZstdCompressor().compress(body))


replies = st.one_of(
    st.lists(
        st.fixed_dictionaries(
            {"jsonrpc": st.just("2.0"), "id": st.sampled_from([1, 2, 3, 4, None, "1"])},
            optional={"result": st.integers(), "error": st.just({"code": -1, "message": "x"})},
        ),
        max_size=5,
    ).map(lambda x: json.dumps(x).encode()),
    st.binary(max_size=300),
)


@st.composite
def answers(draw: st.DrawFn) -> tuple[dict[str, str], list[bytes], bool]:
    body = draw(replies)
    sse = draw(st.booleans())
    if sse:
        body = b"".join(b"data: " + line + b"\n" for line in body.split(b"\n")) + b"\n\n"
    headers = {
        "Content-Type": "text/event-stream"
        if sse
        else draw(
            st.sampled_from(["application/json", "text/plain", "application/json; charset=latin-1"])
        )
    }
    encoding = draw(st.sampled_from([None, "gzip", "deflate", "br", "zstd"]))
    if encoding is not None:
        headers["Content-Encoding"] = encoding
        if draw(st.integers(0, 9)):  # mostly honest; sometimes the header lies
            body = _encode(encoding, body)
    if draw(st.booleans()):
        headers["Transfer-Encoding"] = "chunked"
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=4))))
    bounds = [0, *[c for c in cuts if c < len(body)], len(body)]
    chunks = [body[a:b] for a, b in itertools.pairwise(bounds) if b > a] or [b""]
    return headers, chunks, sse


def comparable(seen: Seen) -> Seen:
    """What must be equal bare and instrumented.  A body that does not decode in its declared
    encoding fails with the library's own exception either way, but its message depends on
    which read the decoder failed in (httpx retries deflate raw only on its first chunk), and
    loopback TCP splits the same bytes differently from one request to the next: the type
    is compared, not the zlib message."""
    if seen.error is not None and seen.error[0] in ("DecodingError", "ContentDecodingError"):
        return dataclasses.replace(seen, error=(seen.error[0], "<decoder message>"))
    return seen


@pytest.mark.parametrize("library", sorted(DRIVERS))
def test_the_caller_sees_what_it_sees_bare(replying: str, library: str):
    run = DRIVERS[library]
    otel = Otel()

    def instrument(client: object) -> object:
        return pairwatch.instrument(
            client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )

    def books() -> dict[str, int]:
        c = otel.counters()
        return {
            "requests": c.get("batch.requests", 0),
            "settled": otel.hist("batch.pair_latency")[0]
            + c.get("batch.missing_response", 0)
            + c.get("batch.unchecked_request", 0),
            "errors": c.get("pairwatch.internal_errors", 0),
        }

    @fuzz_settings(20)
    @given(answers())
    def check(answer: tuple[dict[str, str], list[bytes], bool]) -> None:
        headers, chunks, sse = answer
        path = f"/diff/{next(_paths)}"
        SCRIPTS[path] = (200, headers, chunks, False)
        try:
            expected = run(replying + path, REQUEST, sse, bare)
            before = books()
            got = run(replying + path, REQUEST, sse, instrument)
            settle()
            after = books()
        finally:
            del SCRIPTS[path]
        assert comparable(got) == comparable(expected)
        delta = {k: after[k] - before[k] for k in after}
        assert delta["errors"] == 0
        assert delta["requests"] == 3
        assert delta["settled"] == 3

    check()

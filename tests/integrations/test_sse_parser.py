"""The incremental SSE parser and the body tap, fed byte by byte and chunk by chunk."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import pairwatch
from pairwatch.channel import Options
from pairwatch.integrations._kit.sse import SseParser
from pairwatch.integrations._kit.stream import Tap

STREAM = (
    b"\xef\xbb\xbf: comment\r\n"
    b"data: one\r\n\r\n"
    b"event: message\ndata: two\ndata:  three\n\n"
    b"event: ping\ndata: skipped\n\n"
    b"id: 7\rdata:four\r\r"
    b"data\n\n"
    b"data: tail-without-blank-line\n"
)
EVENTS = [b"one", b"two\n three", b"four"]


def feed_all(chunks):
    parser = SseParser()
    out = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    return out


def test_whole_stream():
    assert feed_all([STREAM]) == EVENTS


def test_byte_by_byte():
    assert feed_all([STREAM[i : i + 1] for i in range(len(STREAM))]) == EVENTS


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_any_split_gives_the_same_events(cuts):
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)], strict=True)]
    assert feed_all(chunks) == EVENTS


def test_crlf_split_across_chunks_is_one_line_end():
    assert feed_all([b"data: a\r", b"\n\r", b"\n"]) == [b"a"]


def channel(otel):
    return pairwatch.open_channel(
        transport="http",
        integration="manual",
        bound=True,
        options=Options(meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider),
    )


def test_tap_shields_the_caller(otel, monkeypatch):
    ch = channel(otel)
    ch.sent(b'{"jsonrpc":"2.0","id":1,"method":"m"}')
    tap = Tap(ch, "application/json")

    def boom(*_a, **_k):
        raise RuntimeError("broken inside pairwatch")

    monkeypatch.setattr(Tap, "_take", boom)
    tap.chunk(b"{}")  # never raises
    assert tap.done
    assert otel.value("pairwatch.internal_errors", pairwatch__error_kind="tap_chunk") == 1
    assert otel.value("batch.missing_response", pairwatch__close_reason="closed") == 1


@pytest.mark.parametrize("encoding", ["br", "zstd"])
def test_unreadable_encodings_close_as_missing(otel, encoding):
    ch = channel(otel)
    ch.sent(b'{"jsonrpc":"2.0","id":1,"method":"m"}')
    tap = Tap(ch, "application/json", encoding)
    tap.raw_chunk(b"\x00\x01")
    tap.end()
    assert otel.value("batch.missing_response", pairwatch__close_reason="body_end") == 1
    assert otel.value("pairwatch.internal_errors") == 0


def test_relabel_and_watch_on_a_bound_channel(otel):
    """Core additions used by HTTP integrations: a late transport label, sweeper watching."""
    from pairwatch.runtime.sweeper import SWEEPER as _sweeper

    ch = channel(otel)
    ch.sent(b'{"jsonrpc":"2.0","id":1,"method":"m"}')
    assert ch not in _sweeper._channels  # bound channels are not swept by default
    ch.relabel("sse")
    ch.watch()
    assert ch in _sweeper._channels
    ch.close("stream_end")
    sse = otel.value("batch.closed", pairwatch__transport="sse", pairwatch__integration="manual")
    assert sse == 1
    assert otel.value("batch.closed", pairwatch__transport="http") == 0

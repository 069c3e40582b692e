"""Bounded memory under abuse: caps hold, evictions count as missing with their reason, and
memory is flat once the channel is closed.

Memory is read with tracemalloc (allocations still alive), with generous bounds: the
point is "kilobytes, not megabytes", never a timing.  Loops of 10^5..10^6 batches use a
summing meter (``CountingMeterProvider``) so the numbers are exact at a fraction of the SDK's
cost; ``PAIRWATCH_ABUSE_BATCHES`` sets the big loop's size (CI: 5*10^4, long run: 10^6).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx
import pytest
from opentelemetry import trace
from robust_support import CountingMeterProvider, settle

import pairwatch
from pairwatch.pairing import wire

BATCHES = int(os.environ.get("PAIRWATCH_ABUSE_BATCHES", "50000"))
KB = 1024
MB = 1024 * KB


def channel(clock: Callable[[], float] = time.monotonic, **caps: int | float):
    meter = CountingMeterProvider()
    ch = pairwatch.open_channel(
        meter_provider=meter,
        tracer_provider=trace.NoOpTracerProvider(),
        spans=False,
        clock=clock,
        **caps,
    )
    return ch, meter


@contextmanager
def traced() -> Iterator[Callable[[], int]]:
    """Yield a function returning bytes allocated since entry and still alive."""
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        yield lambda: (gc.collect(), tracemalloc.get_traced_memory()[0] - base)[1]
    finally:
        tracemalloc.stop()


def request(i: object, method: str = "m") -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": i, "method": method}


def result(i: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": i, "result": 0}


def test_many_batches_stay_within_caps_and_memory_is_flat():
    """A client that never stops sending, to a server that never answers."""
    ch, meter = channel(max_open_batches=64, max_pending_ids=256, timeout=3600.0)
    for i in range(BATCHES):
        ch.sent(request(i))
        if i % 1000 == 0:
            assert ch.ledger.open_batches <= 64
            assert ch.ledger.pending_ids <= 64
    window = 5_000
    with traced() as alive:  # steady state: each new batch evicts an old one
        for i in range(BATCHES, BATCHES + window):
            ch.sent(request(i))
        settle()  # closed batches wait in telemetry's bounded queue until recorded
        grown = alive()
        ch.close("closed")
        settle()
        after_close = alive()
    total = BATCHES + window
    settle()
    assert ch.ledger.open_batches == 0
    assert ch.ledger.pending_ids == 0
    assert meter.value("batch.missing_response", pairwatch__close_reason="evicted") == total - 64
    assert meter.value("batch.missing_response", pairwatch__close_reason="closed") == 64
    assert meter.value("batch.closed") == total
    assert meter.value("batch.requests") == total
    assert grown < 128 * KB, grown  # a leak of 26 bytes per batch would show
    assert after_close < 64 * KB, after_close


def test_megabyte_ids_are_kept_as_digests_and_pair_exactly():
    ch, meter = channel()
    n = 40

    def big(i: int, last: str = "x") -> str:
        return "i" * MB + f"{i}" + last  # differ at the end: a prefix compare cannot tell

    with traced() as alive:
        for i in range(n):
            ch.sent(request(big(i)))
        held = alive()
    assert ch.ledger.pending_ids == n
    assert held < n * 4 * KB, held  # 40 MB of ids sent; a few hundred bytes kept per id
    for i in range(n - 1):
        ch.received(result(big(i)))
    ch.received(result(big(n - 1, last="y")))  # same length and prefix, another id
    ch.close("stream_end")
    settle()
    assert meter.value("batch.pair_latency:count") == n - 1
    assert meter.value("batch.unknown_id_response") == 1
    assert meter.value("batch.missing_response", pairwatch__close_reason="stream_end") == 1
    assert meter.value("batch.requests") == n


def test_long_id_keys_keep_json_identity():
    text = "a" * (wire.MAX_ID_CHARS + 1)
    state, key = wire.id_key(text)
    assert state == wire.IdState.VALID
    assert isinstance(key, wire.LongId)
    assert key == wire.id_key("".join(["a"] * (wire.MAX_ID_CHARS + 1)))[1]
    assert hash(key) == hash(wire.id_key(text[:-1] + "a")[1])
    assert key != wire.id_key(text[:-1] + "b")[1]
    assert key != text
    assert key != wire.id_key(text + "a")[1]
    assert wire.id_key("a" * wire.MAX_ID_CHARS)[1] == "a" * wire.MAX_ID_CHARS  # short: as is
    assert len(str(key)) < 120  # what a span shows of it is bounded too
    lone = "\ud800" * 300  # json.loads can produce lone surrogates
    assert wire.id_key(lone)[1] == wire.id_key("\ud800" * 300)[1]


def test_batch_of_100k_elements_caps_hold_and_overflow_counts_as_evicted():
    n, cap = 100_000, 65_536  # the default max_pending_ids
    ch, meter = channel()
    batch = ch.sent([request(i) for i in range(n)])
    assert batch is not None
    assert ch.ledger.pending_ids == cap
    ch.received([result(i) for i in range(n)])
    ch.close("body_end")
    settle()
    evicted = n - cap
    assert meter.value("batch.requests") == n
    assert meter.value("batch.pair_latency:count") == cap
    assert meter.value("batch.missing_response", pairwatch__close_reason="evicted") == evicted
    assert meter.value("batch.missing_response") == evicted  # paired + missing == sent
    assert meter.value("batch.unknown_id_response") == evicted  # replies to evicted ids
    assert meter.value("batch.size:count") == 1
    assert ch.ledger.pending_ids == 0
    gc.collect()
    # Nothing of pairwatch keeps the 10^5-element books once closed: the only references
    # left are this test's variable and getrefcount's argument.
    assert sys.getrefcount(batch) == 2


def test_server_requests_nobody_answers_stay_bounded():
    """A server flooding a stream with requests of its own (which never count as unknown)."""
    ch, meter = channel(max_pending_ids=1000)
    ch.received([request(f"srv-{i}") for i in range(50_000)])
    assert len(ch.ledger._inbound) == 1000  # white-box: the table of server requests
    assert meter.value("batch.unknown_id_response") == 0


def test_stream_batches_never_answered_time_out(clock):
    """The sweeper closes a hung stream's batches on its own, with no further call."""
    ch, meter = channel(clock=clock, timeout=5.0, max_open_batches=16)
    for i in range(100):
        ch.sent([request(2 * i), request(2 * i + 1)])
    assert ch.ledger.open_batches == 16
    clock.advance(5.0)
    deadline = time.monotonic() + 5.0
    while ch.ledger.open_batches and time.monotonic() < deadline:
        time.sleep(0.05)
    settle()
    assert ch.ledger.open_batches == 0
    assert meter.value("batch.missing_response", pairwatch__close_reason="timeout") == 32
    assert meter.value("batch.missing_response", pairwatch__close_reason="evicted") == 168


def test_http_server_that_never_answers(otel, chaos):
    """The client's own timeout fires exactly as without pairwatch; what was pending counts
    as missing (``send_failed``) and nothing of the exchange is kept."""
    chaos.set_faults(None)
    body = json.dumps([request(i, "sleep") | {"params": [2]} for i in range(3)]).encode()
    seen = []
    for instrumented in (False, True):
        client = httpx.Client(timeout=0.2)
        if instrumented:
            pairwatch.instrument(
                client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
        with client, pytest.raises(httpx.ReadTimeout) as raised:
            client.post(chaos.url, content=body, headers={"Content-Type": "application/json"})
        seen.append((type(raised.value), str(raised.value)))
    settle()
    assert seen[0] == seen[1]
    assert otel.value("batch.missing_response", pairwatch__close_reason="send_failed") == 3
    assert otel.value("batch.requests") == 3


def test_many_short_exchanges_leave_nothing_behind():
    """Thousands of bound channels (one per HTTP exchange) opened and closed: memory flat."""
    meter = CountingMeterProvider()
    options = pairwatch.Options(
        meter_provider=meter, tracer_provider=trace.NoOpTracerProvider(), spans=False
    )

    def exchange(i: int) -> None:
        ch = pairwatch.Channel(transport="http", bound=True, options=options)
        ch.sent([request(i), request(i + 1)])
        ch.received([result(i + 1), result(i)])
        ch.close("body_end")

    for i in range(1000):
        exchange(i)  # warm the label and attribute caches
    with traced() as alive:
        for i in range(3_000):
            exchange(i)
        settle()  # closed batches wait in telemetry's bounded queue until recorded
        left = alive()
    assert left < 32 * KB, left  # 10 bytes kept per exchange would show
    assert meter.value("batch.pair_latency:count") == 8_000

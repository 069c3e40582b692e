"""The ledger alone, and memory: closed batches must leave nothing behind, open ones little.

The ledger benchmark feeds pre-classified payloads (no parsing on either side) so that it
compares the books pairwatch keeps with the cheapest books a client could keep: a dict from
id to request, filled at send and popped at receive.
"""

from __future__ import annotations

import gc
import json
import os
import time
import tracemalloc
from typing import Any

from _common import Results, Row, flush, interleaved
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import pairwatch
from pairwatch.pairing import wire
from pairwatch.pairing.ledger import Ledger

LEDGER_TARGET_US = 0.25
PENDING_TARGET_B = 300.0
CLOSED_TARGET_B = 1.0  # bytes of growth per closed batch: no growth beyond noise


class _NullSink:
    def batch_closed(self, batch: Any) -> None:
        pass

    def stray(self, batch: Any, tally: Any) -> None:
        pass


def run_ledger(results: Results, repeats: int, per_block: int, n: int = 100) -> None:
    requests = [{"jsonrpc": "2.0", "id": i, "method": "eth_call", "params": [i]} for i in range(n)]
    replies = [{"jsonrpc": "2.0", "id": i, "result": "0x" + "ab" * 32} for i in range(n)]
    # What the channel gets for healthy traffic: every element well formed, so the payload
    # arrives as columns (ids, methods) and pairs without a per-element loop.
    ids: list[wire.IdKey] = list(range(n))
    sent = wire.Payload(
        True, None, None, wire.Plain(wire.Kind.REQUEST, ids, ["eth_call"] * n)
    )  # the ids and methods of ``requests``, as the fast decoder gives them
    received = wire.Payload(True, None, None, wire.Plain(wire.Kind.RESULT, list(ids), None))
    # What it gets when anything is unusual: one message per element.
    sent_each, received_each = wire.classify(requests), wire.classify(replies)
    sink = _NullSink()

    def bare(k: int) -> None:
        for _ in range(k):
            pending: dict[Any, Any] = {}
            for m in requests:
                pending[m["id"]] = m
            for m in replies:
                pending.pop(m["id"])

    def ledger(k: int) -> None:
        for _ in range(k):
            books = Ledger(sink, clock=time.monotonic, bound=True)
            books.sent(sent)
            books.received(received)
            books.close("body_end")

    def ledger_each(k: int) -> None:
        for _ in range(k):
            books = Ledger(sink, clock=time.monotonic, bound=True)
            books.sent(sent_each)
            books.received(received_each)
            books.close("body_end")

    timings = interleaved({"bare": bare, "ledger": ledger, "each": ledger_each}, repeats, per_block)
    per_element = [w / n * 1e6 for w, _ in timings["each"]]
    per_response = [w / n * 1e6 for w, _ in timings["ledger"]]
    bare_us = [w / n * 1e6 for w, _ in timings["bare"]]
    section = f"ledger alone, {n}-request batch"
    results.add(
        Row(
            section,
            "µs per paired response",
            "µs",
            per_response,
            LEDGER_TARGET_US,
            f"bare dict loop {sorted(bare_us)[len(bare_us) // 2]:.3f} µs",
            gated=False,
        )
    )
    # In --short, the absolute target is gated through this ratio: a loaded machine slows
    # both loops alike, while the absolute time can double.
    ratio = Row(
        section,
        "ratio to a bare dict loop",
        "x",
        [a / b for a, b in zip(per_response, bare_us, strict=True)],
    )
    ratio.known = 6.5  # gross-regression bound for --short (the 0.5 µs target is about 4x)
    results.add(ratio)
    results.add(
        Row(
            section,
            "µs per paired response, per-element path (any unusual element)",
            "µs",
            per_element,
            None,
            "a reorder, a drop, an error reply or a notification in the batch",
            gated=False,
        )
    )


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _settle() -> None:
    flush()
    gc.collect()


class _Clock:
    """A clock the benchmark moves; each reading is a new float, as ``time.monotonic``'s
    are, so that a pending request's send time is counted in its memory."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now + 0.0


def _see_trouble(provider: MeterProvider) -> None:
    """Books that record every kind of trouble once, as a long-running process has seen.

    What one batch writes must not make every later batch larger (it did while the rare
    fields lived in the instance ``__dict__``: about 140 bytes per pending request).
    """
    clock = _Clock()
    stream = pairwatch.open_channel(
        transport="bench", meter_provider=provider, spans=False, clock=clock, timeout=1.0
    )
    stream.sent(
        b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":1,"method":"a"},'
        b'{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":null,"method":"a"},'
        b'{"jsonrpc":"2.0","id":2,"method":"a"},{"jsonrpc":"2.0","id":3,"method":"a"},7]'
    )
    stream.sent(b'{"jsonrpc":"2.0","id":2,"method":"a"}')
    stream.received(
        b'[{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"x"}},'
        b'{"jsonrpc":"2.0","id":1,"result":1},{"jsonrpc":"2.0","id":null,"error":'
        b'{"code":-32600,"message":"x"}},{"jsonrpc":"2.0","id":"1","result":1},'
        b'{"jsonrpc":"2.0","id":9,"result":1},{"id":4},5]'
    )
    clock.now += 2.0
    stream.expire()
    stream.received(b'{"jsonrpc":"2.0","id":2,"result":1}')
    stream.sent(b'{"jsonrpc":"2.0","id":2,"method":"a"}')
    stream.close()


def run_memory(results: Results, closed: int, open_: int) -> None:
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    section = "memory"

    # Closed batches: single requests answered on one stream channel, full channel path.
    channel = pairwatch.open_channel(transport="bench", meter_provider=provider, spans=False)

    def cycle(start: int, count: int) -> None:
        for i in range(start, start + count):
            channel.sent(b'{"jsonrpc":"2.0","id":%d,"method":"eth_call","params":[]}' % i)
            channel.received(b'{"jsonrpc":"2.0","id":%d,"result":"0x1"}' % i)

    cycle(0, 10_000)  # warm-up: caches, label sets, method names
    _settle()
    rss0 = _rss()
    # tracemalloc slows every allocation several times: RSS covers all batches, tracemalloc
    # the last tenth (exact growth in bytes, steady state).
    traced_part = min(max(closed // 10, 10_000), closed)
    t0 = time.perf_counter()
    cycle(10_000, closed - traced_part)
    elapsed = time.perf_counter() - t0
    _settle()
    tracemalloc.start()
    cycle(10_000 + closed - traced_part, traced_part)
    _settle()
    traced = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    rss = _rss() - rss0
    results.add(
        Row(
            section,
            f"growth after {closed:,} closed batches",
            "B/batch",
            [traced / traced_part],
            CLOSED_TARGET_B,
            f"RSS +{rss / 1024:,.0f} KiB over all; tracemalloc +{traced / 1024:,.1f} KiB over "
            f"the last {traced_part:,} ({elapsed / (closed - traced_part) * 1e6:.0f} µs/batch)",
        )
    )

    # Open batches: never answered, closed by their timeout.
    _see_trouble(provider)
    for per_batch in (1, 10):
        clock = _Clock()
        batches = open_ // per_batch
        stream = pairwatch.open_channel(
            transport="bench",
            meter_provider=provider,
            spans=False,
            clock=clock,
            timeout=30.0,
            max_open_batches=batches + 1,
            max_pending_ids=open_ + 1,
        )
        bodies = [
            json.dumps(
                [
                    {"jsonrpc": "2.0", "id": b * per_batch + j, "method": "eth_call", "params": []}
                    for j in range(per_batch)
                ]
                if per_batch > 1
                else {"jsonrpc": "2.0", "id": b, "method": "eth_call", "params": []}
            ).encode()
            for b in range(batches)
        ]
        _settle()
        rss0 = _rss()
        tracemalloc.start()
        for raw in bodies:
            stream.sent(raw)
        _settle()
        held = tracemalloc.get_traced_memory()[0]
        rss_held = _rss() - rss0
        pending = stream.ledger.pending_ids
        clock.now += 31.0
        stream.expire()
        _settle()
        left = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        results.add(
            Row(
                section,
                f"{pending:,} ids pending in {batches:,} open batches of {per_batch}",
                "B/id",
                [held / max(pending, 1)],
                PENDING_TARGET_B,
                f"tracemalloc +{held / 1024:,.0f} KiB, RSS +{rss_held / 1024:,.0f} KiB; "
                f"after the timeout {stream.ledger.pending_ids} pending, "
                f"+{left / 1024:,.1f} KiB left",
            )
        )
        del bodies, stream

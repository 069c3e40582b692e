"""Where the floor is: pairwatch's own work per exchange, next to the client's own decode.

Why: on a loopback server the round trip is a few hundred microseconds, so a ratio target
of 1.10 leaves pairwatch tens of microseconds per exchange, some of which the integration
spends reading the library's objects.  This section takes HTTP and the integration away:
the exact calls an HTTP integration makes for one buffered exchange (classify the request,
open the exchange, show it the whole reply, deferred telemetry flushed in the block), against what a
client does anyway with the same reply, ``json.loads`` (what ``.json()`` costs).  The
ratio says how many client decodes pairwatch's books cost; the µs are what any
integration adds on top of its own wrapper.
"""

from __future__ import annotations

import json
import statistics

from _common import Results, Row, interleaved
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from pairwatch.channel import Options
from pairwatch.integrations._kit.request import Exchange, request_payload
from pairwatch.pairing import wire


def run_floor(results: Results, sizes: tuple[int, ...], repeats: int, per_block: int) -> None:
    options = Options(
        meter_provider=MeterProvider(metric_readers=[InMemoryMetricReader()]), spans=False
    )
    for size in sizes:
        if size == 1:
            sent = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [1]})
            reply = json.dumps({"jsonrpc": "2.0", "id": 1, "result": [1]})
        else:
            sent = json.dumps(
                [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in range(size)]
            )
            reply = json.dumps([{"jsonrpc": "2.0", "id": i, "result": [i]} for i in range(size)])
        sent_b, reply_b = sent.encode(), reply.encode()

        def decode(k: int, reply_b: bytes = reply_b) -> None:
            for _ in range(k):
                json.loads(reply_b)

        def books(k: int, sent_b: bytes = sent_b, reply_b: bytes = reply_b) -> None:
            for _ in range(k):
                # As the HTTP integrations run a buffered exchange: the request classified by
                # its one typed decode, the exchange opened (its one batch kept alone), then
                # the whole reply as httpx and requests show it.
                payload = request_payload(sent_b)
                assert payload is not None
                exchange = Exchange.open(payload, options, "bench", "127.0.0.1:8545", sent_b)
                exchange.whole(reply_b, "application/json", False)

        def parse(k: int, reply_b: bytes = reply_b) -> None:
            for _ in range(k):
                wire.parse(reply_b, wire.Kind.RESULT)

        block = max(5, per_block // max(1, size // 10))
        timings = interleaved({"bare": decode, "books": books, "parse": parse}, repeats, block)
        section = f"floor, {size}-request exchange in-process (no HTTP)"
        decode_us = statistics.median(w for w, _ in timings["bare"]) * 1e6
        books_us = [w * 1e6 for w, _ in timings["books"]]
        parse_us = statistics.median(w for w, _ in timings["parse"]) * 1e6
        results.add(
            Row(
                section,
                "pairwatch per exchange (channel, books, metrics)",
                "µs",
                books_us,
                None,
                f"the client's json.loads of the reply {decode_us:.1f} µs; pairwatch's decode "
                f"of the reply alone {parse_us:.1f} µs",
                gated=False,
            )
        )
        results.add(
            Row(
                section,
                "pairwatch per exchange / the client's own decode",
                "x",
                [b / d for (b, _), (d, _) in zip(timings["books"], timings["bare"], strict=True)],
                None,
                "below 1: pairwatch costs less than the .json() every client already pays",
            )
        )

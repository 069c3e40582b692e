"""A stream channel's per-request cost with many requests outstanding.

Why: on a websocket or stdio session every open request stays in the channel's books until
it is answered or times out.  A slow server can leave tens of thousands outstanding; the
cost of each new request must not grow with them (it once did: 58x at 50,000).  Each
variant is its own channel holding ``n`` unanswered single requests; the timed loop sends
and answers fresh single requests on it, full channel path (decode, books, telemetry).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from _common import Results, Row, interleaved
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import pairwatch

SCALING_TARGET = 1.2


def run_stream(results: Results, outstanding: Sequence[int], repeats: int, per_block: int) -> None:
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    largest = max(outstanding)
    pool = per_block * (repeats + 2)  # fresh ids for every timed call, encoded up front
    requests = [
        b'{"jsonrpc":"2.0","id":%d,"method":"eth_call","params":[]}' % i for i in range(pool)
    ]
    replies = [b'{"jsonrpc":"2.0","id":%d,"result":"0x1"}' % i for i in range(pool)]

    def make(n: int) -> Callable[[int], object]:
        channel = pairwatch.open_channel(
            transport="bench",
            meter_provider=provider,
            spans=False,
            timeout=3600.0,
            max_open_batches=largest + pool + 16,
            max_pending_ids=largest + pool + 16,
        )
        for i in range(n):  # never answered: they stay outstanding for the whole run
            channel.sent(b'{"jsonrpc":"2.0","id":"held-%d","method":"eth_call"}' % i)
        cursor = [0]

        def run(k: int) -> None:
            start = cursor[0]
            cursor[0] = start + k
            sent, received = channel.sent, channel.received
            for i in range(start, start + k):
                sent(requests[i % pool])
                received(replies[i % pool])

        return run

    variants = {f"{n:,}": make(n) for n in outstanding}
    base = f"{min(outstanding):,}"
    timings = interleaved(variants, repeats, per_block)
    section = "stream channel, single requests"
    base_us = sorted(w * 1e6 for w, _ in timings[base])
    for n in outstanding:
        name = f"{n:,}"
        if name == base:
            continue
        per = sorted(w * 1e6 for w, _ in timings[name])
        results.add(
            Row(
                section,
                f"per-request cost at {name} outstanding vs {base}",
                "x",
                [w / b for (w, _), (b, _) in zip(timings[name], timings[base], strict=True)],
                SCALING_TARGET,
                f"{base} outstanding {base_us[len(base_us) // 2]:.1f} µs, "
                f"{name} outstanding {per[len(per) // 2]:.1f} µs per request",
            )
        )

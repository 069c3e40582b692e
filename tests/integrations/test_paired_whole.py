"""A batch that pairs whole is recorded from its quick record, with the same numbers.

With spans off and nothing else reading a ``Batch`` (no ``on_batch_closed`` hook, no
captured payloads), an HTTP exchange that paired whole, in order and in time, queues its
metrics from the quick record instead of building a ``Batch``.  A hook makes the same
exchanges take the ``Batch`` path: every exported series must come out identical.  The
clock steps by a fixed amount per reading, so the latencies are the same in both runs.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from http_drivers import SCRIPTS
from opentelemetry.sdk.metrics.export import HistogramDataPoint
from otel_support import Otel

import pairwatch


class StepClock:
    """Each reading is 2 ms after the one before."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        self.now += 0.002
        return self.now


def _request(ids: list[int], methods: str) -> bytes:
    return json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": m} for i, m in zip(ids, methods, strict=True)]
    ).encode()


def _reply(ids: list[int]) -> bytes:
    return json.dumps([{"jsonrpc": "2.0", "id": i, "result": i} for i in ids]).encode()


SINGLE = b'{"jsonrpc":"2.0","id":7,"method":"a"}'
EXCHANGES = {
    "/whole-single": (SINGLE, b'{"jsonrpc":"2.0","id":7,"result":"x"}'),
    "/whole-batch": (_request([1, 2, 3], "aaa"), _reply([1, 2, 3])),
    "/whole-mixed": (_request([1, 2, 3], "abc"), _reply([1, 2, 3])),
    "/whole-partial": (_request([1, 2], "aa"), _reply([1])),  # not whole: the ledger's path
}


def _series(otel: Otel) -> dict[tuple[str, tuple[tuple[str, Any], ...]], Any]:
    found = {}
    for name, attrs, point in otel.collect():
        key = (name, tuple(sorted(attrs.items())))
        if isinstance(point, HistogramDataPoint):
            found[key] = (point.count, round(point.sum, 9), tuple(point.bucket_counts))
        else:
            found[key] = point.value
    return found


def _run(url: str, hook: Any) -> Otel:
    otel = Otel()
    client = pairwatch.instrument(
        httpx.Client(timeout=5),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        spans=False,
        clock=StepClock(),
        on_batch_closed=hook,
    )
    with client:
        for _ in range(2):
            for path, (request, reply) in EXCHANGES.items():
                assert client.post(url + path, content=request).content == reply
    return otel


def test_quick_records_export_what_batches_export(scripted):
    for path, (_, reply) in EXCHANGES.items():
        SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [reply], False)
    closed: list[Any] = []
    quick = _run(scripted, None)
    batches = _run(scripted, closed.append)
    assert len(closed) == 8  # the hook saw every batch: that run took the Batch path
    assert _series(quick) == _series(batches)
    assert quick.counters() == {
        "batch.requests": 18,
        "batch.closed": 8,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 2,
    }
    assert quick.value("batch.closed", pairwatch__diagnosis="ok") == 6
    # Sent, then received: one step, whichever books pair the reply (the ledger judges a
    # reply the quick record declined at the same clock reading).
    assert quick.hist("batch.pair_latency") == (16, pytest.approx(16 * 0.002))
    assert quick.hist("batch.pair_latency", rpc__method="b") == (2, pytest.approx(2 * 0.002))
    assert quick.hist("batch.size") == (8, 2 * (1 + 3 + 3 + 2))

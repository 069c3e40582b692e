"""An HTTP exchange's books, its one batch kept alone or queued: the same numbers.

Each scenario drives the same calls on an :class:`Exchange` (a whole body, a tap cut short,
a close), at the same fake-clock times, once as every exchange runs and once with the batch
queued and indexed from the start (``ledger.ALONE`` off): every closed batch handed to
``on_batch_closed``, every exported point and every span must be identical.  Three option
sets: spans off without a hook, spans on, and a hook.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch.integrations._kit.request import Exchange
from pairwatch.options import Options
from pairwatch.pairing import ledger, wire
from pairwatch.pairing.limits import process_budget


def _requests(*ids: Any, batch: bool = True) -> bytes:
    elements = [{"jsonrpc": "2.0", "id": i, "method": "eth_call"} for i in ids]
    return json.dumps(elements if batch else elements[0]).encode()


def _results(*ids: Any, batch: bool = True) -> bytes:
    elements = [{"jsonrpc": "2.0", "id": i, "result": "0x7"} for i in ids]
    return json.dumps(elements if batch else elements[0]).encode()


JSON = "application/json"
Step = tuple[Any, ...]
# ("whole", body, content type, elsewhere), ("close", reason), ("tick", seconds),
# ("tap_dropped", content type): a tap that sees the body cut short.
SCENARIOS: dict[str, tuple[bytes, float | None, list[Step]]] = {
    "healthy_batch": (_requests(1, 2, 3), 5.0, [("tick", 0.01), ("whole", _results(1, 2, 3))]),
    "healthy_single": (_requests(7, batch=False), None,
                       [("tick", 0.2), ("whole", _results(7, batch=False))]),
    "read_timeout_forever": (_requests(1), float("inf"), [("tick", 0.2), ("whole", _results(1))]),
    "postponed_by_the_read": (_requests(1, 2), 1.0, [("tick", 3.0), ("whole", _results(1, 2))]),
    "reordered": (_requests(1, 2, 3), 5.0, [("tick", 0.01), ("whole", _results(3, 1, 2))]),
    "dropped": (_requests(1, 2, 3), 5.0, [("tick", 0.01), ("whole", _results(1, 3))]),
    "unknown_id": (_requests(1, 2), 5.0, [("whole", _results(1, 9))]),
    "error_reply": (_requests(1, 2), 5.0, [("whole", json.dumps([
        {"jsonrpc": "2.0", "id": 1, "result": 1},
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "no"}}]).encode())]),
    "unparseable": (_requests(1), 5.0, [("whole", b"<html>", "text/html")]),
    "empty_body": (_requests(1), 5.0, [("whole", b"")]),
    "event_stream": (_requests(1), 5.0, [("whole", b'data: {"jsonrpc":"2.0","id":1,"result":1}\n\n',
                                          "text/event-stream")]),
    "answered_elsewhere": (_requests(1, 2), 5.0, [("whole", b"", None, True)]),
    "send_failed": (_requests(1, 2), 5.0, [("tick", 0.3), ("close", "send_failed")]),
    "read_cut_short": (_requests(1, 2), 5.0, [("tick", 0.3), ("tap_dropped", JSON)]),
    "closed_twice": (_requests(1), 5.0, [("whole", _results(1)), ("close", "closed")]),
    "repeated_ids": (_requests(1, 1), 5.0, [("whole", _results(1, 1))]),
    "over_the_cap": (_requests(*range(6)), 5.0, [("whole", _results(*range(6)))]),
}  # fmt: skip


OPTION_SETS = {
    "spans_off": {"spans": False, "hook": False},
    "spans_on": {"spans": True, "hook": False},
    "hook": {"spans": True, "hook": True},
}


def _run(name: str, option_set: str, alone: bool) -> tuple[list[dict[str, Any]], Otel]:
    ledger.ALONE = alone
    body, read_timeout, steps = SCENARIOS[name]
    otel, clock = Otel(), FakeClock()
    closed: list[dict[str, Any]] = []
    settings = OPTION_SETS[option_set]
    options = Options(
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        clock=clock,
        max_pending_ids=4,
        spans=settings["spans"],
        on_batch_closed=(lambda b: closed.append(_fields(b))) if settings["hook"] else None,
    )
    payload = wire.parse(body, wire.Kind.REQUEST)
    exchange = Exchange.open(payload, options, "httpx", "h", body, read_timeout)
    for step in steps:
        op, *args = step
        if op == "tick":
            clock.advance(args[0])
        elif op == "whole":
            content_type = args[1] if len(args) > 1 else JSON
            exchange.whole(args[0], content_type, len(args) > 2 and args[2])
        elif op == "close":
            exchange.close(args[0])
        elif op == "tap_dropped":
            exchange.tap(args[0], None).dropped()
    pairwatch.flush()
    ledger.ALONE = True
    return closed, otel


def _fields(batch: Any) -> dict[str, Any]:
    names = (
        "size", "keys", "received", "sent_at", "deadline", "closed_at", "close_reason",
        "diagnosis", "paired", "missing", "unknown", "out_of_order", "evicted_from",
    )  # fmt: skip
    return {name: getattr(batch, name) for name in names}


@pytest.mark.parametrize("option_set", sorted(OPTION_SETS))
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_an_exchange_counts_alike_whichever_way_its_batch_is_kept(name, option_set):
    held = process_budget().used  # what other tests' open channels still hold
    alone_batches, alone = _run(name, option_set, alone=True)
    queued_batches, queued = _run(name, option_set, alone=False)
    assert alone_batches == queued_batches
    assert alone.points() == queued.points()
    assert alone.span_shapes() == queued.span_shapes()
    assert process_budget().used == held  # every id given back either way


@pytest.mark.parametrize(
    ("name", "closed", "missing", "diagnosis"),
    [
        ("healthy_batch", 1, 0, "ok"),
        ("postponed_by_the_read", 1, 0, "ok"),
        ("dropped", 1, 1, "responses_missing"),
        ("send_failed", 1, 2, "responses_missing"),
        ("closed_twice", 1, 0, "ok"),
        ("answered_elsewhere", 0, 0, None),
    ],
)
def test_exact_numbers(name, closed, missing, diagnosis):
    _, otel = _run(name, "spans_off", alone=True)
    assert otel.value("batch.closed") == closed
    assert otel.value("batch.missing_response") == missing
    if diagnosis is not None:
        assert otel.value("batch.closed", pairwatch__diagnosis=diagnosis) == 1

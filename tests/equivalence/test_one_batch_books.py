"""A channel keeps its one healthy open batch alone; with several, a deadline queue and a
table of pending ids.  Both ways must count the same, in every case, healthy or not.

Each scenario drives the same calls, at the same fake-clock times, through two channels:
one as every channel runs, one with the batch kept alone switched off (``ledger.ALONE``,
the one thing in this file that is not what a user runs), so that it is queued and indexed
from the start.  What a user reads must be identical: every closed batch handed to
``on_batch_closed``, every exported counter and histogram point, every span.  The scenarios
cover the healthy path and each way out of it (a reorder, a drop, an error, an unknown id,
an extra reply after the whole batch paired, a reply past the deadline, a postponed
deadline, a withdraw, a sweep, a second batch, repeated ids, a batch over the caps).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from batch_fields import batch_fields
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch.channel import Channel
from pairwatch.options import Options
from pairwatch.pairing import ledger, wire
from pairwatch.pairing.limits import process_budget


def _requests(*ids: Any, batch: bool = True) -> bytes:
    elements = [{"jsonrpc": "2.0", "id": i, "method": "eth_call", "params": [i]} for i in ids]
    return json.dumps(elements if batch else elements[0]).encode()


def _results(*ids: Any, batch: bool = True) -> bytes:
    elements = [{"jsonrpc": "2.0", "id": i, "result": hex(7)} for i in ids]
    return json.dumps(elements if batch else elements[0]).encode()


ERROR = json.dumps(
    [
        {"jsonrpc": "2.0", "id": 1, "result": 1},
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "no"}},
    ]
).encode()

Step = tuple[Any, ...]
SCENARIOS: dict[str, list[Step]] = {
    "healthy_batch": [("sent", _requests(1, 2, 3), 5.0), ("tick", 0.01),
                      ("received", _results(1, 2, 3)), ("close", "body_end")],
    "healthy_single": [("sent", _requests(7, batch=False), 5.0), ("tick", 0.2),
                       ("received", _results(7, batch=False)), ("close", "body_end")],
    "healthy_string_ids": [("sent", _requests("a", "b"), None), ("tick", 0.01),
                           ("received", _results("a", "b")), ("close", "body_end")],
    "reordered": [("sent", _requests(1, 2, 3), 5.0), ("tick", 0.01),
                  ("received", _results(3, 1, 2)), ("close", "body_end")],
    "dropped": [("sent", _requests(1, 2, 3), 5.0), ("tick", 0.01),
                ("received", _results(1, 3)), ("close", "body_end")],
    "error_reply": [("sent", _requests(1, 2), 5.0), ("tick", 0.01),
                    ("received", ERROR), ("close", "body_end")],
    "unknown_id": [("sent", _requests(1, 2), 5.0), ("tick", 0.01),
                   ("received", _results(1, 9)), ("close", "body_end")],
    "retyped_id": [("sent", _requests(0, batch=False), 5.0), ("tick", 0.01),
                   ("received", _results("0", batch=False)), ("close", "body_end")],
    "single_reply_to_batch": [("sent", _requests(1), 5.0), ("tick", 0.01),
                              ("received", _results(1, batch=False)), ("close", "body_end")],
    "extra_after_complete": [("sent", _requests(1, 2), 5.0), ("tick", 0.01),
                             ("received", _results(1, 2)), ("tick", 0.01),
                             ("received", _results(2, batch=False)), ("close", "stream_end")],
    "past_deadline": [("sent", _requests(1, 2), 1.0), ("tick", 2.0),
                      ("received", _results(1, 2)), ("close", "body_end")],
    "postponed_in_time": [("sent", _requests(1, 2), 1.0), ("tick", 0.8), ("postpone", 1.0),
                          ("tick", 0.8), ("received", _results(1, 2)), ("close", "body_end")],
    "postponed_too_late": [("sent", _requests(1, 2), 1.0), ("tick", 0.8), ("postpone", 1.0),
                           ("tick", 1.5), ("received", _results(1, 2)), ("close", "body_end")],
    "nothing_came": [("sent", _requests(1, 2), 5.0), ("tick", 0.5), ("close", "stream_dropped")],
    "send_failed": [("sent", _requests(1, batch=False), 5.0), ("close", "send_failed")],
    "withdrawn": [("sent", _requests(1, 2), 5.0), ("withdraw",), ("close", "body_end")],
    "withdrawn_after_reply": [("sent", _requests(1), 5.0), ("received", _results(1)),
                              ("withdraw",), ("close", "body_end")],
    "swept_before_reply": [("sent", _requests(1, 2), 1.0), ("tick", 0.5), ("expire",),
                           ("tick", 1.0), ("expire",), ("received", _results(1, 2)),
                           ("close", "body_end")],
    "swept_after_reply": [("sent", _requests(1), 1.0), ("received", _results(1)),
                          ("tick", 2.0), ("expire",), ("close", "body_end")],
    "second_batch": [("sent", _requests(1), 5.0), ("received", _results(1)),
                     ("sent", _requests(2), 5.0), ("received", _results(2)),
                     ("close", "body_end")],
    "repeated_ids": [("sent", _requests(1, 1), 5.0), ("received", _results(1, 1)),
                     ("close", "body_end")],
    "notification_inside": [("sent", json.dumps([
        {"jsonrpc": "2.0", "method": "note"},
        {"jsonrpc": "2.0", "id": 1, "method": "eth_call"}]).encode(), 5.0),
        ("received", _results(1)), ("close", "body_end")],
    "empty_batch": [("sent", b"[]", 5.0), ("received", json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "x"}}).encode()),
        ("close", "body_end")],
    "unparseable_reply": [("sent", _requests(1), 5.0), ("received", b"<html>"),
                          ("close", "body_end")],
    "over_the_channel_cap": [("sent", _requests(*range(6)), 5.0),
                             ("received", _results(*range(6))), ("close", "body_end")],
}  # fmt: skip


def _run(steps: list[Step], alone: bool) -> tuple[list[dict[str, Any]], Otel]:
    ledger.ALONE = alone
    otel, clock = Otel(), FakeClock()
    closed: list[dict[str, Any]] = []
    options = Options(
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        clock=clock,
        max_pending_ids=4,
        on_batch_closed=lambda b: closed.append(_fields(b)),
    )
    channel = Channel(
        transport="http", integration="httpx", server_address="h", bound=True, options=options
    )
    for step in steps:
        op, *args = step
        if op == "sent":
            channel.sent_parsed(wire.parse(args[0], wire.Kind.REQUEST), args[0], args[1])
        elif op == "received":
            channel.received_parsed(wire.parse(args[0], wire.Kind.RESULT), args[0])
        elif op == "tick":
            clock.advance(args[0])
        elif op == "postpone":
            channel.postpone(args[0])
        elif op == "close":
            channel.close(args[0])
        elif op == "withdraw":
            channel.withdraw()
        elif op == "expire":
            channel.expire()
    pairwatch.flush()
    ledger.ALONE = True
    return closed, otel


_FIELDS = (
    "is_batch", "size", "keys", "methods", "received", "sent_at", "deadline",
    "closed_at", "close_reason", "diagnosis", "paired", "missing", "unknown", "null",
    "notifications", "invalid", "invalid_requests", "violations", "out_of_order",
    "count_mismatch", "type_mismatch", "duplicates_in", "duplicates_cross", "evicted_from",
    "error_codes", "late", "reused_timed_out", "expected_nothing", "unknown_keys",
)  # fmt: skip


def _fields(batch: Any) -> dict[str, Any]:
    return batch_fields(batch, _FIELDS)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_batch_kept_alone_counts_what_a_queued_one_counts(scenario: str) -> None:
    held = process_budget().used  # what other tests' open channels still hold
    alone_batches, alone_otel = _run(SCENARIOS[scenario], alone=True)
    queued_batches, queued_otel = _run(SCENARIOS[scenario], alone=False)
    assert alone_batches == queued_batches
    assert alone_otel.points() == queued_otel.points()
    assert alone_otel.span_shapes() == queued_otel.span_shapes()
    assert process_budget().used == held  # every id given back, whichever way it was kept


def test_healthy_exchange_exact_numbers() -> None:
    closed, otel = _run(SCENARIOS["healthy_batch"], alone=True)
    assert [(b["close_reason"], b["diagnosis"], b["paired"], b["missing"]) for b in closed] == [
        ("body_end", "ok", 3, 0)
    ]
    assert otel.value("batch.requests") == 3
    assert (
        otel.value("batch.closed", pairwatch__diagnosis="ok", pairwatch__close_reason="body_end")
        == 1
    )
    count, total = otel.hist("batch.pair_latency")
    assert count == 3
    assert total == pytest.approx(0.03)
    assert len([s for s in otel.spans() if s.parent is not None]) == 3


def test_a_budget_that_cannot_fit_evicts_either_way() -> None:
    budget = process_budget()
    held = budget.take(budget.limit - budget.used - 1)  # one id of room left in the process
    try:
        alone_batches, _ = _run(SCENARIOS["healthy_batch"], alone=True)
        queued_batches, _ = _run(SCENARIOS["healthy_batch"], alone=False)
    finally:
        budget.release(held)
    assert alone_batches == queued_batches
    assert [(b["evicted_from"], b["missing"], b["unknown"]) for b in alone_batches] == [(1, 2, 2)]


def test_a_healthy_exchange_builds_no_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of keeping one batch alone (its cost is in benchmarks/run.py): a spy
    counts the tables of pending ids built, which only scenarios off the healthy path need."""
    built: list[object] = []

    class Spy(ledger.PendingTable):
        def __init__(self) -> None:
            built.append(self)
            super().__init__()

    monkeypatch.setattr(ledger, "PendingTable", Spy)
    for name in ("healthy_batch", "healthy_single", "healthy_string_ids", "postponed_in_time"):
        _run(SCENARIOS[name], alone=True)
    assert built == []
    _run(SCENARIOS["reordered"], alone=True)
    assert len(built) == 1

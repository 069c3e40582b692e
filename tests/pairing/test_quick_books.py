"""An HTTP exchange keeps quick books (no ledger) while it is healthy: it must count exactly
what the ledger counts, in every case, healthy or not.

Each scenario drives the same calls, at the same fake-clock times, through two exchanges:
one opened as the HTTP integrations open theirs (``quick=True``), one with a ledger from
the start.  What a user reads must be identical: every closed batch handed to
``on_batch_closed``, every exported counter and histogram point, every span.  The scenarios
cover the healthy path and each way out of it (a reorder, a drop, an error, an unknown id,
an extra reply after the whole batch paired, a reply past the deadline, a postponed
deadline, a withdraw, a sweep, a second batch, repeated ids, a batch over the caps).
Separately: the healthy path gives exact numbers of its own, and a budget it cannot fit
falls back to eviction as before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch.channel import Channel
from pairwatch.options import Options
from pairwatch.pairing import wire
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


def _run(steps: list[Step], quick: bool) -> tuple[list[dict[str, Any]], Otel]:
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
        transport="http", integration="httpx", server_address="h", bound=True,
        options=options, quick=quick,
    )  # fmt: skip
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
    return closed, otel


_FIELDS = (
    "is_batch", "size", "keys", "methods", "received", "sent_at", "deadline",
    "closed_at", "close_reason", "diagnosis", "paired", "missing", "unknown", "null",
    "notifications", "invalid", "invalid_requests", "violations", "out_of_order",
    "count_mismatch", "type_mismatch", "duplicates_in", "duplicates_cross", "evicted_from",
    "error_codes", "late", "reused_timed_out", "expected_nothing", "unknown_keys",
)  # fmt: skip


def _fields(batch: Any) -> dict[str, Any]:
    return {name: getattr(batch, name) for name in _FIELDS}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_quick_books_count_what_the_ledger_counts(scenario: str) -> None:
    held = process_budget().used  # what other tests' open channels still hold
    quick_batches, quick_otel = _run(SCENARIOS[scenario], quick=True)
    ledger_batches, ledger_otel = _run(SCENARIOS[scenario], quick=False)
    assert quick_batches == ledger_batches
    assert quick_otel.points() == ledger_otel.points()
    assert quick_otel.span_shapes() == ledger_otel.span_shapes()
    assert process_budget().used == held  # every id given back, whichever books held it


def test_healthy_exchange_exact_numbers() -> None:
    closed, otel = _run(SCENARIOS["healthy_batch"], quick=True)
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


def test_a_budget_that_cannot_fit_evicts_as_the_ledger_does() -> None:
    budget = process_budget()
    held = budget.take(budget.limit - budget.used - 1)  # one id of room left in the process
    try:
        quick_batches, _ = _run(SCENARIOS["healthy_batch"], quick=True)
        ledger_batches, _ = _run(SCENARIOS["healthy_batch"], quick=False)
    finally:
        budget.release(held)
    assert quick_batches == ledger_batches
    assert [(b["evicted_from"], b["missing"], b["unknown"]) for b in quick_batches] == [(1, 2, 2)]


def test_a_healthy_exchange_builds_no_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The point of the quick books (their cost is in benchmarks/run.py): a spy counts the
    ledgers built, which only the scenarios that leave the healthy path need."""
    import pairwatch.channel as channel_module

    built: list[object] = []

    class Spy(channel_module.Ledger):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            built.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(channel_module, "Ledger", Spy)
    for name in ("healthy_batch", "healthy_single", "healthy_string_ids", "postponed_in_time"):
        _run(SCENARIOS[name], quick=True)
    assert built == []
    _run(SCENARIOS["reordered"], quick=True)
    assert len(built) == 1

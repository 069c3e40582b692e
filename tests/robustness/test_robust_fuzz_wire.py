"""Fuzzing the wire layer and the ledger: never raises, classification is total, books balance.

Short in CI; ``PAIRWATCH_FUZZ_EXAMPLES=100000`` runs a long campaign (see the README).
"""

from __future__ import annotations

import json
from typing import Any

from fuzz_strategies import documents, fuzz_settings, json_values, replies
from hypothesis import given
from hypothesis import strategies as st

from pairwatch.pairing import wire
from pairwatch.pairing.ledger import Ledger
from pairwatch.pairing.records import Batch, Tally

KINDS = {
    wire.Kind.REQUEST,
    wire.Kind.NOTIFICATION,
    wire.Kind.RESULT,
    wire.Kind.ERROR,
    wire.Kind.RESPONSE_INVALID,
    wire.Kind.INVALID,
}
STATES = {wire.IdState.ABSENT, wire.IdState.NULL, wire.IdState.VALID, wire.IdState.BAD_TYPE}
NOT_JSONRPC = {"not_an_object", "not_jsonrpc"}


def check_total(payload: wire.Payload) -> None:
    assert isinstance(payload, wire.Payload)
    if payload.unparseable is not None:
        assert payload.messages == ()
        assert payload.unparseable in {"empty", "not_json", "not_utf8", "too_deep", "undecodable"}
    for m in payload.messages:
        assert m.kind in KINDS
        assert m.id_state in STATES
        assert (m.key is not None) == (m.id_state == wire.IdState.VALID)
        assert m.key is None or type(m.key) in (int, float, str, wire.LongId)
        assert m.problem is None or isinstance(m.problem, str)


@fuzz_settings(200)
@given(replies)
def test_parse_bytes_never_raises_and_is_total(data):
    payload = wire.parse(data)
    check_total(payload)
    wire.sniff(data)
    try:
        value = json.loads(data.removeprefix(b"\xef\xbb\xbf").decode("utf-8"))
    except (ValueError, RecursionError):
        return
    if isinstance(value, list):
        assert payload.is_batch
        assert len(payload.messages) == len(value)


@fuzz_settings(300)
@given(json_values)
def test_parse_decoded_never_raises(value):
    check_total(wire.parse(value))
    check_total(wire.parse(json.dumps(value, allow_nan=True)))


class Books:
    """A sink that adds up what every closed batch and every stray tally reported."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.strays: list[Tally] = []

    def batch_closed(self, batch: Batch) -> None:
        self.batches.append(batch)

    def stray(self, batch: Batch | None, tally: Tally) -> None:
        self.strays.append(tally)

    def total(self, field: str) -> int:
        return sum(getattr(b, field) for b in self.batches) + sum(
            getattr(t, field, 0)
            for t in self.strays  # a stray tally pairs nothing
        )

    def invalid(self, reasons: set[str]) -> int:
        n = 0
        for d in [b.invalid for b in self.batches] + [t.invalid for t in self.strays]:
            n += sum(v for k, v in (d or {}).items() if k in reasons)
        return n


ops = st.lists(st.tuples(st.sampled_from(["sent", "received", "close"]), documents), max_size=12)


@fuzz_settings(100)
@given(ops, st.booleans())
def test_ledger_books_balance_under_arbitrary_traffic(script: list[tuple[str, Any]], bound):
    books = Books()
    now = [0.0]
    ledger = Ledger(books, clock=lambda: now[0], bound=bound)
    responses = invalid_only = 0
    for op, doc in script:
        now[0] += 0.5
        payload = wire.parse(doc)
        if op == "sent":
            ledger.sent(payload)
        elif op == "received":
            held = ledger.held is not None
            ledger.received(payload)
            if held and not wire.shows_jsonrpc(payload):
                continue  # a reply to [] that is not JSON-RPC counts nothing (DESIGN)
            responses += sum(m.kind in wire.RESPONSE_KINDS for m in payload.messages)
            invalid_only += sum(m.kind == wire.Kind.INVALID for m in payload.messages)
        else:
            ledger.close("stream_end")
    ledger.close("stream_end")
    assert ledger.open_batches == 0
    assert ledger.pending_ids == 0
    for batch in books.batches:  # paired + missing == requests, per batch
        assert batch.paired + batch.missing == len(batch.keys)
        assert batch.paired == sum(r is not None for r in batch.received)
    # Every received response is paired, unknown-id or null-id exactly once; elements that
    # are not JSON-RPC at all are invalid, and nothing else.
    assert books.total("paired") + books.total("unknown") + books.total("null") == responses
    assert books.invalid(NOT_JSONRPC) == invalid_only

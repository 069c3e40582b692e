"""The empty batch ``[]``: held until its reply shows JSON-RPC, and the structural sniff."""

from __future__ import annotations

import pytest
from jsonrpc_build import dumps, err, req, res
from ledger_books import books, counts, numbers

from pairwatch.pairing import diagnosis, wire


def test_spec_reply_to_empty_batch_is_a_null_id_response_not_a_violation():
    b = books(bound=True)
    batch = b.sent([])
    assert b.sink.closed == []  # held: nothing counted before the reply shows JSON-RPC
    b.received(err(None, -32600, "Invalid Request"))
    assert b.sink.only() is batch
    assert counts(batch) == numbers(null=1)
    assert batch.invalid_requests == {"empty_batch": 1}
    assert batch.violations is None
    assert (batch.size, batch.is_batch, batch.close_reason) == (0, True, "complete")
    assert batch.diagnosis == diagnosis.MALFORMED_REQUEST
    assert diagnosis.evidence(batch) == "1 reply with id null answered an empty batch []"
    b.close()
    assert len(b.sink.closed) == 1
    assert b.sink.strays == []


@pytest.mark.parametrize(
    ("reply", "violation", "null", "unknown"),
    [
        ([err(None, -32600, "Invalid Request")], "reply_to_empty_batch", 1, 0),  # an array
        (res(None, "x"), "reply_to_empty_batch", 1, 0),  # a result, not an error
        (res(3), "reply_to_empty_batch", 0, 1),
    ],
)
def test_other_jsonrpc_replies_to_empty_batch_are_violations(reply, violation, null, unknown):
    b = books(bound=True)
    b.sent([])
    b.received(reply)
    batch = b.sink.only()
    assert batch.violations == {violation: 1}
    assert (batch.null, batch.unknown) == (null, unknown)


@pytest.mark.parametrize(
    "reply",
    [
        b"[]",
        b'{"items": [], "total": 0}',
        b'{"id": 5, "name": "widget"}',  # REST objects have ids too
        b"<html>created</html>",
        b"",
    ],
)
def test_empty_batch_answered_by_something_else_counts_nothing(reply):
    # A REST endpoint that takes an empty list: not JSON-RPC traffic at all.
    b = books(bound=True)
    b.sent([])
    b.received(reply)
    b.close()
    assert b.sink.closed == []
    assert b.sink.strays == []


def test_empty_batch_without_any_reply_counts_nothing():
    b = books(bound=True)
    b.sent([])
    b.close("body_end")
    assert b.sink.closed == []
    assert b.sink.strays == []
    assert b.ledger.held is None


def test_empty_batch_on_a_stream_closes_at_once_and_its_reply_is_null_id():
    b = books()
    b.sent([])
    batch = b.sink.only()
    assert batch.close_reason == "no_response_expected"
    b.received(err(None, -32600, "Invalid Request"))
    ((stray_batch, tally),) = b.sink.strays
    assert stray_batch is None
    assert (tally.null, tally.unknown, tally.violations) == (1, 0, None)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (dumps(req(1)), True),
        (dumps([req(1), req(2)]), True),
        (dumps([5, req(1)]), True),  # a batch carrying an invalid element is still JSON-RPC
        (b"[]", True),
        (b" [ ]\n", True),
        ("\ufeff[]", True),
        (dumps(res(1)), True),
        (b'{"event":"client_ready","transport":"jsonrpc"}', False),
        (b'[{"event":"client_ready","transport":"jsonrpc"}]', False),
        (b'{"data": {"jsonrpc": "2.0"}}', False),  # nested deeper than an element
        (b"[1, 2, 3]", False),
        (b'{"jsonrpc" "2.0"}', False),  # not JSON
        (b"<html>jsonrpc</html>", False),
        (b"\x00\x01jsonrpc", False),
        (b"", False),
        (None, False),
    ],
)
def test_sniff_decides_by_structure(body, expected):
    assert wire.sniff(body) is expected


def test_the_stdlib_structure_check_is_the_msgspec_probe_s_reference():
    for text, expected in [
        ('{"event":"client_ready","transport":"jsonrpc"}', False),
        (dumps([5, req(1)]).decode(), True),
        ('{"jsonrpc": "2.0", "id": 1}', True),
        ('[{"a": 1}, {"jsonrpc": "2.0"}]', True),
        ("[1, 2]", False),
        ('{"jsonrpc" "2.0"}', False),
    ]:
        assert wire.structure_stdlib(text) is expected, text
        assert wire._probe(text) is expected, text


def test_is_jsonrpc_does_not_take_an_empty_array_as_proof():
    assert wire.is_jsonrpc(b"[]") is False
    assert wire.is_jsonrpc([]) is False
    assert wire.is_jsonrpc({"jsonrpc": "2.0", "id": None, "error": {}}) is True
    assert wire.is_jsonrpc([{"event": "x"}, {"jsonrpc": "2.0"}]) is True


def test_sniff_rejects_a_big_body_without_the_word_before_decoding(monkeypatch):
    def refuse(text: str) -> bool:
        raise AssertionError("decoded a body that cannot be JSON-RPC")

    monkeypatch.setattr(wire, "_structure", refuse)
    big = b"[" + b",".join(b'{"k": %d}' % i for i in range(50_000)) + b"]"
    assert wire.sniff(big) is False
    assert wire.sniff(b"<html>" + b"x" * 1_000_000) is False


def test_empty_batch_whose_exchange_moves_on_counts_nothing():
    b = books(bound=True)
    b.sent([])
    batch = b.sent([req(1)])  # the exchange sends again before any reply to []
    assert b.ledger.held is None
    b.received([res(1)])
    b.close()
    assert b.sink.only() is batch
    assert counts(batch) == numbers(requests=1, paired=1)
    assert batch.violations is None

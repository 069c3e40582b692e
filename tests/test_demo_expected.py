"""The demo's server-side reading of the pairing contract (pairwatch.cli.expected), case by case.

Each case is a request and the reply a faulty server wrote; the numbers are worked out by
hand from docs/metrics.md, so the demo's check column is itself checked.
"""

from __future__ import annotations

from pairwatch.chaos.faults import Element, Outgoing
from pairwatch.cli.expected import CHECKED, tally, tally_outgoing


def req(*ids):
    return [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [n]} for n, i in enumerate(ids)]


def ok(i, **extra):
    return {"jsonrpc": "2.0", "id": i, "result": i, **extra}


def moved(counts):
    """Only the counters a case moves, besides batch.closed and batch.requests."""
    assert set(counts) == set(CHECKED)
    assert counts["batch.closed"] == 1
    return {k: v for k, v in counts.items() if v and k not in ("batch.closed", "batch.requests")}


def test_a_healthy_reply_moves_nothing():
    counts = tally(req(1, 2, 3), [ok(1), ok(2), ok(3)], True)
    assert counts["batch.requests"] == 3
    assert moved(counts) == {}


def test_a_reordered_reply_is_one_out_of_order_batch():
    assert moved(tally(req(1, 2, 3), [ok(3), ok(1), ok(2)], True)) == {"batch.out_of_order": 1}


def test_a_duplicated_element_that_is_then_nulled_is_one_null_id_and_nothing_missing():
    reply = [ok(1), ok(None), ok(2), ok(3)]
    assert moved(tally(req(1, 2, 3), reply, True)) == {"batch.null_id_response": 1}


def test_a_duplicated_reply_is_one_unknown_id_and_a_count_mismatch():
    assert moved(tally(req(1, 2), [ok(1), ok(1), ok(2)], True)) == {
        "batch.unknown_id_response": 1,
        "batch.response_count_mismatch": 1,
    }


def test_an_id_echoed_as_another_json_type_is_unknown_and_missing():
    assert moved(tally(req(1, 2), [ok("1"), ok(2)], True)) == {
        "batch.unknown_id_response": 1,
        "batch.missing_response": 1,
    }


def test_numbers_compare_by_value():
    assert moved(tally(req(1, 2), [ok(1.0), ok(2)], True)) == {}


def test_a_client_reusing_an_id_is_counted_once_and_both_replies_pair():
    assert moved(tally(req(1, 2, 1), [ok(1), ok(2), ok(1)], True)) == {"batch.duplicate_id": 1}


def test_invalid_responses_still_pair_by_id():
    reply = [{"jsonrpc": "1.0", "id": 1, "result": 1}, ok(2, error={"code": 1, "message": "x"})]
    assert moved(tally(req(1, 2), reply, True)) == {"batch.invalid_response": 2}


def test_an_empty_array_and_one_object_for_a_batch_are_violations():
    assert moved(tally(req(1, 2), [], True)) == {
        "batch.protocol_violation": 1,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 1,
    }
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}}
    assert moved(tally(req(1, 2), error, False)) == {
        "batch.protocol_violation": 1,
        "batch.null_id_response": 1,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 1,
    }
    # Over an event stream every element is an event: one object shows no shape.
    assert "batch.protocol_violation" not in moved(tally(req(1, 2), error, False, sse=True))


def test_a_cut_stream_counts_the_events_read_whole():
    out = Outgoing([Element(ok(2)), Element(ok(1)), Element(ok(3))], as_array=True)
    out.cut_fraction, out.cut_events = 0.5, 2
    assert moved(tally_outgoing(req(1, 2, 3), out, sse=True)) == {
        "batch.out_of_order": 1,
        "batch.missing_response": 1,
        "batch.response_count_mismatch": 1,
    }
    # The same cut in a JSON body leaves nothing complete to read.
    assert moved(tally_outgoing(req(1, 2, 3), out, sse=False)) == {
        "batch.missing_response": 3,
        "batch.response_count_mismatch": 1,
    }


def test_a_garbage_body_is_one_invalid_response_that_answers_nothing():
    out = Outgoing([Element(ok(1))], as_array=True, raw=b"\xff<html>")
    assert moved(tally_outgoing(req(1), out, sse=False)) == {
        "batch.invalid_response": 1,
        "batch.missing_response": 1,
        "batch.response_count_mismatch": 1,
    }

"""Every row of the DESIGN table "blame from evidence", on the pure ledger, with exact numbers.

Each test states every number of the closed batch (anything not named is zero) and the words
of its evidence, so a diagnosis can only pass for the evidence that names it.  The first five
cases are the misattributions a user found in the old co-occurrence rule.
"""

from __future__ import annotations

from jsonrpc_build import err, note, req, res
from ledger_books import books, counts, numbers

from pairwatch.pairing import diagnosis


def test_server_re_addresses_one_reply_is_an_echo_fault_not_client_duplicates():
    # id 2 comes back as 999; no id was sent twice, so the client is not to blame.
    b = books(bound=True)
    b.sent([req(1), req(2), req(3)])
    b.received([res(1), res(999), res(3)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=3, paired=2, missing=1, unknown=1)
    assert batch.diagnosis == diagnosis.ID_ECHO_FAULT
    assert diagnosis.evidence(batch) == (
        "1 reply carried an id that matched no pending request (999); "
        "1 request of 3 closed without a reply (body_end)"
    )


def test_server_nulls_the_id_of_a_valid_request():
    b = books(bound=True)
    b.sent([req(1), req(2), req(3)])
    b.received([res(1), err(None, -32603, "internal"), res(3)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=3, paired=2, missing=1, null=1)
    assert batch.invalid_requests is None
    assert batch.diagnosis == diagnosis.SERVER_NULL_ID
    assert diagnosis.evidence(batch).startswith(
        "1 reply came back with id null although all 3 request elements were valid"
    )


def test_in_batch_duplicate_with_both_replies_present():
    # Both replies for id 1 arrive: nothing is missing and nothing unknown, yet the client
    # sent id 1 twice, and its two callers cannot tell the replies apart.
    b = books(bound=True)
    b.sent([req(1), req(1), req(2)])
    b.received([res(1), res(1), res(2)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=3, paired=3, duplicates=1)
    assert batch.diagnosis == diagnosis.CLIENT_DUPLICATE_IDS
    assert diagnosis.evidence(batch) == "1 id was sent twice in this batch"


def test_two_ids_sent_twice_are_counted_in_words():
    b = books(bound=True)
    b.sent([req(1), req(1), req(2), req(2), req(3)])
    b.received([res(1), res(2), res(3)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=5, paired=3, missing=2, duplicates=2)
    assert batch.diagnosis == diagnosis.CLIENT_DUPLICATE_IDS
    assert diagnosis.evidence(batch) == (
        "2 ids were sent twice in this batch; 2 requests of 5 closed without a reply (body_end)"
    )


def test_cross_batch_duplicate_on_a_stream():
    b = books()
    b.sent([req(7), req(8)])
    b.sent([req(7)])  # id 7 still pending in the first batch
    b.received([res(7), res(8)])
    b.received(res(7))
    assert [x.diagnosis for x in b.sink.closed] == ["ok", diagnosis.CLIENT_DUPLICATE_IDS]
    assert counts(b.sink.closed[1]) == numbers(requests=1, paired=1, duplicates=1)
    assert diagnosis.evidence(b.sink.closed[1]) == (
        "1 id was sent while still pending in another open batch"
    )


def test_invalid_element_answered_with_null_id_is_the_clients():
    b = books(bound=True)
    b.sent([req(1), {"jsonrpc": "2.0", "id": 2}, req(3)])  # element 2 has no method
    b.received([res(1), err(None, -32600, "Invalid Request"), res(3)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=3, paired=2, missing=1, null=1)
    assert batch.invalid_requests == {"no_method": 1}
    assert batch.diagnosis == diagnosis.MALFORMED_REQUEST
    assert diagnosis.evidence(batch).startswith(
        "1 reply came back with id null; 1 request element was invalid or had id null"
    )


def test_id_type_mismatch_on_an_exchange():
    # python-sdk PR #1720: id 0 echoed as "0".
    b = books(bound=True)
    b.sent([req(0), req(1)])
    b.received([res("0"), res(1)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=2, paired=1, missing=1, unknown=1, type_mismatch=1)
    assert batch.diagnosis == diagnosis.ID_TYPE_MISMATCH
    assert diagnosis.evidence(batch).startswith(
        '1 reply carried a pending id as another JSON type ("0")'
    )


def test_id_type_mismatch_alone_on_a_stream_is_attributed_to_the_batch_holding_the_id():
    # On a stream a lone reply pairs with no sibling; its id, re-typed, is pending in one
    # batch, which takes the reply and closes as id_type_mismatch at its timeout.
    b = books(timeout=5.0)
    b.sent([req(1), req(2)])
    b.received(res(1))
    b.received(res("2"))
    assert b.sink.strays == []
    b.clock.advance(5.0)
    b.ledger.expire()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=2, paired=1, missing=1, unknown=1, type_mismatch=1)
    assert batch.close_reason == "timeout"
    assert batch.diagnosis == diagnosis.ID_TYPE_MISMATCH


def test_string_id_echoed_as_a_number():
    b = books(bound=True)
    b.sent(req("17"))
    b.received(res(17))
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=1, missing=1, unknown=1, type_mismatch=1)
    assert batch.diagnosis == diagnosis.ID_TYPE_MISMATCH


def test_responses_missing_alone():
    b = books(bound=True)
    b.sent([req(1), req(2), note(), req(3)])
    b.received([res(3), res(1)])
    b.close("body_end")
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=3, paired=2, missing=1)
    assert batch.diagnosis == diagnosis.RESPONSES_MISSING
    assert diagnosis.evidence(batch) == "1 request of 3 closed without a reply (body_end)"


def test_ok():
    b = books(bound=True)
    b.sent([req(1), req(2)])
    b.received([res(2), res(1)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=2, paired=2)
    assert batch.diagnosis == diagnosis.OK
    assert diagnosis.evidence(batch) == "all 2 requests answered exactly once"


def test_duplicated_reply_alone_is_an_echo_fault():
    b = books(bound=True)
    b.sent([req(1), req(2)])
    b.received([res(1), res(2), res(2)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=2, paired=2, unknown=1)
    assert batch.diagnosis == diagnosis.ID_ECHO_FAULT


def test_first_match_wins_in_the_order_of_blame():
    # Duplicates and a null-id reply to an invalid element together: the client is first.
    b = books(bound=True)
    b.sent([req(1), req(1), {"jsonrpc": "2.0", "id": 5}])
    b.received([res(1), err(None, -32600, "Invalid Request"), res(42)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(
        requests=3, paired=1, missing=2, unknown=1, null=1, duplicates=1
    )
    assert batch.diagnosis == diagnosis.CLIENT_DUPLICATE_IDS
    words = diagnosis.evidence(batch)
    assert words.startswith("1 id was sent twice in this batch; 1 reply came back with id null")


def test_fractional_id_explains_no_null_reply():
    # A fractional id is legal and echoes fine: a null reply to it is the server's.
    b = books(bound=True)
    b.sent([req(1.5)])
    b.received([err(None, -32603, "internal")])
    b.close()
    batch = b.sink.only()
    assert batch.invalid_requests == {"fractional_id": 1}
    assert counts(batch) == numbers(requests=1, missing=1, null=1)
    assert batch.diagnosis == diagnosis.SERVER_NULL_ID


def test_diagnose_rules_each_need_their_own_evidence():
    zero = dict(
        duplicates=0, invalid_elements=0, null=0, type_mismatch=0, late=0, unknown=0, missing=0
    )
    assert diagnosis.diagnose(**zero) == diagnosis.OK
    assert diagnosis.diagnose(**{**zero, "unknown": 1, "missing": 1}) == diagnosis.ID_ECHO_FAULT
    assert diagnosis.diagnose(**{**zero, "invalid_elements": 2}) == diagnosis.OK
    assert diagnosis.diagnose(**{**zero, "null": 1}) == diagnosis.SERVER_NULL_ID
    assert (
        diagnosis.diagnose(**{**zero, "null": 1, "invalid_elements": 1})
        == diagnosis.MALFORMED_REQUEST
    )
    assert diagnosis.diagnose(**{**zero, "late": 1, "unknown": 2}) == diagnosis.LATE_RESPONSE
    assert diagnosis.diagnose(**{**zero, "missing": 3}) == diagnosis.RESPONSES_MISSING
    assert set(diagnosis.EXPLANATION) == set(diagnosis.ALL)
    assert len(diagnosis.ALL) == 8


def test_evidence_separates_re_typed_ids_from_invented_ones():
    b = books(bound=True)
    b.sent([req(0), req(1), req(2)])
    b.received([res("0"), res(1), res(77)])
    b.close()
    batch = b.sink.only()
    assert counts(batch) == numbers(requests=3, paired=1, missing=2, unknown=2, type_mismatch=1)
    assert batch.diagnosis == diagnosis.ID_TYPE_MISMATCH
    assert diagnosis.evidence(batch) == (
        '1 reply carried a pending id as another JSON type ("0"); '
        "1 reply carried an id that matched no pending request (77); "
        "2 requests of 3 closed without a reply (body_end)"
    )

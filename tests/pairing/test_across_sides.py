"""The cross-side rule on the pure ledger: the client's and the server's books of one batch.

Missing at the client but answered by the server is ``lost_in_transit``; missing on both is
the server's ``responses_missing``; client evidence earlier in the order of blame keeps its
place.  Exact words, so the rule can only pass for the evidence that names it.
"""

from __future__ import annotations

from jsonrpc_build import req, res
from ledger_books import books

from pairwatch.pairing import diagnosis


def sides(sent, server_reply, client_reply):
    """Close one batch on each side: the server read ``sent`` and answered ``server_reply``,
    the client got ``client_reply`` (what the path between them let through)."""
    server, client = books(bound=True), books(bound=True)
    server.sent(sent)
    server.received(server_reply)
    server.close()
    client.sent(sent)
    client.received(client_reply)
    client.close()
    return client.sink.only(), server.sink.only()


def test_answered_by_the_server_missing_at_the_client_is_lost_in_transit():
    c, s = sides([req(1), req(2), req(3)], [res(1), res(2), res(3)], [res(2), res(3)])
    assert (c.diagnosis, s.diagnosis) == (diagnosis.RESPONSES_MISSING, diagnosis.OK)
    assert diagnosis.across_sides(c, s) == diagnosis.LOST_IN_TRANSIT
    assert diagnosis.transit_evidence(c, s) == (
        "1 request of 3 closed without a reply at the client (body_end) although the server "
        "answered it (1)"
    )


def test_missing_on_both_sides_stays_the_servers_fault():
    c, s = sides([req(1), req(2)], [res(2)], [res(2)])
    assert diagnosis.across_sides(c, s) == diagnosis.RESPONSES_MISSING
    assert diagnosis.transit_evidence(c, s) == "1 request went unanswered on both sides (1)"


def test_both_kinds_in_one_batch_name_transit_and_say_both():
    c, s = sides([req(1), req(2), req(3)], [res(1), res(3)], [res(3)])
    assert diagnosis.across_sides(c, s) == diagnosis.LOST_IN_TRANSIT
    assert diagnosis.transit_evidence(c, s) == (
        "1 request of 3 closed without a reply at the client (body_end) although the server "
        "answered it (1); 1 request went unanswered on both sides (2)"
    )


def test_without_server_books_or_with_earlier_client_evidence_the_client_view_stands():
    c, s = sides([req(1), req(2)], [res(1), res(2)], [res(1), res(999)])
    assert c.diagnosis == diagnosis.ID_ECHO_FAULT  # a rewritten id explains the missing one
    assert diagnosis.across_sides(c, s) == diagnosis.ID_ECHO_FAULT
    assert diagnosis.across_sides(c, None) == diagnosis.ID_ECHO_FAULT
    ok_c, ok_s = sides([req(1)], [res(1)], [res(1)])
    assert diagnosis.across_sides(ok_c, ok_s) == diagnosis.OK
    assert diagnosis.transit_evidence(ok_c, ok_s) == "all 1 request answered exactly once"


def test_cross_side_names_have_words_and_stay_out_of_the_single_side_table():
    assert set(diagnosis.CROSS_EXPLANATION) == set(diagnosis.CROSS_SIDE) == {"lost_in_transit"}
    assert not set(diagnosis.CROSS_SIDE) & set(diagnosis.ALL)

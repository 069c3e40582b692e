"""Replies after their batch timed out, and clients that reuse an id they just gave up on."""

from __future__ import annotations

import gc
import tracemalloc

import pytest
from jsonrpc_build import req, res
from ledger_books import books, counts, numbers

from pairwatch.pairing import diagnosis


def test_reply_after_timeout_in_a_later_reply_array_is_late_not_an_echo_fault():
    b = books(timeout=5.0)
    b.sent([req(1), req(2)])
    b.received([res(1)])
    b.clock.advance(5.0)
    b.ledger.expire()
    first = b.sink.only()
    assert counts(first) == numbers(requests=2, paired=1, missing=1)
    assert (first.close_reason, first.diagnosis) == ("timeout", diagnosis.RESPONSES_MISSING)

    b.sent([req(3)])
    b.clock.advance(2.1)
    b.received([res(2), res(3)])  # id 2 came 2.1 s after its batch timed out
    second = b.sink.closed[1]
    assert counts(second) == numbers(requests=1, paired=1, unknown=1, late=1)
    assert second.lateness == [pytest.approx(2.1)]
    assert second.diagnosis == diagnosis.LATE_RESPONSE
    assert diagnosis.evidence(second) == (
        "1 reply for id 2 came 2.1 s after it closed as missing by timeout"
    )
    assert b.sink.strays == []


def test_lone_late_reply_on_a_stream_is_a_stray_of_the_batch_that_held_its_id():
    b = books(timeout=5.0)
    first = b.sent([req(1), req(2)])
    b.clock.advance(5.0)
    b.ledger.expire()
    b.clock.advance(0.5)
    b.received(res(2))  # alone
    assert len(b.sink.strays) == 1
    batch, tally = b.sink.strays[0]
    assert batch is first
    assert (tally.unknown, tally.late, tally.null) == (1, 1, 0)
    assert tally.lateness == [pytest.approx(0.5)]
    assert tally.late_keys == [2]
    assert diagnosis.tally_evidence(tally) == (
        "1 reply for id 2 came 0.5 s after it closed as missing by timeout"
    )
    # A second reply for the same id is an ordinary unknown id: the memory forgot it.
    b.received(res(2))
    _, again = b.sink.strays[1]
    assert (again.unknown, again.late) == (1, 0)


def test_late_reply_on_a_timed_out_exchange_counts_on_the_stray_tally():
    b = books(bound=True, timeout=5.0)
    batch = b.sent([req(1), req(2)])
    b.clock.advance(6.0)
    b.ledger.expire()
    b.received([res(1), res(2)])
    assert b.sink.only() is batch
    assert counts(batch) == numbers(requests=2, missing=2)
    ((stray_batch, tally),) = b.sink.strays
    assert stray_batch is batch
    assert (tally.unknown, tally.late, tally.lateness) == (2, 2, [1.0, 1.0])


def test_ids_closed_by_other_reasons_are_not_late():
    b = books(timeout=5.0)
    b.sent([req(1), req(2)])
    b.close("stream_dropped")
    b.sent([req(3)])
    b.received([res(2), res(3)])
    assert counts(b.sink.closed[1]) == numbers(requests=1, paired=1, unknown=1)
    assert b.sink.closed[1].diagnosis == diagnosis.ID_ECHO_FAULT


def test_reply_older_than_the_memory_age_is_an_ordinary_unknown():
    b = books(timeout=5.0, late_age=60.0)
    b.sent([req(1)])
    b.clock.advance(5.0)
    b.ledger.expire()
    b.clock.advance(61.0)
    b.sent([req(2)])
    b.received([res(1), res(2)])
    assert counts(b.sink.closed[1]) == numbers(requests=1, paired=1, unknown=1)
    assert b.sink.closed[1].diagnosis == diagnosis.ID_ECHO_FAULT


def test_client_reusing_a_timed_out_id_is_client_duplicate_evidence():
    b = books(timeout=5.0)
    b.sent([req(1), req(2)])
    b.received([res(1)])
    b.clock.advance(5.0)
    b.ledger.expire()
    # The client gives up on id 2 and sends id 2 again: the old, late reply will answer
    # the new request, and the book cannot tell which request it was for.
    b.sent([req(2), req(3)])
    b.received([res(2), res(3)])
    second = b.sink.closed[1]
    assert counts(second) == numbers(requests=2, paired=2, reused_timed_out=1)
    assert second.diagnosis == diagnosis.CLIENT_DUPLICATE_IDS
    assert diagnosis.evidence(second) == (
        "1 id was reused from requests that had closed as missing by timeout"
    )


def test_memory_of_timed_out_ids_is_bounded_in_count():
    b = books(timeout=1.0, late_ids=1024, late_age=300.0)
    memory = b.ledger.timed_out
    for start in range(0, 100_000, 1000):
        b.sent([req(i) for i in range(start, start + 1000)])
        b.clock.advance(1.0)
        b.ledger.expire()
    assert len(b.sink.closed) == 100
    assert sum(x.missing for x in b.sink.closed) == 100_000
    assert len(memory) == 1024
    assert b.ledger.pending_ids == 0
    # The newest ids are the ones remembered.
    b.received(res(99_999))
    assert b.sink.strays[-1][1].late == 1
    b.received(res(98_975))  # the 1025th newest: forgotten
    assert b.sink.strays[-1][1].late == 0


def test_memory_stays_bounded_under_1e5_timed_out_ids():
    b = books(timeout=1.0)
    sink = b.sink

    # Warm up, then measure what the next 10^5 timed-out ids leave behind.
    def time_out(first: int, last: int) -> None:
        for start in range(first, last, 100):
            b.sent([req(i) for i in range(start, start + 100)])
            b.clock.advance(1.0)
            b.ledger.expire()
            sink.closed.clear()  # the sink is the caller's; the ledger must keep nothing

    time_out(0, 2000)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    time_out(2000, 102_000)
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(b.ledger.timed_out) == 1024
    assert b.ledger.open_batches == 0
    assert grown < 512 * 1024, grown  # 10^5 ids seen, at most 1024 of them kept


def test_memory_forgets_by_age():
    b = books(timeout=1.0, late_age=10.0)
    b.sent([req(i) for i in range(50)])
    b.clock.advance(1.0)
    b.ledger.expire()
    assert len(b.ledger.timed_out) == 50
    b.clock.advance(11.0)
    b.sent([req(100)])
    b.clock.advance(1.0)
    b.ledger.expire()  # remembering id 100 prunes the 50 that are older than 10 s
    assert len(b.ledger.timed_out) == 1


def test_lateness_counts_from_a_client_timeout_shorter_than_pairwatchs():
    # An integration closes the batch with reason "timeout" when its library gives up (the
    # MCP session does): the reply is late from that moment, not from pairwatch's deadline.
    b = books(timeout=30.0)
    batch = b.sent([req(1)])
    b.clock.advance(2.0)
    b.ledger.close_batch(batch, "timeout")
    b.clock.advance(1.5)
    b.received(res(1))
    ((_, tally),) = b.sink.strays
    assert (tally.late, tally.lateness) == (1, [1.5])

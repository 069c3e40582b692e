"""Late replies against a reference model, over random answer sets on a stream channel."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from jsonrpc_build import req, res
from ledger_books import books, counts, numbers

from pairwatch.pairing import diagnosis

ids = st.lists(st.integers(1, 30), min_size=1, max_size=12, unique=True)


@settings(max_examples=200, deadline=None)
@given(ids, st.data())
def test_replies_after_a_timeout_are_late_exactly_when_their_id_timed_out(sent, data):
    before = data.draw(st.sets(st.sampled_from(sent)), label="answered in time")
    after = data.draw(st.sets(st.sampled_from([*sent, 50, 51])), label="answered later")
    b = books(timeout=5.0)
    b.sent([req(k) for k in sent])
    if before:
        b.received([res(k) for k in sorted(before)])
    b.clock.advance(5.0)
    b.ledger.expire()
    b.sent([req(100)])
    b.clock.advance(1.0)
    b.received([res(100), *(res(k) for k in sorted(after))])

    # By definition: the first batch misses what was not answered in time; each later reply
    # is unknown (nothing pending), and late exactly when its id timed out.
    first, second = b.sink.closed
    assert counts(first) == numbers(
        requests=len(sent), paired=len(before), missing=len(sent) - len(before)
    )
    late = len(after - before - {50, 51})
    assert counts(second) == numbers(requests=1, paired=1, unknown=len(after), late=late)
    assert second.lateness == [1.0] * late
    if late:
        expected = diagnosis.LATE_RESPONSE
    elif after:
        expected = diagnosis.ID_ECHO_FAULT
    else:
        expected = diagnosis.OK
    assert second.diagnosis == expected

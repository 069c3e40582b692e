"""``sent``/``received`` cost the same at 10 and at 10,000 outstanding batches.

Counted in operations, not wall time (the machine is shared): how many deadline-queue entries
each call looks at, and how often the table of open batches is iterated at all.
"""

from __future__ import annotations

import pytest
from jsonrpc_build import req, res
from ledger_books import books

from pairwatch.pairing.opened import OpenBatches


class CountingOpen(OpenBatches):
    """The ledger's open batches, counting every full pass over them."""

    passes = 0

    def values(self):  # type: ignore[no-untyped-def]
        type(self).passes += 1
        return super().values()

    def __iter__(self):  # type: ignore[no-untyped-def]
        type(self).passes += 1
        return super().__iter__()

    def oldest_array(self):  # type: ignore[no-untyped-def]
        type(self).passes += 1
        return super().oldest_array()


def _steady_state(outstanding: int) -> tuple[int, int, int]:
    """Open ``outstanding`` batches, then run 200 request/reply cycles on top of them."""
    b = books(timeout=3600.0, max_open_batches=outstanding + 10, max_pending_ids=10**6)
    b.ledger._open = CountingOpen()
    for i in range(outstanding):
        b.sent(req(f"held-{i}"))
        b.clock.advance(0.001)
    CountingOpen.passes = 0
    examined_before = b.ledger.examined
    for i in range(200):
        b.sent(req(i))
        b.clock.advance(0.001)
        b.received(res(i))
    assert len(b.sink.closed) == 200  # every cycle completed, nothing else closed
    assert b.ledger.open_batches == outstanding
    return b.ledger.examined - examined_before, CountingOpen.passes, len(b.ledger._open)


@pytest.mark.parametrize("outstanding", [10, 10_000])
def test_each_call_examines_a_constant_number_of_batches(outstanding):
    examined, passes, queued = _steady_state(outstanding)
    # Per cycle, whatever is outstanding: the send's expiry check looks at the queue's front
    # once (an open batch whose deadline is ahead), the completing reply once when the batch
    # closes and once more for its expiry check.  The old expiry copied the whole table of
    # open batches on every call.
    assert examined == 3 * 200
    assert passes == 0
    # Completed batches leave the queue lazily; compaction keeps it near what is open.
    assert queued <= 2 * outstanding + 64 + 1


def test_expiry_examines_only_what_expires():
    b = books(timeout=10.0, max_open_batches=20_000)
    for i in range(10_000):
        b.sent(req(i))
    b.clock.advance(5.0)
    for i in range(10_000, 10_005):
        b.sent(req(i))  # 5 newer batches, due 5 s later
    before = b.ledger.examined
    b.clock.advance(5.0)
    b.ledger.expire()
    assert len(b.sink.closed) == 10_000
    # Each expired batch, plus the next one due; closing each looks at the front once more.
    assert b.ledger.examined - before == 10_001 + 10_000
    before = b.ledger.examined
    b.ledger.expire()
    assert b.ledger.examined - before == 1


def test_eviction_takes_the_oldest_from_the_queue():
    b = books(timeout=60.0, max_open_batches=3)
    for i in range(5):
        b.sent(req(i))
        b.clock.advance(1.0)
    assert [list(x.keys) for x in b.sink.closed] == [[0], [1]]
    assert [x.close_reason for x in b.sink.closed] == ["evicted", "evicted"]
    b.received(res(2))  # the oldest still open completes; eviction must skip it
    b.sent(req(5))  # 3 open again: room for it
    b.sent(req(6))  # evicts 3, not the completed 2 still queued
    assert [list(x.keys) for x in b.sink.closed][2:] == [[2], [3]]
    assert b.sink.closed[3].close_reason == "evicted"

"""The process-wide pending-id budget, on top of each channel's own caps."""

from __future__ import annotations

import threading

from jsonrpc_build import dumps, req, res
from ledger_books import books, counts, numbers
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch import Options
from pairwatch.pairing.limits import DEFAULT_PENDING_BUDGET, Budget, process_budget


def test_default_budget_is_stated_and_shared():
    assert DEFAULT_PENDING_BUDGET == 1_048_576
    assert process_budget().limit == DEFAULT_PENDING_BUDGET
    assert process_budget() is process_budget()


def test_channels_share_the_budget_and_a_channel_evicts_its_own_oldest():
    budget = Budget(10)
    a = books(budget=budget)
    c = books(budget=budget)
    a.sent([req(i) for i in range(6)])
    c.sent([req(i) for i in range(4)])
    assert budget.used == 10
    c.sent([req(i) for i in range(10, 13)])  # c makes room from its own books only
    assert [x.close_reason for x in c.sink.closed] == ["evicted"]
    assert counts(c.sink.closed[0]) == numbers(requests=4, missing=4)
    assert a.sink.closed == []
    assert a.ledger.pending_ids == 6
    assert budget.used == 9


def test_ids_past_the_budget_close_as_evicted_when_the_channel_has_nothing_to_evict():
    budget = Budget(10)
    a = books(budget=budget)
    c = books(budget=budget)
    a.sent([req(i) for i in range(8)])
    batch = c.sent([req(i) for i in range(5)])
    assert batch is not None
    assert batch.evicted_from == 2
    assert c.ledger.pending_ids == 2
    assert budget.used == 10
    c.received([res(0), res(1), res(2)])  # id 2 was never tracked: an unknown id
    c.clock.advance(10.0)
    c.ledger.expire()
    assert counts(c.sink.only()) == numbers(requests=5, paired=2, missing=3, unknown=1)
    assert budget.used == 8
    a.close("stream_end")
    assert budget.used == 0


def test_budget_is_released_by_every_way_a_batch_closes():
    budget = Budget(100)
    b = books(budget=budget, timeout=1.0, max_open_batches=2)
    b.sent([req(1), req(2)])
    b.received([res(1), res(2)])  # complete
    b.sent([req(3)])
    b.sent([req(4)])
    b.sent([req(5)])  # evicts 3
    b.clock.advance(2.0)
    b.ledger.expire()  # times out 4 and 5
    b.sent([req(6)])
    b.close("stream_end")
    assert [x.close_reason for x in b.sink.closed] == [
        "complete", "evicted", "timeout", "timeout", "stream_end",
    ]  # fmt: skip
    assert budget.used == 0


def test_budget_under_threads_never_overcommits():
    budget = Budget(1000)
    ledgers = [books(budget=budget) for _ in range(8)]
    start = threading.Barrier(8)

    def fill(b):
        start.wait()
        for i in range(100):
            b.sent([req(f"{i}-{j}") for j in range(5)])

    threads = [threading.Thread(target=fill, args=(b,)) for b in ledgers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert budget.used == sum(b.ledger.pending_ids for b in ledgers)
    assert budget.used <= 1000
    tracked = sum(b.ledger.pending_ids for b in ledgers)
    missing = sum(x.missing for b in ledgers for x in b.sink.closed)
    open_untracked = sum(
        x.requests - (x.evicted_from if x.evicted_from >= 0 else x.requests)
        for b in ledgers
        for x in b.ledger._open.values()
    )
    assert tracked + missing + open_untracked == 8 * 100 * 5  # the books balance


def test_budget_eviction_is_exported_as_missing_with_reason_evicted(monkeypatch):
    import pairwatch.pairing.limits as limits_module

    # The one place books find the process budget: a fresh Options' limits take this one.
    monkeypatch.setattr(limits_module, "process_budget", lambda: Budget(3))
    otel, clock = Otel(), FakeClock()
    channel = pairwatch.open_channel(
        options=Options(meter_provider=otel.meter_provider, clock=clock, spans=False)
    )
    channel.sent(dumps([req(i) for i in range(5)]))
    channel.received(dumps([res(i) for i in range(3)]))
    channel.close("stream_end")
    assert otel.value("batch.missing_response", pairwatch__close_reason="evicted") == 2
    assert otel.value("batch.closed", pairwatch__diagnosis="responses_missing") == 1

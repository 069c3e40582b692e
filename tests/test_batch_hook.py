"""``Options(on_batch_closed=...)``: per-batch detail for callers, shielded like the rest."""

from __future__ import annotations

from jsonrpc_build import dumps, note, req, res

import pairwatch
from pairwatch import Options
from pairwatch.pairing.records import Batch


def _channel(otel, clock, hook, *, bound=True):
    return pairwatch.open_channel(
        transport="http",
        bound=bound,
        options=Options(
            meter_provider=otel.meter_provider,
            tracer_provider=otel.tracer_provider,
            clock=clock,
            spans=False,
            on_batch_closed=hook,
        ),
    )


def test_hook_sees_every_closed_batch_with_its_books(otel, clock):
    seen: list[Batch] = []
    channel = _channel(otel, clock, seen.append)
    channel.sent(dumps([req(1), req(2), req(3)]))
    clock.advance(0.5)
    channel.received(dumps([res(3), res(1), res(7)]))
    assert seen == []  # still open: a bound exchange closes at body end
    channel.close("body_end")
    assert len(seen) == 1
    batch = seen[0]
    assert batch.diagnosis == "server_id_echo_fault"  # no id was sent twice
    assert batch.close_reason == "body_end"
    assert [c.key for c in batch.calls if c.outcome == "missing"] == [2]
    assert batch.unknown_keys == [7]
    assert batch.out_of_order
    assert [c.latency for c in batch.calls if c.outcome == "paired"] == [0.5, 0.5]
    assert otel.value("batch.closed") == 1


def test_hook_runs_for_batches_closed_inside_sent(otel, clock):
    seen: list[Batch] = []
    channel = _channel(otel, clock, seen.append, bound=False)
    channel.sent(dumps([note(), note()]))
    assert [b.close_reason for b in seen] == ["no_response_expected"]


def test_failing_hook_is_counted_and_never_raises(otel, clock):
    def broken(batch: Batch) -> None:
        raise RuntimeError("observer bug")

    channel = _channel(otel, clock, broken, bound=False)
    # One received payload completes two batches: both must still reach telemetry.
    channel.sent(dumps(req(1)))
    channel.sent(dumps(req(2)))
    channel.received(dumps(res(1)))
    channel.received(dumps(res(2)))
    assert otel.value("batch.closed", pairwatch__close_reason="complete") == 2
    assert otel.value("pairwatch.internal_errors", pairwatch__error_kind="on_batch_closed") == 2

"""Every rule of the pairing contract, read back from exported metrics with exact numbers."""

from __future__ import annotations

import pytest
from jsonrpc_build import dumps, err, note, req, res
from otel_support import PAIRING_COUNTERS

import pairwatch
from pairwatch import Options

ZERO = dict.fromkeys(PAIRING_COUNTERS, 0)


def books(otel, **expected):
    """All counters at once: anything not named must be zero."""
    got = otel.counters()
    want = dict(ZERO)
    want.update({k.replace("__", "."): v for k, v in expected.items()})
    return {k: got.get(k, 0) for k in want}, want


def exchange(otel, clock, sent, reply, *, bound=True, close="body_end", **opts):
    channel = pairwatch.open_channel(
        transport="http",
        integration="manual",
        bound=bound,
        options=Options(
            meter_provider=otel.meter_provider,
            tracer_provider=otel.tracer_provider,
            clock=clock,
            **opts,
        ),
    )
    channel.sent(dumps(sent))
    clock.advance(0.25)
    if reply is not None:
        channel.received(reply if isinstance(reply, bytes) else dumps(reply))
    if close:
        channel.close(close)
    return channel


def closed(otel, **attrs):
    return otel.value("batch.closed", **attrs)


def test_healthy_batch_counts_only_sizes_and_latency(otel, clock):
    exchange(otel, clock, [req(1), req(2), req(3)], [res(1), res(2), res(3)])
    got, want = books(otel, batch__requests=3, batch__closed=1)
    assert got == {k: want[k] for k in got}
    assert otel.value("batch.requests") == 3
    assert closed(otel, pairwatch__diagnosis="ok", pairwatch__close_reason="body_end") == 1
    assert otel.hist("batch.pair_latency") == (3, pytest.approx(0.75))
    assert otel.hist("batch.size") == (1, 3)


def test_pure_reorder_is_counted_once_and_pairs_correctly(otel, clock):
    exchange(otel, clock, [req(1), req(2), req(3)], [res(3), res(1), res(2)])
    got, want = books(otel, batch__out_of_order=1)
    assert got == want
    assert closed(otel, pairwatch__diagnosis="ok") == 1
    assert otel.hist("batch.pair_latency")[0] == 3


def test_duplicate_request_id_in_batch(otel, clock):
    # The client reused id 1: the server answers both, the second answer is one too many for
    # a client keyed by id, and a second caller starves.
    exchange(otel, clock, [req(1), req(1), req(2)], [res(1), res(2)])
    got, want = books(
        otel, batch__duplicate_id=1, batch__missing_response=1, batch__response_count_mismatch=1
    )
    assert got == want
    assert otel.value("batch.duplicate_id", pairwatch__duplicate_scope="in_batch") == 1
    assert closed(otel, pairwatch__diagnosis="client_duplicate_ids") == 1


def test_duplicated_response_is_unknown(otel, clock):
    exchange(otel, clock, [req(1), req(2)], [res(1), res(2), res(2)])
    got, want = books(otel, batch__unknown_id_response=1, batch__response_count_mismatch=1)
    assert got == want
    assert closed(otel, pairwatch__diagnosis="server_id_echo_fault") == 1


def test_null_id_and_missing(otel, clock):
    # The server could not read element 2 and answered it with id null.
    exchange(
        otel,
        clock,
        [req(1), {"jsonrpc": "2.0", "id": 2}, req(3)],
        [res(1), err(None, -32600, "Invalid Request"), res(3)],
    )
    got, want = books(
        otel,
        batch__null_id_response=1,
        batch__missing_response=1,
        batch__response_count_mismatch=1,
        batch__invalid_request=1,
    )
    assert got == want
    assert otel.value("batch.invalid_request", pairwatch__reason="no_method") == 1
    assert closed(otel, pairwatch__diagnosis="malformed_request_element") == 1


def test_dropped_response(otel, clock):
    exchange(otel, clock, [req(1, "a"), req(2, "b"), req(3, "b")], [res(1), res(3)])
    got, want = books(otel, batch__missing_response=1, batch__response_count_mismatch=1)
    assert got == want
    assert (
        otel.value("batch.missing_response", rpc__method="b", pairwatch__close_reason="body_end")
        == 1
    )
    assert closed(otel, pairwatch__diagnosis="responses_missing") == 1


def test_wrong_id_reads_as_unknown_plus_missing(otel, clock):
    exchange(otel, clock, [req(1), req(2)], [res(1), res(99)])
    got, want = books(otel, batch__unknown_id_response=1, batch__missing_response=1)
    assert got == want  # 2 non-null responses for 2 requests: no count mismatch
    # No id was sent twice (batch.duplicate_id is 0): the server re-addressed a reply.
    assert closed(otel, pairwatch__diagnosis="server_id_echo_fault") == 1


def test_id_echoed_with_another_type(otel, clock):
    # python-sdk PR #1720: request id 0 answered as "0"; the lookup misses.
    exchange(otel, clock, [req(0)], [res("0")])
    got, want = books(otel, batch__unknown_id_response=1, batch__missing_response=1)
    assert got == want
    assert closed(otel, pairwatch__diagnosis="id_type_mismatch") == 1


def test_one_and_one_point_zero_pair(otel, clock):
    exchange(otel, clock, req(1), res(1.0))
    got, want = books(otel)
    assert got == want
    assert otel.value("batch.requests", jsonrpc__batch="false") == 1


def test_true_never_pairs_with_1(otel, clock):
    exchange(otel, clock, req(1), {"jsonrpc": "2.0", "id": True, "result": 1})
    got, want = books(
        otel, batch__unknown_id_response=1, batch__missing_response=1, batch__invalid_response=1
    )
    assert got == want
    assert otel.value("batch.invalid_response", pairwatch__reason="bad_id_type") == 1


def test_notification_only_batch_closes_at_once_and_any_reply_is_a_violation(otel, clock):
    channel = exchange(otel, clock, [note(), note()], None, close=None)
    assert closed(otel, pairwatch__close_reason="no_response_expected") == 1
    channel.received(b"[]")
    got, want = books(otel, batch__protocol_violation=1)
    assert got == want
    assert otel.value("batch.protocol_violation", pairwatch__reason="reply_to_notifications") == 1


def test_empty_body_after_notifications_is_fine(otel, clock):
    exchange(otel, clock, [note()], b"")
    got, want = books(otel)
    assert got == want


def test_empty_batch_answered_with_null_id_error(otel, clock):
    # go-ethereum PR #34985: [] answered by one error whose id is null.  That is the answer
    # the spec requires to the invalid request [], so it is a null-id response and no violation.
    exchange(otel, clock, [], err(None, -32600, "empty batch"))
    got, want = books(otel, batch__null_id_response=1, batch__invalid_request=1, batch__closed=1)
    assert got == {k: want[k] for k in got}
    assert otel.value("batch.invalid_request", pairwatch__reason="empty_batch") == 1
    assert closed(otel, pairwatch__diagnosis="malformed_request_element") == 1


def test_single_object_for_a_batch_of_one(otel, clock):
    exchange(otel, clock, [req(5)], res(5))
    got, want = books(otel, batch__protocol_violation=1)
    assert got == want
    assert otel.value("batch.protocol_violation", pairwatch__reason="single_reply_to_batch") == 1


def test_single_error_object_for_a_batch(otel, clock):
    # web3.py #3518: a batch answered with one error object, not an array.
    exchange(otel, clock, [req(1), req(2)], err(None, -32600, "no batches"))
    got, want = books(
        otel,
        batch__null_id_response=1,
        batch__protocol_violation=1,
        batch__missing_response=2,
        batch__response_count_mismatch=1,
    )
    assert got == want


def test_invalid_responses_still_pair(otel, clock):
    exchange(
        otel,
        clock,
        [req(1), req(2)],
        [
            {"jsonrpc": "1.0", "id": 1, "result": 1},
            {"jsonrpc": "2.0", "id": 2, "result": 1, "error": {"code": 1, "message": "x"}},
        ],
    )
    got, want = books(otel, batch__invalid_response=2)
    assert got == want
    assert otel.hist("batch.pair_latency")[0] == 2
    assert otel.value("batch.invalid_response", pairwatch__reason="bad_version") == 1
    assert otel.value("batch.invalid_response", pairwatch__reason="both_result_and_error") == 1


def test_unparseable_reply(otel, clock):
    exchange(otel, clock, [req(1), req(2)], b"<html>502 Bad Gateway</html>")
    got, want = books(
        otel, batch__invalid_response=1, batch__missing_response=2, batch__response_count_mismatch=1
    )
    assert got == want
    assert otel.value("batch.invalid_response", pairwatch__reason="unparseable") == 1


def test_discouraged_ids_are_counted_at_send(otel, clock):
    exchange(
        otel,
        clock,
        [req(None), req(1.5), req(True)],
        [res(None), res(1.5), err(None, -32600, "Invalid Request")],
    )
    got, want = books(
        otel,
        batch__invalid_request=3,
        batch__null_id_response=2,
        batch__missing_response=2,
        batch__response_count_mismatch=1,
    )
    assert got == want
    assert {a["pairwatch.reason"]: True for a in otel.attrs("batch.invalid_request")} == {
        "null_id": True,
        "fractional_id": True,
        "bad_id_type": True,
    }


def test_latency_is_exact_with_an_injected_clock(otel, clock):
    channel = pairwatch.open_channel(
        options=Options(meter_provider=otel.meter_provider, clock=clock, spans=False)
    )
    channel.sent(dumps([req(1), req(2)]))
    clock.advance(0.5)
    channel.received(dumps(res(2)))
    clock.advance(1.0)
    channel.received(dumps(res(1)))
    assert otel.hist("batch.pair_latency") == (2, pytest.approx(2.0))
    assert otel.value("batch.out_of_order") == 1
    assert closed(otel, pairwatch__close_reason="complete") == 1


@pytest.mark.parametrize(
    ("first", "second", "reordered"),
    [
        ([2, 5], [1, 4, 3, 6], 2),  # each batch gets an earlier id after a later one
        ([1, 4], [2, 5, 3, 6], 0),  # both answered in order, in parts, interleaved
        ([1, 6], [4, 2, 5, 3], 1),  # only the second batch goes back (6 before 4 and 5)
    ],
)
def test_order_is_judged_per_batch_across_interleaved_replies(
    otel, clock, first, second, reordered
):
    """Two open batches answered in two arrays that mix their ids: each batch's order is its
    own, remembered from one reply to the next."""
    channel = pairwatch.open_channel(
        options=Options(meter_provider=otel.meter_provider, clock=clock, spans=False)
    )
    channel.sent(dumps([req(1), req(2), req(3)]))
    channel.sent(dumps([req(4), req(5), req(6)]))
    channel.received(dumps([res(i) for i in first]))
    channel.received(dumps([res(i) for i in second]))
    assert otel.value("batch.out_of_order") == reordered
    assert closed(otel, pairwatch__close_reason="complete") == 2
    assert otel.value("batch.requests") == 6


def test_stream_timeout_counts_missing(otel, clock):
    channel = pairwatch.open_channel(
        transport="websocket",
        options=Options(meter_provider=otel.meter_provider, clock=clock, timeout=5.0),
    )
    channel.sent(dumps([req(1), req(2)]))
    channel.received(dumps([res(1)]))
    clock.advance(4.9)
    channel.expire()
    assert otel.value("batch.missing_response") == 0
    clock.advance(0.2)
    channel.expire()
    got, want = books(otel, batch__missing_response=1, batch__response_count_mismatch=1)
    assert got == want
    assert otel.value("batch.missing_response", pairwatch__close_reason="timeout") == 1
    # The late answer then matches nothing.
    channel.received(dumps([res(2)]))
    assert otel.value("batch.unknown_id_response") == 1


def test_stream_dropped_is_not_a_cancellation(otel, clock):
    channel = pairwatch.open_channel(
        transport="sse", options=Options(meter_provider=otel.meter_provider, clock=clock)
    )
    channel.sent(dumps([req(1), req(2), req(3)]))
    channel.received(dumps(res(2)))
    channel.close("stream_dropped")
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 2
    assert (
        closed(
            otel, pairwatch__close_reason="stream_dropped", pairwatch__diagnosis="responses_missing"
        )
        == 1
    )


def test_cross_batch_duplicates_pair_first_in_first_out(otel, clock):
    channel = pairwatch.open_channel(
        transport="websocket",
        options=Options(
            meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider, clock=clock
        ),
    )
    channel.sent(dumps([req(1, "first"), req(2, "first")]))
    clock.advance(1.0)
    channel.sent(dumps([req(1, "second")]))
    channel.received(dumps(res(1)))  # pairs with the older id 1
    channel.received(dumps([res(2)]))
    assert closed(otel) == 1
    channel.received(dumps(res(1)))
    assert closed(otel) == 2
    assert otel.value("batch.duplicate_id", pairwatch__duplicate_scope="cross_batch") == 1
    assert otel.hist("batch.pair_latency", rpc__method="first") == (2, pytest.approx(2.0))
    assert otel.hist("batch.pair_latency", rpc__method="second") == (1, pytest.approx(0.0))
    assert otel.value("batch.unknown_id_response") == 0


def test_unknown_on_a_bare_stream_is_counted_at_once(otel, clock):
    channel = pairwatch.open_channel(
        options=Options(meter_provider=otel.meter_provider, clock=clock)
    )
    channel.received(dumps(res(42)))
    channel.received(dumps(err(None)))
    got, want = books(otel, batch__unknown_id_response=1, batch__null_id_response=1)
    assert got == want


def test_server_initiated_requests_are_not_responses(otel, clock):
    channel = pairwatch.open_channel(
        transport="stdio", options=Options(meter_provider=otel.meter_provider, clock=clock)
    )
    channel.sent(dumps(req(1, "tools/call")))
    channel.received(dumps(req(1, "sampling/createMessage")))  # same id number, other table
    channel.received(dumps(note("notifications/progress")))
    channel.sent(dumps(res(1, {"content": "answer"})))  # the client answers the server
    channel.received(dumps(res(1)))
    got, want = books(otel)
    assert got == want
    assert closed(otel, pairwatch__diagnosis="ok", pairwatch__close_reason="complete") == 1


def test_caps_evict_the_oldest_batch_as_missing(otel, clock):
    channel = pairwatch.open_channel(
        options=Options(
            meter_provider=otel.meter_provider,
            clock=clock,
            max_open_batches=2,
            max_pending_ids=1000,
        )
    )
    for i in range(3):
        channel.sent(dumps([req(i * 10), req(i * 10 + 1)]))
    assert otel.value("batch.missing_response", pairwatch__close_reason="evicted") == 2
    assert channel.ledger.open_batches == 2


def test_pending_id_cap(otel, clock):
    channel = pairwatch.open_channel(
        options=Options(meter_provider=otel.meter_provider, clock=clock, max_pending_ids=5)
    )
    channel.sent(dumps([req(i) for i in range(4)]))
    channel.sent(dumps([req(i) for i in range(10, 14)]))
    assert otel.value("batch.missing_response", pairwatch__close_reason="evicted") == 4
    channel.received(dumps([res(i) for i in range(10, 14)]))
    assert otel.value("batch.unknown_id_response") == 0
    assert closed(otel, pairwatch__diagnosis="ok") == 1


def test_method_label_is_capped(otel, clock):
    channel = pairwatch.open_channel(
        options=Options(meter_provider=otel.meter_provider, clock=clock, method_cap=3)
    )
    channel.sent(dumps([req(i, f"method_{i}") for i in range(10)]))
    channel.received(dumps([res(i) for i in range(10)]))
    methods = {a["rpc.method"] for a in otel.attrs("batch.pair_latency")}
    assert methods == {"method_0", "method_1", "method_2", "_OTHER"}
    assert otel.hist("batch.pair_latency", rpc__method="_OTHER")[0] == 7


def test_no_id_or_payload_in_metric_attributes(otel, clock):
    exchange(otel, clock, [req("secret-id-123", "m", ["secret-param"])], [res(77, "secret")])
    for name, attrs, _ in otel.collect():
        for value in attrs.values():
            assert "secret" not in str(value), name
            assert value not in (77, "77")

"""Withdrawn is not missing: the caller's own decisions are never counted as the server's faults.

Evidence, on any channel: an MCP ``notifications/cancelled`` the caller sends, the caller's
call or task cancelled, a reply read while pairwatch is switched off.  Each withdrawn request
counts in ``batch.withdrawn_request`` (never missing, never a count mismatch, diagnosis
``ok``); a reply that races the cancellation counts in ``batch.reply_after_withdrawal``
(never an unknown id).  Evidence order: a request already closed stays as it closed, and a
cancellation the client sends because its own deadline passed is a timeout.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch import Options


def req(i: Any, method: str = "tools/call") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "method": method}


def res(i: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": i, "result": {}}


def cancel(i: Any, reason: str = "the user pressed stop") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": i, "reason": reason},
    }


@pytest.fixture
def channel(otel: Otel, clock: FakeClock) -> pairwatch.Channel:
    options = Options(
        meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider, clock=clock
    )
    return pairwatch.open_channel(transport="stdio", options=options)


def send(channel: pairwatch.Channel, message: Any) -> None:
    channel.sent(json.dumps(message))


def test_a_cancelled_call_is_withdrawn_and_its_racing_reply_blames_nobody(channel, otel):
    send(channel, req(1))
    send(channel, req(2))
    send(channel, cancel(1))
    channel.received(json.dumps(res(1)))  # the server answered before it saw the cancel
    channel.received(json.dumps(res(2)))
    channel.close("stream_end")
    assert otel.counters() == {
        "batch.requests": 2,
        "batch.closed": 3,  # two requests and the notification (which expects nothing)
        "batch.withdrawn_request": 1,
        "batch.reply_after_withdrawal": 1,
    }
    assert otel.value("batch.withdrawn_request", pairwatch__reason="cancelled") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 3
    assert otel.value("batch.closed", pairwatch__close_reason="withdrawn") == 1
    outcomes = sorted(
        str(s.attributes["pairwatch.outcome"])
        for s in otel.spans()
        if s.attributes and "pairwatch.outcome" in s.attributes
    )
    assert outcomes == ["paired", "withdrawn"]


def test_a_second_racing_reply_is_an_unknown_id(channel, otel):
    send(channel, req("a"))
    send(channel, cancel("a"))
    channel.received(json.dumps(res("a")))
    channel.received(json.dumps(res("a")))  # the memory of a withdrawn id is used once
    pairwatch.flush()
    assert otel.value("batch.reply_after_withdrawal") == 1
    assert otel.value("batch.unknown_id_response") == 1


def test_a_cancellation_for_the_clients_own_deadline_is_a_timeout(channel, otel):
    send(channel, req(7))
    send(channel, cancel(7, "timed out after 5.0s"))  # what the MCP SDK sends on its timeout
    pairwatch.flush()
    assert otel.value("batch.missing_response", pairwatch__close_reason="timeout") == 1
    assert otel.value("batch.withdrawn_request") == 0
    assert otel.value("batch.closed", pairwatch__diagnosis="responses_missing") == 1


def test_a_request_already_closed_stays_missing(channel, otel):
    send(channel, req(3))
    channel.close("stream_end")
    send(channel, cancel(3))
    pairwatch.flush()
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_end") == 1
    assert otel.value("batch.withdrawn_request") == 0


def test_one_cancelled_request_of_a_batch(otel, clock):
    channel = pairwatch.open_channel(
        transport="http", bound=True, meter_provider=otel.meter_provider, clock=clock
    )
    channel.sent(json.dumps([req(1), req(2), req(3)]))
    send(channel, cancel(2))
    channel.received(json.dumps([res(1)]))
    channel.close("body_end")
    pairwatch.flush()
    assert otel.value("batch.requests") == 3
    assert otel.hist("batch.pair_latency")[0] == 1
    assert otel.value("batch.withdrawn_request", pairwatch__reason="cancelled") == 1
    assert otel.value("batch.missing_response", pairwatch__close_reason="body_end") == 1
    # 1 reply for the 2 requests still expecting one: a count mismatch, for id 3 alone.
    assert otel.value("batch.response_count_mismatch") == 1


def test_a_reply_read_while_switched_off_withdraws_what_it_answers(channel, otel):
    send(channel, req(1))
    send(channel, req(2))
    pairwatch.disable()
    try:
        channel.received(json.dumps(res(1)))  # read while off: not paired, not missing
        send(channel, req(3))  # sent while off: counts nothing at all
    finally:
        pairwatch.enable()
    channel.close("stream_end")
    assert otel.counters() == {
        "batch.requests": 2,
        "batch.closed": 2,
        "batch.withdrawn_request": 2,
    }
    assert otel.value("batch.withdrawn_request", pairwatch__reason="switched_off") == 2


def test_close_batch_with_a_withdrawal_reason_withdraws(channel, otel):
    batch = channel.sent(json.dumps(req(9, "subscriptions/listen")))
    assert batch is not None
    channel.close_batch(batch, "subscription_ended")
    channel.received(json.dumps(res(9)))  # the server's final reply to the ended stream
    pairwatch.flush()
    assert otel.value("batch.withdrawn_request", pairwatch__reason="subscription_ended") == 1
    assert otel.value("batch.reply_after_withdrawal") == 1
    assert otel.value("batch.missing_response") == 0
    assert otel.value("batch.unknown_id_response") == 0


def test_a_stream_batch_closes_when_the_rest_is_answered(channel, otel):
    send(channel, [req(1), req(2)])
    send(channel, cancel(2))
    channel.received(json.dumps([res(1)]))  # nothing else is awaited: it closes now
    pairwatch.flush()
    assert otel.value("batch.closed", pairwatch__close_reason="complete") == 1
    assert otel.value("batch.withdrawn_request") == 1
    assert otel.value("batch.response_count_mismatch") == 0


def test_cancelling_a_subscription_ends_it(channel, otel):
    send(channel, req(4, "subscriptions/listen"))
    send(channel, cancel(4, "the caller left the listen block"))
    pairwatch.flush()
    assert otel.value("batch.withdrawn_request", pairwatch__reason="subscription_ended") == 1
    assert otel.value("batch.withdrawn_request", pairwatch__reason="cancelled") == 0


def test_an_id_used_again_after_its_reply_is_a_new_request(channel, otel):
    """MCP 2026-07-28: ids are unique only among requests in flight."""
    for _ in range(3):
        send(channel, req(1))
        channel.received(json.dumps(res(1)))
    pairwatch.flush()
    assert otel.value("batch.requests") == 3
    assert otel.hist("batch.pair_latency")[0] == 3
    assert otel.value("batch.duplicate_id") == 0
    assert otel.value("batch.unknown_id_response") == 0

"""The diagnoses as a user reads them: ``batch.closed`` by ``pairwatch.diagnosis`` from an
in-memory metric reader, and the channel's log line in evidence words."""

from __future__ import annotations

import logging

import pytest
from jsonrpc_build import dumps, err, req, res
from otel_support import PAIRING_COUNTERS

import pairwatch
from pairwatch import Options
from pairwatch.runtime import guard


@pytest.fixture(autouse=True)
def fresh_log_limit(monkeypatch):
    monkeypatch.setattr(guard, "log_limited", guard.RateLimitedLog())


def _channel(otel, clock, *, bound, timeout=30.0):
    return pairwatch.open_channel(
        transport="http" if bound else "websocket",
        bound=bound,
        options=Options(
            meter_provider=otel.meter_provider, clock=clock, spans=False, timeout=timeout
        ),
    )


def _counters(otel, **nonzero):
    got = otel.counters()
    want = dict.fromkeys(PAIRING_COUNTERS, 0)
    want.update({k.replace("__", "."): v for k, v in nonzero.items()})
    return {k: got.get(k, 0) for k in want}, want


def test_re_addressed_reply_is_exported_as_an_echo_fault_and_logged_as_evidence(
    otel, clock, caplog
):
    channel = _channel(otel, clock, bound=True)
    channel.sent(dumps([req(1), req(2), req(3)]))
    with caplog.at_level(logging.WARNING, logger="pairwatch"):
        channel.received(dumps([res(1), res(999), res(3)]))
        channel.close("body_end")
    got, want = _counters(otel, batch__unknown_id_response=1, batch__missing_response=1)
    assert got == want
    assert otel.value("batch.closed", pairwatch__diagnosis="server_id_echo_fault") == 1
    assert otel.value("batch.closed") == 1
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == (
        "pairwatch: batch of 3 requests closed (body_end) as server_id_echo_fault: "
        "1 reply carried an id that matched no pending request (999); "
        "1 request of 3 closed without a reply (body_end)"
    )
    assert "reuses" not in line


def test_null_id_for_valid_request_is_server_null_id(otel, clock):
    channel = _channel(otel, clock, bound=True)
    channel.sent(dumps([req(1), req(2)]))
    channel.received(dumps([res(1), err(None, -32603, "oops")]))
    channel.close("body_end")
    got, want = _counters(
        otel, batch__null_id_response=1, batch__missing_response=1, batch__response_count_mismatch=1
    )
    assert got == want
    assert otel.value("batch.closed", pairwatch__diagnosis="server_null_id") == 1


def test_duplicate_with_both_replies_is_client_duplicate_ids(otel, clock, caplog):
    channel = _channel(otel, clock, bound=True)
    channel.sent(dumps([req(1), req(1), req(2)]))
    with caplog.at_level(logging.WARNING, logger="pairwatch"):
        channel.received(dumps([res(1), res(1), res(2)]))
        channel.close("body_end")
    got, want = _counters(otel, batch__duplicate_id=1)
    assert got == want
    assert otel.value("batch.closed", pairwatch__diagnosis="client_duplicate_ids") == 1
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.endswith("as client_duplicate_ids: 1 id was sent twice in this batch")


def test_late_reply_on_a_stream_is_late_response_and_still_unknown(otel, clock, caplog):
    channel = _channel(otel, clock, bound=False, timeout=5.0)
    channel.sent(dumps([req(1), req(2)]))
    channel.received(dumps([res(1)]))
    clock.advance(5.0)
    channel.expire()
    channel.sent(dumps([req(3)]))
    clock.advance(2.1)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pairwatch"):
        channel.received(dumps([res(2), res(3)]))
    got, want = _counters(
        otel,
        batch__missing_response=1,
        batch__response_count_mismatch=2,
        batch__unknown_id_response=1,
    )
    assert got == want
    assert otel.value("batch.closed", pairwatch__diagnosis="responses_missing") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="late_response") == 1
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.endswith(
        "as late_response: 1 reply for id 2 came 2.1 s after it closed as missing by timeout"
    )


def test_lone_late_reply_is_logged_with_its_lateness(otel, clock, caplog):
    channel = _channel(otel, clock, bound=False, timeout=5.0)
    channel.sent(dumps(req(7)))
    clock.advance(5.0)
    channel.expire()
    clock.advance(2.5)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="pairwatch"):
        channel.received(dumps(res(7)))
    assert otel.value("batch.unknown_id_response") == 1
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == (
        "pairwatch: late_response: 1 reply for id 7 came 2.5 s after it closed as missing "
        "by timeout"
    )


def test_client_reusing_a_timed_out_id(otel, clock):
    channel = _channel(otel, clock, bound=False, timeout=5.0)
    channel.sent(dumps(req(4)))
    clock.advance(5.0)
    channel.expire()
    channel.sent(dumps(req(4)))
    channel.received(dumps(res(4)))
    got, want = _counters(otel, batch__missing_response=1, batch__response_count_mismatch=1)
    assert got == want  # not batch.duplicate_id: id 4 was no longer pending
    assert otel.value("batch.closed", pairwatch__diagnosis="client_duplicate_ids") == 1


def test_empty_batch_spec_reply_over_the_channel_is_no_violation(otel, clock):
    channel = _channel(otel, clock, bound=True)
    channel.sent(b"[]")
    assert otel.value("batch.closed") == 0
    channel.received(dumps(err(None, -32600, "Invalid Request")))
    channel.close("body_end")
    got, want = _counters(otel, batch__null_id_response=1, batch__invalid_request=1)
    assert got == want
    assert otel.value("batch.closed", pairwatch__diagnosis="malformed_request_element") == 1
    assert otel.hist("batch.size") == (1, 0)


def test_empty_batch_answered_by_a_rest_api_counts_nothing(otel, clock):
    channel = _channel(otel, clock, bound=True)
    channel.sent(b"[]")
    channel.received(b'{"created": 0, "jsonrpc_compatible": false}')
    channel.close("body_end")
    got, want = _counters(otel)
    assert got == want
    assert otel.value("batch.closed") == 0
    assert otel.hist("batch.size") == (0, 0)


def test_empty_batch_with_another_jsonrpc_reply_is_a_violation(otel, clock):
    channel = _channel(otel, clock, bound=True)
    channel.sent(b"[]")
    channel.received(dumps([err(None, -32600, "Invalid Request")]))
    channel.close("body_end")
    got, want = _counters(
        otel, batch__null_id_response=1, batch__invalid_request=1, batch__protocol_violation=1
    )
    assert got == want
    assert otel.value("batch.protocol_violation", pairwatch__reason="reply_to_empty_batch") == 1

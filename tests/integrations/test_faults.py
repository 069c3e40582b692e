"""Every chaos fault through every HTTP client library, buffered and SSE, with exact counts."""

from __future__ import annotations

import json

import pytest
from http_drivers import instrumenting
from otel_support import PAIRING_COUNTERS

from pairwatch.chaos import Fault

BATCH = [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [f"p{i}"]} for i in range(4)]
NOTES = [{"jsonrpc": "2.0", "method": "echo", "params": ["n"]} for _ in range(2)]

ZERO = {**dict.fromkeys(PAIRING_COUNTERS, 0), "pairwatch.internal_errors": 0}

# fault -> counters that move (everything else must be zero), for JSON and for SSE replies.
# SSE replies carry one element per event; a cut stream delivers its first event whole.
COMMON = {
    "reorder": {"batch.out_of_order": 1},
    "drop": {"batch.missing_response": 1, "batch.response_count_mismatch": 1},
    "duplicate": {"batch.unknown_id_response": 1, "batch.response_count_mismatch": 1},
    "null_id": {
        "batch.null_id_response": 1,
        "batch.missing_response": 1,
        "batch.response_count_mismatch": 1,
    },
    "wrong_id": {"batch.unknown_id_response": 1, "batch.missing_response": 1},
    "id_type": {"batch.unknown_id_response": 1, "batch.missing_response": 1},
    "both_result_error": {"batch.invalid_response": 1},
    "bad_version": {"batch.invalid_response": 1},
    "unparseable": {
        "batch.invalid_response": 1,
        "batch.missing_response": 4,
        "batch.response_count_mismatch": 1,
    },
    "delay": {},
}
JSON_ONLY = {
    "single_for_batch": {
        "batch.protocol_violation": 1,
        "batch.null_id_response": 1,
        "batch.missing_response": 4,
        "batch.response_count_mismatch": 1,
    },
    "cut": {"batch.missing_response": 4, "batch.response_count_mismatch": 1},
}
SSE_ONLY = {
    # One event holding one error object: on an event stream that is one element of the
    # batch reply, so only its null id and the missing answers show.
    "single_for_batch": {
        "batch.null_id_response": 1,
        "batch.missing_response": 4,
        "batch.response_count_mismatch": 1,
    },
    "cut": {"batch.missing_response": 3, "batch.response_count_mismatch": 1},
}
DIAGNOSIS = {
    "reorder": "ok",
    "drop": "responses_missing",
    "duplicate": "server_id_echo_fault",
    "null_id": "server_null_id",
    "wrong_id": "server_id_echo_fault",
    "id_type": "id_type_mismatch",
    "both_result_error": "ok",
    "bad_version": "ok",
    "unparseable": "responses_missing",
    "delay": "ok",
    "single_for_batch": "server_null_id",
    "cut": "responses_missing",
}
FAULTS = sorted(DIAGNOSIS)


def books(otel):
    got = otel.counters()
    return {k: got.get(k, 0) for k in ZERO}


def expected(moves):
    want = dict(ZERO)
    want.update(moves)
    return want


def close_reason(fault, sse):
    if fault == "cut":
        return "stream_dropped"
    return "stream_end" if sse else "body_end"


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_counts(otel, chaos_server, driver, fault, sse):
    name, run = driver
    spec = Fault("delay", seconds=0.01) if fault == "delay" else Fault(fault)  # type: ignore[arg-type]
    chaos_server.set_faults([spec])
    url = chaos_server.sse_url if sse else chaos_server.url
    seen = run(url, json.dumps(BATCH).encode(), sse, instrumenting(otel))
    assert (seen.error is not None) == (fault == "cut"), seen
    moves = {**COMMON, **(SSE_ONLY if sse else JSON_ONLY)}[fault]
    assert books(otel) == expected(moves)
    assert otel.value("batch.requests") == 4
    integration = "httpx" if name.startswith("httpx") else name
    assert (
        otel.value(
            "batch.closed",
            pairwatch__diagnosis=DIAGNOSIS[fault],
            pairwatch__close_reason=close_reason(fault, sse),
            pairwatch__transport="sse" if sse else "http",
            pairwatch__integration=integration,
            server__address="127.0.0.1",
        )
        == 1
    )
    paired = 4 - moves.get("batch.missing_response", 0)
    assert otel.hist("batch.pair_latency")[0] == paired


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("mode", ["empty", "error"])
def test_reply_to_notifications(otel, chaos_server, driver, mode, sse):
    _, run = driver
    chaos_server.set_faults([Fault("reply_to_notifications", mode=mode)])
    url = chaos_server.sse_url if sse else chaos_server.url
    seen = run(url, json.dumps(NOTES).encode(), sse, instrumenting(otel))
    assert seen.error is None
    moves = {"batch.protocol_violation": 1}
    if mode == "error":
        moves["batch.null_id_response"] = 1
    assert books(otel) == expected(moves)
    assert otel.value("batch.protocol_violation", pairwatch__reason="reply_to_notifications") == 1
    assert otel.value("batch.closed", pairwatch__close_reason="no_response_expected") == 1


def test_notifications_answered_correctly_count_nothing(otel, chaos_server, driver):
    _, run = driver
    chaos_server.set_faults(None)
    seen = run(chaos_server.url, json.dumps(NOTES).encode(), False, instrumenting(otel))
    assert seen.body == b""
    assert books(otel) == ZERO
    assert otel.value("batch.closed", pairwatch__close_reason="no_response_expected") == 1


def test_sse_latency_is_per_event(otel, chaos_server, driver):
    """Per-element delays on an event stream: each id's latency is its own event's."""
    _, run = driver
    # A delay far above scheduling noise: on a loaded machine an undelayed event was seen
    # 0.37 s late, so bounds are relative (the delayed pair can only come later).
    chaos_server.set_faults([Fault("delay", delays=(0.0, 0.0, 1.0, 1.0))])
    run(chaos_server.sse_url, json.dumps(BATCH).encode(), True, instrumenting(otel))
    latencies = sorted(
        s.attributes["pairwatch.pair_latency"]
        for s in otel.spans()
        if s.attributes and "pairwatch.pair_latency" in s.attributes
    )
    assert len(latencies) == 4
    assert latencies[2] >= 1.0  # the server cannot send them sooner
    assert latencies[1] < latencies[2] - 0.5  # not stamped at the end of the stream
    assert books(otel) == ZERO

"""The caller sees the same bytes, objects and exceptions with and without pairwatch."""

from __future__ import annotations

import gzip
import json
import socket

import pytest
from http_drivers import SCRIPTS, bare, instrumenting

REQUEST = json.dumps(
    [
        {"jsonrpc": "2.0", "id": 1, "method": "a"},
        {"jsonrpc": "2.0", "id": 2, "method": "b"},
    ]
).encode()
REPLY = b'[{"jsonrpc":"2.0","id":2,"result":"B"},{"jsonrpc":"2.0","id":1,"result":"A"}]'
SSE = {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"}

# Event boundaries fall inside chunks, a CRLF is split across two chunks, one event's data
# spans two lines, comments and a non-message event are interleaved.
SSE_CHUNKS = [
    b': keep-alive\r\n\r\nretry: 100\r\ndata: {"jsonrpc":"2.0",',
    b'"id":1,"result":"A"}\r',
    b'\n\r\nevent: message\ndata: [{"jsonrpc":"2.0","id":2,',
    b'\ndata: "result":"B"}]\n\nevent: ping\ndata: not json\n\n',
]

SCRIPTS.update(
    {
        "/json": (200, {"Content-Type": "application/json"}, [REPLY], False),
        "/gzip": (
            200,
            {"Content-Type": "application/json", "Content-Encoding": "gzip"},
            [gzip.compress(REPLY)],
            False,
        ),
        "/sse": (200, SSE, SSE_CHUNKS, False),
        "/sse-cut": (200, SSE, [*SSE_CHUNKS[:2], b"\n\r\ndata: [{"], True),
        "/cut": (200, {"Content-Type": "application/json"}, [REPLY[:30]], True),
        "/html": (502, {"Content-Type": "text/html"}, [b"<html>bad gateway</html>"], False),
        "/error": (
            500,
            {"Content-Type": "application/json"},
            [b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}'],
            False,
        ),
    }
)

PATHS = ["/json", "/gzip", "/sse", "/sse-cut", "/cut", "/html", "/error"]


@pytest.mark.parametrize("path", PATHS)
def test_same_result_with_and_without(otel, scripted, driver, path):
    _, run = driver
    sse = path.startswith("/sse")
    without = run(scripted + path, REQUEST, sse, bare)
    with_pw = run(scripted + path, REQUEST, sse, instrumenting(otel))
    assert with_pw == without
    assert (with_pw.error is not None) == path.endswith("cut")
    assert otel.value("batch.requests") == 2
    assert otel.value("pairwatch.internal_errors") == 0


def closed_reasons(otel):
    return {
        a["pairwatch.close_reason"]: otel.value(
            "batch.closed", pairwatch__close_reason=a["pairwatch.close_reason"]
        )
        for a in otel.attrs("batch.closed")
    }


def test_gzip_and_split_sse_pair_cleanly(otel, scripted, driver):
    _, run = driver
    for path in ("/json", "/gzip", "/sse"):
        run(scripted + path, REQUEST, path == "/sse", instrumenting(otel))
    counters = otel.counters()
    assert counters.pop("batch.requests") == 6
    assert counters.pop("batch.closed") == 3
    assert counters.pop("batch.out_of_order") == 2  # /json and /gzip answer 2 before 1
    assert counters == {}
    assert otel.hist("batch.pair_latency")[0] == 6
    assert closed_reasons(otel) == {"body_end": 2, "stream_end": 1}


def test_sse_cut_mid_event(otel, scripted, driver):
    _, run = driver
    seen = run(scripted + "/sse-cut", REQUEST, True, instrumenting(otel))
    assert seen.error is not None
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 1
    assert otel.hist("batch.pair_latency")[0] == 1
    assert otel.value("batch.invalid_response") == 0  # the partial event is discarded


def test_html_and_error_status_bodies(otel, scripted, driver):
    _, run = driver
    run(scripted + "/html", REQUEST, False, instrumenting(otel))
    assert otel.value("batch.invalid_response", pairwatch__reason="unparseable") == 1
    assert otel.value("batch.missing_response") == 2
    run(scripted + "/error", REQUEST, False, instrumenting(otel))
    assert otel.value("batch.null_id_response") == 1
    assert otel.value("batch.protocol_violation", pairwatch__reason="single_reply_to_batch") == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_send_failure_raises_the_same_and_closes(otel, driver):
    _, run = driver
    url = f"http://127.0.0.1:{_closed_port()}/"
    without = run(url, REQUEST, False, bare)
    with_pw = run(url, REQUEST, False, instrumenting(otel))
    assert with_pw == without
    assert with_pw.error is not None
    assert otel.value("batch.missing_response", pairwatch__close_reason="send_failed") == 2
    assert otel.value("batch.closed", pairwatch__close_reason="send_failed") == 1


def test_non_jsonrpc_traffic_is_untracked(otel, scripted, driver):
    _, run = driver
    for body in (b"", b"hello", b'{"query": "{ user }"}', b"<xml/>", b"[1, 2, 3]"):
        assert run(scripted + "/json", body, False, instrumenting(otel)).body == REPLY
    assert otel.counters() == {}
    assert otel.collect() == []

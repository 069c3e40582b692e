"""``pairwatch audit`` on JSON Lines logs (a real requests client) and stdio transcripts
(a real chaos stdio server subprocess), with exact expected counts."""

from __future__ import annotations

import json

import pytest
import requests
from recording import JsonlRecorder, record_stdio

from pairwatch.audit import audit_file
from pairwatch.audit.report import build
from pairwatch.chaos import ChaosServer, Fault, FaultScript
from pairwatch.cli import main


def req(i: int, method: str = "echo") -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": i, "method": method, "params": [i]}


@pytest.fixture(scope="module")
def jsonl_capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("jsonl") / "client.jsonl"
    recorder = JsonlRecorder(path)
    script = [None, Fault("drop", count=2), Fault("null_id"), Fault("unparseable"), None]
    with ChaosServer(FaultScript(script)) as server, requests.Session() as session:
        recorder.post(session, server.url, [req(1), req(2), req(3)])
        recorder.post(session, server.url, [req(4), req(5), req(6)])
        recorder.post(session, server.url, [req(7), req(8)])
        recorder.post(session, server.url, req(9))
        recorder.post(session, server.url, req(10))
        injected = list(server.injected)
    recorder.close()
    return path, injected


def test_jsonl_counts_are_exact(jsonl_capture):
    path, injected = jsonl_capture
    assert [i.kind for i in injected] == ["drop", "null_id", "unparseable"]
    report = build([audit_file(str(path), keep_worst=10)], [])
    f = report["files"][0]
    assert f["format"] == "jsonl"
    assert f["timed"] is True
    assert f["clock_went_back"] == 0
    assert report["totals"] == {
        "batches": 5,
        "requests": 10,
        "missing": 4,  # 2 dropped, 1 answered with a null id, 1 unparseable reply
        "unknown_id": 0,
        "null_id": 1,
        "count_mismatch": 3,
        "duplicate_id": 0,
        "invalid_response": 1,  # the unparseable body
        "invalid_request": 0,
        "out_of_order": 0,
        "protocol_violation": 0,
        "internal_errors": 0,
        "not_ok": 3,
    }
    (http,) = f["channels"]
    assert http["transport"] == "http"
    assert http["diagnoses"] == {
        "ok": 2,
        "responses_missing": 2,
        "server_null_id": 1,  # null_id: every request element was valid
    }
    dropped = next(w for w in f["worst"] if w["missing"] == 2)
    assert dropped["missing_ids"] == sorted(injected[0].ids)
    assert dropped["where"] == "line 4"  # sent, received, closed: the second exchange
    assert http["latency_seconds"]["count"] == 6


def test_jsonl_raw_and_message_lines_mean_the_same(tmp_path):
    lines = [
        {"ts": 1.0, "dir": "sent", "channel": "a", "message": [req(1), req(2)]},
        {
            "ts": 1.5,
            "dir": "received",
            "channel": "a",
            "raw": json.dumps({"jsonrpc": "2.0", "id": 2, "result": 0}),
        },
        {
            "ts": "1970-01-01T00:00:02Z",
            "dir": "received",
            "channel": "a",
            "message": {"jsonrpc": "2.0", "id": 1, "result": 0},
        },
        {"ts": 3.0, "direction": "sent", "channel": "b", "message": req(3)},
        {"ts": 40.0, "dir": "sent", "channel": "b", "message": req(4)},
        {"ts": 40.5, "dir": "closed", "channel": "b", "reason": "stream_dropped"},
    ]
    path = tmp_path / "log.ndjson"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    report = build([audit_file(str(path))], [])
    ch = report["files"][0]["channels"][0]
    assert ch["transport"] == "generic"
    assert ch["counters"]["batches"] == 3
    assert ch["counters"]["missing"] == 2
    assert ch["close_reasons"] == {"complete": 1, "timeout": 1, "stream_dropped": 1}
    assert ch["latency_seconds"]["count"] == 2
    assert ch["latency_seconds"]["max"] == pytest.approx(1.0)


STDIO_MESSAGES = [
    req(1, "initialize"),
    req(2, "tools/list"),  # dropped
    req(3, "tools/call"),  # echoed as "3"
    [req(4), req(5), req(6)],  # reversed
    {"jsonrpc": "2.0", "method": "notifications/progress"},  # an exchange with no reply
    req(7),  # clean
    req(8),  # cut: half a line, then the server's stdout closes
]


@pytest.fixture(scope="module")
def stdio_capture(tmp_path_factory):
    path = tmp_path_factory.mktemp("stdio") / "session.txt"
    record_stdio(path, "none;drop;id_type;reorder:mode=reverse;none;none;cut", STDIO_MESSAGES)
    return path


def test_stdio_transcript_counts_are_exact(stdio_capture):
    report = build([audit_file(str(stdio_capture), keep_worst=10)], [])
    f = report["files"][0]
    assert f["format"] == "stdio"
    (stdio,) = f["channels"]
    assert stdio["transport"] == "stdio"
    assert report["totals"] == {
        "batches": 7,
        "requests": 8,
        "missing": 3,  # 2 dropped, 3 answered as "3", 8 cut
        # "3": a single reply on a stream, tied to batch 3 because it holds id 3 as a number
        "unknown_id": 1,
        "null_id": 0,
        "count_mismatch": 2,  # batch 3 got one reply for one request, just not a pairing one
        "duplicate_id": 0,
        "invalid_response": 1,  # the half line
        "invalid_request": 0,
        "out_of_order": 1,
        "protocol_violation": 0,
        "internal_errors": 0,
        "not_ok": 3,
    }
    assert stdio["close_reasons"] == {
        "complete": 3,
        "no_response_expected": 1,
        "stream_end": 3,
    }
    missing = sorted(i for w in f["worst"] for i in w["missing_ids"])
    assert missing == [2, 3, 8]


def test_stdio_via_cli_with_thresholds(stdio_capture, capsys):
    assert main(["audit", str(stdio_capture), "--fail-on", "missing>=3"]) == 1
    assert main(["audit", str(stdio_capture), "--fail-on", "missing>3"]) == 0
    out = capsys.readouterr().out
    assert "stdio transcript" in out
    assert "--fail-on missing>3: missing = 3 -> ok" in out


def test_stdio_without_times_reports_no_latency(tmp_path, capsys):
    path = tmp_path / "plain.log"
    path.write_text(
        '--> {"jsonrpc":"2.0","id":0,"method":"a"}\n<-- {"jsonrpc":"2.0","id":"0","result":1}\n'
    )
    assert main(["audit", str(path), "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["files"][0]
    assert f["timed"] is False
    assert f["channels"][0]["latency_seconds"] is None
    assert f["channels"][0]["counters"]["unknown_id"] == 1

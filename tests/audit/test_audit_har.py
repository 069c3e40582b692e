"""``pairwatch audit`` on HAR captures recorded from real httpx runs against the chaos server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from recording import HarRecorder

from pairwatch.audit import audit_file
from pairwatch.audit.report import build
from pairwatch.chaos import ChaosServer, Fault, FaultScript
from pairwatch.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")


def batch(first: int, n: int = 3, method: str = "echo") -> list[dict[str, object]]:
    return [
        {"jsonrpc": "2.0", "id": first + i, "method": method, "params": [first + i]}
        for i in range(n)
    ]


# One fault per exchange, in order; every batch has three requests (ids 10k, 10k+1, 10k+2).
SCRIPT = [
    None,  # 0 clean
    Fault("drop"),  # 1 one reply dropped
    Fault("reorder", mode="reverse"),  # 2 legal, but breaks position pairing
    Fault("wrong_id"),  # 3 an id echoed wrongly
    Fault("id_type"),  # 4 0 -> "0"
    Fault("duplicate"),  # 5 one reply twice
    Fault("null_id"),  # 6 one reply with id null
    Fault("reply_to_notifications", mode="empty"),  # 7 notifications answered with []
    Fault("bad_version"),  # 8 "jsonrpc": "1.0" on one reply
    Fault("delay", seconds=0.3),  # 9 slow replies
    Fault("cut"),  # 10 body cut mid-way: the client sees an error
    None,  # 11 SSE, clean
]


@pytest.fixture(scope="module")
def capture(tmp_path_factory) -> tuple[Path, list]:
    recorder = HarRecorder()
    with (
        ChaosServer(FaultScript(SCRIPT)) as server,
        httpx.Client(transport=recorder, timeout=10) as client,
    ):
        for n in range(11):
            payload = [{"jsonrpc": "2.0", "method": "tick"}] * 2 if n == 7 else batch(n * 10000)
            try:
                client.post(server.url, json=payload)
            except httpx.RemoteProtocolError:
                assert n == 10
        client.post(server.sse_url, json=batch(110000))
        client.get(server.url)  # not JSON-RPC: skipped
        injected = list(server.injected)
    path = tmp_path_factory.mktemp("har") / "capture.har"
    return recorder.write(path), injected


EXPECTED = {
    "batches": 12,
    "requests": 33,
    "missing": 7,  # drop 1 + wrong_id 1 + id_type 1 + null_id 1 + cut 3
    "unknown_id": 3,  # wrong_id, id_type, duplicate
    "null_id": 1,
    "count_mismatch": 4,  # drop, duplicate, null_id, cut
    "duplicate_id": 0,
    "invalid_response": 1,  # bad_version
    "invalid_request": 0,
    "out_of_order": 1,
    "protocol_violation": 1,  # [] for a notification-only batch
    "internal_errors": 0,
    "not_ok": 6,
}


def test_counts_and_diagnoses_are_exact(capture):
    path, injected = capture
    assert [i.kind for i in injected] == [f.kind for f in SCRIPT[1:11] if f is not None], (
        "the server injected what the script says"
    )
    report = build([audit_file(str(path))], [])
    f = report["files"][0]
    assert f["read"] == 13
    assert f["skipped"] == {"not JSON-RPC": 1}
    assert report["totals"] == EXPECTED
    by = {c["transport"]: c for c in f["channels"]}
    assert by["sse"]["counters"]["batches"] == 1
    assert by["sse"]["diagnoses"] == {"ok": 1}
    assert by["http"]["diagnoses"] == {
        "ok": 5,  # clean, reorder, notifications (answered, but nothing pending), bad_version,
        # delay
        "id_type_mismatch": 1,
        "server_null_id": 1,  # null_id: every request element was valid
        "responses_missing": 2,  # drop, cut
        "server_id_echo_fault": 2,  # duplicate, and wrong_id (no id was sent twice)
    }
    assert by["http"]["close_reasons"] == {
        "body_end": 9,
        "no_response_expected": 1,
        "stream_dropped": 1,
    }


def test_worst_batches_name_the_injected_ids(capture):
    path, injected = capture
    worst = build([audit_file(str(path), keep_worst=20)], [])["files"][0]["worst"]
    by_diag = {w["diagnosis"]: w for w in worst}
    drop = next(i for i in injected if i.kind == "drop")
    dropped = [w for w in worst if w["close_reason"] == "body_end" and w["missing"] == 1]
    assert [w["missing_ids"] for w in dropped if w["diagnosis"] == "responses_missing"] == [
        list(drop.ids)
    ]
    wrong = next(i for i in injected if i.kind == "wrong_id")
    (rewritten,) = [
        w for w in worst if w["diagnosis"] == "server_id_echo_fault" and w["missing_ids"]
    ]
    assert rewritten["missing_ids"] == list(wrong.ids)
    assert rewritten["unknown_ids"] == [wrong.ids[0] + 1_000_000_007]
    typed = next(i for i in injected if i.kind == "id_type")
    assert by_diag["id_type_mismatch"]["unknown_ids"] == [str(typed.ids[0])]
    assert by_diag["id_type_mismatch"]["missing_ids"] == list(typed.ids)
    cut = [w for w in worst if w["close_reason"] == "stream_dropped"]
    assert [w["missing_ids"] for w in cut] == [[100000, 100001, 100002]]
    assert all(w["where"].startswith("entry ") for w in worst)


def test_latency_comes_from_the_capture(capture):
    path, _ = capture
    f = build([audit_file(str(path))], [])["files"][0]
    http = next(c for c in f["channels"] if c["transport"] == "http")["latency_seconds"]
    # 33 requests - 7 missing = 26 paired, 3 of them over SSE
    assert http["count"] == 23
    assert 0.3 <= http["max"] < 5.0  # the delayed exchange
    assert 0 < http["min"] <= http["p50"] <= http["p95"] <= http["p99"] <= http["max"]


def test_a_short_timeout_turns_slow_replies_into_missing(capture):
    path, _ = capture
    report = build([audit_file(str(path), timeout=0.2)], [])
    totals = report["totals"]
    assert totals["missing"] == EXPECTED["missing"] + 3
    # The late replies arrive after their batch timed out: unknown, as a live client sees them.
    assert totals["unknown_id"] == EXPECTED["unknown_id"] + 3


def test_base64_bodies_read_the_same(tmp_path, capture):
    path, _ = capture
    har = json.loads(path.read_text())
    for entry in har["log"]["entries"]:
        content = entry["response"]["content"]
        if "text" in content:
            import base64

            content["text"] = base64.b64encode(content["text"].encode()).decode()
            content["encoding"] = "base64"
    other = tmp_path / "b64.har"
    other.write_text(json.dumps(har))
    assert build([audit_file(str(other))], [])["totals"] == EXPECTED


def test_cli_subprocess_json_prometheus_and_fail_on(tmp_path, capture):
    path, _ = capture
    prom = tmp_path / "audit.prom"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pairwatch",
            "audit",
            str(path),
            "--json",
            "--prometheus",
            str(prom),
            "--fail-on",
            "missing>0",
            "--fail-on",
            "unknown_id>=4",
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert run.returncode == 1, run.stderr
    assert run.stderr == ""  # not a terminal: no progress bar, no log noise
    report = json.loads(run.stdout)
    assert report["totals"] == EXPECTED
    assert [(t["rule"], t["value"], t["failed"]) for t in report["thresholds"]] == [
        ("missing>0", 7, True),
        ("unknown_id>=4", 3, False),
    ]
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}

    def total(name: str) -> float:
        return sum(s.value for s in families[name].samples if s.name == name + "_total")

    assert total("batch_missing_response") == 7
    assert total("batch_unknown_id_response") == 3
    assert total("batch_closed") == 12
    sample = next(s for s in families["batch_missing_response"].samples)
    assert sample.labels["capture"] == str(path)
    assert sample.labels["pairwatch_integration"] == "audit"
    latency = families["batch_pair_latency_seconds"]
    count = sum(s.value for s in latency.samples if s.name.endswith("_count"))
    assert count == 26


def test_cli_in_process_text_report(capsys, capture):
    path, _ = capture
    status = main(["audit", str(path), "--fail-on", "not_ok<=6"])
    out = capsys.readouterr().out
    assert status == 1
    assert "batch.missing_response" in out
    assert "worst batches:" in out
    assert "id_type_mismatch" in out
    assert "latency p99 (ms)" in out
    assert main(["audit", str(path), "--fail-on", "protocol_violation>1"]) == 0

"""JSON-RPC is recognised by structure in every capture format, and HAR side files are read
only where a recorder puts them.

Each stream case is differential: the capture with non-JSON-RPC JSON mixed in must count
exactly what the capture without it counts, and a capture of that JSON alone counts zero.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from pairwatch.audit import CaptureError, audit_file
from pairwatch.audit.report import build

SRC = str(Path(__file__).resolve().parents[2] / "src")
BEACON = {"event": "client_ready", "transport": "jsonrpc"}
LOG_RECORD = {"level": "info", "msg": "jsonrpc server ready", "transport": "jsonrpc"}
SENT = [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0", "id": 2, "method": "b"}]
REPLY = [{"jsonrpc": "2.0", "id": 1, "result": 1}]  # id 2 never answered


def _totals(path: Path, fmt: str | None = None) -> dict[str, Any]:
    return build([audit_file(str(path), fmt)], [])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pairwatch", "audit", *args],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def test_jsonl_skips_json_that_is_not_jsonrpc(tmp_path):
    def line(direction: str, **kw: Any) -> str:
        return json.dumps({"dir": direction, "channel": "c", **kw})

    clean = [line("sent", message=SENT), line("received", message=REPLY)]
    noisy = [
        line("sent", message=BEACON),
        clean[0],
        line("received", raw=json.dumps(BEACON)),
        line("received", message=LOG_RECORD),
        clean[1],
    ]
    (tmp_path / "clean.jsonl").write_text("\n".join(clean) + "\n")
    (tmp_path / "noisy.jsonl").write_text("\n".join(noisy) + "\n")
    (tmp_path / "beacon.jsonl").write_text("\n".join(noisy[i] for i in (0, 2, 3)) + "\n")
    base = _totals(tmp_path / "clean.jsonl")
    assert base["totals"]["missing"] == 1
    assert base["totals"]["batches"] == 1
    mixed = _totals(tmp_path / "noisy.jsonl")
    assert mixed["totals"] == base["totals"]
    assert mixed["files"][0]["skipped"] == {"not JSON-RPC": 3}
    alone = _totals(tmp_path / "beacon.jsonl")
    assert set(alone["totals"].values()) == {0}
    assert alone["files"][0]["channels"] == []


def test_stdio_skips_json_lines_that_are_not_jsonrpc(tmp_path):
    clean = [f"> {json.dumps(SENT)}", f"< {json.dumps(REPLY)}"]
    noisy = [
        f"< {json.dumps(LOG_RECORD)}",
        clean[0],
        f"> {json.dumps(BEACON)}",
        clean[1],
        '< {"jsonrpc": "2.0", "id": 9, "res',  # cut mid-way: not JSON, so it still counts
    ]
    (tmp_path / "clean.txt").write_text("\n".join(clean) + "\n")
    (tmp_path / "noisy.txt").write_text("\n".join(noisy) + "\n")
    base = _totals(tmp_path / "clean.txt", "stdio")["totals"]
    mixed = _totals(tmp_path / "noisy.txt", "stdio")
    assert mixed["files"][0]["skipped"] == {"not JSON-RPC": 2}
    assert mixed["totals"] == {**base, "invalid_response": base["invalid_response"] + 1}


def _har(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"log": {"version": "1.2", "creator": {"name": "t", "version": "0"}, "entries": entries}}


def _entry(post: dict[str, Any], content: dict[str, Any], body_size: int) -> dict[str, Any]:
    return {
        "startedDateTime": "2026-01-01T00:00:00.000Z",
        "time": 5,
        "request": {
            "method": "POST",
            "url": "http://127.0.0.1:9/",
            "headers": [],
            "bodySize": body_size,
            "postData": {"mimeType": "application/json", "params": [], **post},
        },
        "response": {"status": 200, "headers": [], "content": content},
        "timings": {"send": 0, "wait": 5, "receive": 0},
    }


def test_a_side_file_name_never_leaves_the_capture_folder(tmp_path):
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps(SENT))
    inner = tmp_path / "capture"
    inner.mkdir()
    (inner / "reply.json").write_text(json.dumps(REPLY))
    size = len(json.dumps(SENT))
    entry = _entry(
        {"text": "", "_file": "../secret.json"}, {"size": 40, "_file": "reply.json"}, size
    )
    har = inner / "capture.har"
    har.write_text(json.dumps(_har([entry])))
    f = _totals(har)["files"][0]
    assert f["bodies_absent"] == {"request body in a side file that is not there": 1}
    assert f["bodies_from_side_files"] == 0
    # The same body under a bare name beside the HAR is read, request and reply.
    (inner / "sent.json").write_text(json.dumps(SENT))
    entry["request"]["postData"]["_file"] = "sent.json"
    har.write_text(json.dumps(_har([entry])))
    report = _totals(har)
    assert report["files"][0]["bodies_from_side_files"] == 2
    assert report["totals"]["missing"] == 1
    assert report["status"] == 0


def test_a_reply_body_omitted_alone_is_reported(tmp_path):
    entry = _entry({"text": json.dumps(SENT)}, {"size": 40, "mimeType": "application/json"}, 9)
    har = tmp_path / "c.har"
    har.write_text(json.dumps(_har([entry])))
    run = _cli(str(har), "--json")
    assert run.returncode == 3
    f = json.loads(run.stdout)["files"][0]
    assert f["bodies_absent"] == {"response body omitted when recorded": 1}
    assert "1 body is not in the capture" not in run.stderr  # no channel: none counted
    assert "the capture holds no bodies to pair (1 response body omitted" in run.stderr


def test_zip_archives_need_exactly_one_har(tmp_path):
    none = tmp_path / "none.zip"
    with zipfile.ZipFile(none, "w") as z:
        z.writestr("reply.json", json.dumps(REPLY))
    two = tmp_path / "two.zip"
    with zipfile.ZipFile(two, "w") as z:
        z.writestr("a.har", json.dumps(_har([])))
        z.writestr("b.har", json.dumps(_har([])))
    with pytest.raises(CaptureError, match=r"exactly one \.har member; found none"):
        audit_file(str(none))
    run = _cli(str(two))
    assert run.returncode == 2
    why = "a HAR archive holds exactly one .har member; found a.har, b.har"
    assert run.stderr == f"pairwatch audit: error: {two}: {why}\n"


def test_a_zip_is_recognised_by_its_bytes(tmp_path):
    odd = tmp_path / "capture.bin"  # an archive under a name that says nothing
    size = len(json.dumps(SENT))
    entry = _entry({"text": "", "_file": "s.json"}, {"size": 40, "_file": "r.json"}, size)
    with zipfile.ZipFile(odd, "w") as z:
        z.writestr("har.har", json.dumps(_har([entry])))
        z.writestr("s.json", json.dumps(SENT))
        z.writestr("r.json", json.dumps(REPLY))
    report = _totals(odd)
    assert report["files"][0]["format"] == "har"
    assert report["files"][0]["bodies_from_side_files"] == 2
    assert report["totals"]["missing"] == 1


def test_some_bodies_absent_still_exit_3_with_the_rest_counted(tmp_path):
    whole = _entry({"text": json.dumps(SENT)}, {"size": 40, "text": json.dumps(REPLY)}, 9)
    omitted = _entry({"text": ""}, {"size": 40}, len(json.dumps(SENT)))
    har = tmp_path / "c.har"
    har.write_text(json.dumps(_har([whole, omitted])))
    run = _cli(str(har), "--json", "--fail-on", "missing>5")
    assert run.returncode == 3  # the rule holds on what was read; the rest is unknowable
    report = json.loads(run.stdout)
    assert report["totals"]["missing"] == 1
    assert report["thresholds"][0]["failed"] is False
    assert run.stderr.startswith(f"pairwatch audit: {har}: 1 body is not in the capture")
    assert "the counts cover only the rest" in run.stderr


def test_a_request_without_post_data_but_with_a_size_is_absent(tmp_path):
    entry = _entry({}, {"size": 40, "text": json.dumps(REPLY)}, 120)
    del entry["request"]["postData"]
    get = _entry({}, {"size": 5, "text": "hello"}, 0)
    get["request"]["method"] = "GET"
    del get["request"]["postData"]
    har = tmp_path / "c.har"
    har.write_text(json.dumps(_har([entry, get])))
    f = _totals(har)["files"][0]
    assert f["bodies_absent"] == {"request body omitted when recorded": 1}
    assert f["skipped"] == {"not JSON-RPC": 1}  # the GET: no body, nothing to judge

"""Malformed captures: one clear line naming the file and the line or entry, exit status 2,
never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pairwatch.cli import main

SRC = str(Path(__file__).resolve().parents[2] / "src")

ENTRY = {
    "startedDateTime": "2024-04-09T12:00:00.000Z",
    "time": 12.5,
    "request": {
        "method": "POST",
        "url": "http://127.0.0.1:8545/",
        "postData": {
            "mimeType": "application/json",
            "text": '{"jsonrpc":"2.0","id":1,"method":"m"}',
        },
    },
    "response": {
        "status": 200,
        "content": {"mimeType": "application/json", "text": '{"jsonrpc":"2.0","id":1,"result":0}'},
    },
    "timings": {"send": 0, "wait": 12, "receive": 0.5},
}


def har(entries: list[object]) -> str:
    return json.dumps({"log": {"version": "1.2", "entries": entries}}, indent=1)


def without_response() -> str:
    broken = {k: v for k, v in ENTRY.items() if k != "response"}
    return har([ENTRY, ENTRY, broken])


CASES = {
    "truncated.har": (
        har([ENTRY] * 3)[:-200],
        "truncated.har: entry 2 (log.entries[2]): truncated JSON",
    ),
    "no-response.har": (
        without_response(),
        "no-response.har: entry 2 (log.entries[2]): has no response",
    ),
    "syntax.har": (
        har([ENTRY] * 2).replace('"time": 12.5', '"time": 12.5,,', 1),
        "syntax.har: entry 0 (log.entries[0]): invalid JSON",
    ),
    "not-har.har": ('["a", "list"]', "not-har.har: character 0: not a HAR file"),
    "no-entries.har": ('{"log": {"version": "1.2"}}', "no-entries.har: log: not a HAR file"),
    "garbage.har": ("\x00\x01binary", "garbage.har: character 0: not a HAR file"),
    "no-dir.jsonl": (
        '{"ts": 1, "dir": "sent", "message": {"jsonrpc":"2.0","id":1,"method":"m"}}\n'
        '{"ts": 2, "message": {"jsonrpc":"2.0","id":1,"result":1}}\n',
        'no-dir.jsonl: line 2: no direction field: "dir" must be',
    ),
    "bad-line.jsonl": (
        '{"ts": 1, "dir": "sent", "mess',
        "bad-line.jsonl: line 1: not a JSON object",
    ),
    "bad-time.jsonl": (
        '{"ts": "yesterday", "dir": "sent", "raw": "{}"}\n',
        "bad-time.jsonl: line 1: 'ts' is neither a number of seconds nor an ISO-8601 time",
    ),
    "no-body.jsonl": (
        '{"dir": "sent"}\n',
        'no-body.jsonl: line 1: a sent or received line needs "message" or "raw"',
    ),
    "untagged.txt": (
        '> {"jsonrpc":"2.0","id":1,"method":"m"}\n{"jsonrpc":"2.0","id":1,"result":1}\n',
        "untagged.txt: line 2: not tagged as sent or received",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_capture_is_one_clear_line(tmp_path, capsys, name):
    text, message = CASES[name]
    path = tmp_path / name
    path.write_text(text)
    assert main(["audit", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"pairwatch audit: error: {tmp_path}/")
    assert message in captured.err
    assert captured.err.count("\n") == 1
    assert "Traceback" not in captured.err


@pytest.mark.parametrize("suffix", [".har", ".jsonl", ".txt"])
def test_binary_garbage_in_any_format(tmp_path, capsys, suffix):
    path = tmp_path / f"garbage{suffix}"
    path.write_bytes(b"> \x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe" * 50)
    assert (
        main(
            [
                "audit",
                "--format",
                {".har": "har", ".jsonl": "jsonl", ".txt": "stdio"}[suffix],
                str(path),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert f"{path}: " in err
    assert "Traceback" not in err
    assert ("line 1" in err) or ("character 0" in err)


def test_missing_file_and_undetectable_format(tmp_path, capsys):
    assert main(["audit", str(tmp_path / "absent.har")]) == 2
    assert "absent.har: No such file or directory" in capsys.readouterr().err
    odd = tmp_path / "capture.bin"
    odd.write_text("hello\n")
    assert main(["audit", str(odd)]) == 2
    assert "cannot tell the capture format" in capsys.readouterr().err


def test_bad_fail_on_rule_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["audit", "x.har", "--fail-on", "mising>0"])
    assert exc.value.code == 2
    assert "unknown counter 'mising'" in capsys.readouterr().err


def test_subprocess_error_has_no_traceback(tmp_path):
    path = tmp_path / "cut.har"
    path.write_text(har([ENTRY] * 5)[:-300])
    run = subprocess.run(
        [sys.executable, "-m", "pairwatch", "audit", str(path)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith(
        f"pairwatch audit: error: {path}: entry 4 (log.entries[4]): truncated JSON"
    )
    assert "Traceback" not in run.stderr

"""stdio server and line proxy, run as real subprocesses via the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from chaos_helpers import batch, ids, subprocess_env

CHAOS = [sys.executable, "-m", "pairwatch.chaos"]


def run(args, lines, timeout=15):
    data = "".join(json.dumps(x) + "\n" if not isinstance(x, str) else x + "\n" for x in lines)
    proc = subprocess.run(
        CHAOS + args,
        input=data.encode(),
        capture_output=True,
        timeout=timeout,
        env=subprocess_env(),
    )
    return proc.returncode, proc.stdout, proc.stderr


def replies(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def test_stdio_server_answers_concurrently():
    slow = {"jsonrpc": "2.0", "id": "slow", "method": "sleep", "params": [0.3]}
    rc, out, err = run(["stdio"], [slow, batch(2), "{oops", {"jsonrpc": "2.0", "method": "echo"}])
    assert rc == 0
    assert b"ready" in err
    got = replies(out)
    assert ids(got[-1]) == ["slow"]  # overtaken by everything sent after it
    assert sorted(str(ids(g)) for g in got[:2]) == ["[0, 1]", "[None]"]
    assert len(got) == 3  # the notification got nothing


def test_stdio_script_and_cut():
    rc, out, _ = run(["stdio", "--script=reorder;cut"], [batch(3), batch(3), batch(3)])
    assert rc == 0
    first, rest = out.split(b"\n", 1)
    assert ids(json.loads(first)) == [2, 1, 0]
    full = json.dumps(
        [{"jsonrpc": "2.0", "id": i, "result": [f"p{i}"]} for i in range(3)], separators=(",", ":")
    ).encode()
    assert rest == full[: len(full) // 2]  # half a line, then stdout closed: nothing after it


UPSTREAM = textwrap.dedent(
    """
    import json, sys
    for line in sys.stdin:
        msg = json.loads(line)
        print(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress"}), flush=True)
        if isinstance(msg, dict) and "id" in msg:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": msg.get("params")}
            print(json.dumps(reply), flush=True)
            print(json.dumps({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}), flush=True)
    """
)


def test_stdio_proxy_faults_only_responses(tmp_path):
    script = tmp_path / "upstream.py"
    script.write_text(UPSTREAM)
    rc, out, _ = run(
        [
            "stdio-proxy",
            "--fault",
            "null_id",
            "--record",
            str(tmp_path / "rec.jsonl"),
            "--",
            sys.executable,
            str(script),
        ],
        [{"jsonrpc": "2.0", "id": 5, "method": "echo", "params": [1]}],
    )
    assert rc == 0
    got = replies(out)
    assert got[0] == {"jsonrpc": "2.0", "method": "notifications/progress"}
    assert got[1] == {"jsonrpc": "2.0", "id": None, "result": [1]}
    assert got[2] == {"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}  # server request untouched
    record = [json.loads(x) for x in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["ids"]) for r in record] == [("null_id", [5])]


def test_stdio_proxy_can_answer_notifications(tmp_path):
    script = tmp_path / "upstream.py"
    script.write_text(UPSTREAM)
    rc, out, _ = run(
        ["stdio-proxy", "--fault", "reply_to_notifications", "--", sys.executable, str(script)],
        [[{"jsonrpc": "2.0", "method": "tick"}]],
    )
    assert rc == 0
    got = replies(out)
    assert [] in got
    assert {"jsonrpc": "2.0", "method": "notifications/progress"} in got

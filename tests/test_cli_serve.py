"""``pairwatch serve``: the test server as a documented command whose help says everything."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request

from pairwatch.chaos.backend import DEFAULT_HANDLERS, METHOD_HELP
from pairwatch.chaos.faults import FAULT_HELP, KINDS


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pairwatch", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_help_lists_every_method_and_every_fault():
    assert set(METHOD_HELP) == set(DEFAULT_HANDLERS)
    assert set(FAULT_HELP) == set(KINDS)
    for argv in (["serve", "--help"], ["serve"]):
        out = run(*argv)
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("usage: pairwatch serve")
        listed = {line.split()[0] for line in out.stdout.splitlines() if line.startswith("  ")}
        assert set(DEFAULT_HANDLERS) <= listed
        assert set(KINDS) <= listed
    assert "serve" in run("--help").stdout


def test_serve_answers_with_the_fault_it_was_given():
    proc = subprocess.Popen(
        [sys.executable, "-m", "pairwatch", "serve", "http", "--port", "0", "--fault", "drop"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        body = [{"jsonrpc": "2.0", "id": i, "method": "add", "params": [i, 1]} for i in (1, 2)]
        request = urllib.request.Request(
            url, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        replies = json.loads(urllib.request.urlopen(request, timeout=10).read())
        assert len(replies) == 1  # one of two dropped
        assert replies[0]["result"] == replies[0]["id"] + 1
    finally:
        proc.terminate()
        assert proc.wait(10) == 0


def test_a_bad_fault_is_one_line_and_status_2():
    out = run("serve", "http", "--fault", "nonsense")
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1

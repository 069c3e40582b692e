"""Hostile input beyond one client read: the middleware, capture, the audit, exit, /metrics.

Each case runs in a child under an address-space limit (``child.py``) or is a child itself
(exit), so a regression fails here instead of exhausting the machine.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from components import need
from hostile_support import MIB, both, run_child

import pairwatch
from pairwatch.otel import scrape_server


def test_binary_uploads_stream_through_the_middleware_untouched():
    """8 concurrent 48 MB ``application/octet-stream`` uploads: nothing is buffered."""
    need("uvicorn", "pip install uvicorn")
    spec = {"case": "middleware", "what": "uploads", "upload_bytes": 48 * MIB}
    bare, seen = both(spec)
    assert seen["seen"] == bare["seen"]
    extra = seen["rss"] - bare["rss"]
    assert extra <= 8 * MIB, f"the middleware held {extra / MIB:.1f} MiB more than bare"
    assert seen["counters"] == {}  # not JSON-RPC: no books at all


def test_one_long_event_line_through_the_middleware_is_linear():
    need("uvicorn", "pip install uvicorn")
    spec = {"case": "middleware", "what": "sse", "line_bytes": 16 * MIB}
    bare, seen = both(spec)
    assert seen["seen"] == bare["seen"]
    assert seen["seconds"] <= 3 * bare["seconds"] + 1.0, (bare["seconds"], seen["seconds"])
    assert seen["counters"] == {"batch.requests": 1, "batch.closed[stream_end]": 1}


def test_capture_keeps_one_reply_per_pending_request():
    """150,000 replies to one pending id with capture on: the text of one is kept."""
    bare, seen = both({"case": "capture", "replies": 150_000})
    extra = seen["rss"] - bare["rss"]
    assert extra <= 10 * MIB, f"capture held {extra / MIB:.1f} MiB more than without it"


def test_an_audit_of_one_endless_line_skips_it_in_constant_memory(tmp_path: Path):
    path = tmp_path / "one-line.jsonl"
    block = b'{"dir":"sent","message":"' + b"z" * (MIB - 30)
    with path.open("wb") as out:
        for _ in range(200):
            out.write(block)
    result = run_child({"case": "audit", "mode": "bare", "path": str(path)})
    assert result["rss"] < 300 * MIB, f"{result['rss'] / MIB:.0f} MiB peak"
    assert "Traceback" not in result["stderr"]
    assert "skipped: 1 line over 64 MiB" in result["output"], result["output"]


EXIT_SCRIPTS = {
    "generic": """
        import json, pairwatch
        class Conn:
            def send(self, data): return len(data)
            def recv(self): return b""
        c = Conn()
        pairwatch.instrument(c, send="send", receive="recv")
        c.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x"}).encode())
    """,
    "channel": """
        import pairwatch
        ch = pairwatch.open_channel()
        ch.sent(b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]')
    """,
}


@pytest.mark.parametrize("shape", sorted(EXIT_SCRIPTS))
def test_a_script_with_an_open_batch_exits_at_once(shape: str):
    script = textwrap.dedent(EXIT_SCRIPTS[shape]) + "print('sent', flush=True)\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"sent\n"
    start = time.monotonic()
    try:
        proc.wait(10)
    finally:
        proc.kill()
    took = time.monotonic() - start
    assert took < 1.0, f"exit took {took:.2f} s"
    assert proc.returncode == 0
    assert b"Traceback" not in proc.stderr.read()  # type: ignore[union-attr]


def test_the_metrics_endpoint_bounds_half_sent_requests_and_still_answers():
    endpoint = pairwatch.serve_metrics(port=0)
    before = threading.active_count()
    held: list[socket.socket] = []
    try:
        for _ in range(200):  # slow-loris: a request head that never ends
            s = socket.create_connection(("127.0.0.1", endpoint.port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            held.append(s)
        time.sleep(0.3)
        assert threading.active_count() == before  # one thread serves every connection
        assert endpoint._server.connections <= scrape_server.MAX_CONNECTIONS
        with socket.create_connection(("127.0.0.1", endpoint.port), timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            head = s.recv(64)
        assert head.startswith(b"HTTP/1.1 200 OK")
    finally:
        for s in held:
            s.close()
        endpoint.close()


def test_the_metrics_endpoint_closes_idle_connections(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(scrape_server, "IDLE_TIMEOUT", 0.2)
    endpoint = pairwatch.serve_metrics(port=0)
    try:
        s = socket.create_connection(("127.0.0.1", endpoint.port), timeout=5)
        s.sendall(b"GET /met")
        assert s.recv(16) == b""  # closed by the server once idle
        s.close()
        assert endpoint._server.connections == 0
    finally:
        endpoint.close()

"""Record real client traffic into the capture formats ``pairwatch audit`` reads.

The captures the audit tests read are made here, from real exchanges: a real HTTP client
(httpx, requests) talks to the real chaos server over 127.0.0.1, and these recorders write
what crossed the wire, with the times the client saw, the way devtools, a logging client or
a transcript tool would.  Nothing here imports the audit code.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import requests


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).isoformat().replace("+00:00", "Z")


class HarRecorder(httpx.BaseTransport):
    """An httpx transport that forwards to the real one and records each exchange as a HAR
    entry, like a browser's network panel: times in ms, bodies as text (base64 if binary),
    failed exchanges with status 0 and ``_error``."""

    def __init__(self, *, base64_bodies: bool = False) -> None:
        self.inner = httpx.HTTPTransport()
        self.entries: list[dict[str, Any]] = []
        self.base64_bodies = base64_bodies

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.time()
        body = request.read()
        entry: dict[str, Any] = {
            "startedDateTime": iso(started),
            "request": {
                "method": request.method,
                "url": str(request.url),
                "httpVersion": "HTTP/1.1",
                "headers": [{"name": k, "value": v} for k, v in request.headers.items()],
                "queryString": [],
                "cookies": [],
                "headersSize": -1,
                "bodySize": len(body),
            },
            "cache": {},
        }
        if body:
            entry["request"]["postData"] = {
                "mimeType": request.headers.get("content-type", ""),
                "text": body.decode(),
            }
        self.entries.append(entry)
        try:
            response = self.inner.handle_request(request)
            headers_at = time.time()
            content = response.read()
        except httpx.HTTPError as exc:
            ended = time.time()
            entry["response"] = {
                "status": 0,
                "statusText": "",
                "httpVersion": "",
                "headers": [],
                "cookies": [],
                "content": {"size": 0, "mimeType": "x-unknown"},
                "redirectURL": "",
                "headersSize": -1,
                "bodySize": -1,
                "_error": type(exc).__name__,
            }
            self._timings(entry, started, ended, ended)
            raise
        ended = time.time()
        mime = response.headers.get("content-type", "")
        holder: dict[str, Any] = {"size": len(content), "mimeType": mime}
        if self.base64_bodies:
            holder["text"], holder["encoding"] = base64.b64encode(content).decode(), "base64"
        else:
            holder["text"] = content.decode("utf-8", "replace")
        entry["response"] = {
            "status": response.status_code,
            "statusText": response.reason_phrase,
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": k, "value": v} for k, v in response.headers.items()],
            "cookies": [],
            "content": holder,
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": len(content),
        }
        self._timings(entry, started, headers_at, ended)
        return httpx.Response(
            response.status_code, headers=response.headers, content=content, request=request
        )

    @staticmethod
    def _timings(entry: dict[str, Any], started: float, headers_at: float, ended: float) -> None:
        wait = (headers_at - started) * 1000
        receive = (ended - headers_at) * 1000
        entry["time"] = wait + receive
        entry["timings"] = {
            "blocked": -1,
            "dns": -1,
            "connect": -1,
            "send": 0,
            "wait": wait,
            "receive": receive,
        }

    def write(self, path: Path) -> Path:
        har = {
            "log": {
                "version": "1.2",
                "creator": {"name": "pairwatch-tests", "version": "1"},
                "pages": [],
                "entries": self.entries,
            }
        }
        path.write_text(json.dumps(har, indent=1))
        return path


class JsonlRecorder:
    """Logs every JSON-RPC POST made with a requests session as JSON Lines, one channel per
    exchange (``transport: http``), the way a logging client would."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.out = path.open("w")
        self.exchanges = 0

    def post(self, session: requests.Session, url: str, payload: Any) -> requests.Response | None:
        channel = f"http-{self.exchanges}"
        self.exchanges += 1
        body = json.dumps(payload)
        self._line(time.time(), "sent", channel, message=payload)
        try:
            r = session.post(url, data=body, headers={"content-type": "application/json"})
        except requests.RequestException as exc:
            self._line(time.time(), "closed", channel, reason="stream_dropped", error=str(exc))
            return None
        if r.content:
            self._line(time.time(), "received", channel, raw=r.text)
        self._line(time.time(), "closed", channel, reason="body_end")
        return r

    def _line(self, ts: float, direction: str, channel: str, **more: Any) -> None:
        # ISO times and epoch numbers alternate: the format accepts both.
        stamp: Any = iso(ts) if self.exchanges % 2 else ts
        record = {"ts": stamp, "dir": direction, "channel": channel, "transport": "http"}
        self.out.write(json.dumps({**record, **more}) + "\n")

    def close(self) -> None:
        self.out.close()


def record_stdio(
    path: Path, script: str, messages: list[Any], *, timeout: float = 10.0
) -> list[str]:
    """Run the chaos stdio server as a real subprocess, send ``messages`` one per line,
    collect what it writes, and save a timestamped transcript (``[ts] > ...`` / ``< ...``).

    The server handles requests concurrently, so the next message is written only once the
    previous one's reply line arrived (an event from the reader thread, not a fixed pause):
    the transcript then has each exchange in order, as a one-at-a-time client would see it.
    Messages that get no line back (notifications, and those the script drops) are not
    waited for; a cut counts as the line it leaves.
    """
    faults = script.split(";")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pairwatch.chaos", "stdio", f"--script={script}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    lines: list[str] = []
    received = threading.Condition()
    replies = 0
    stdout = proc.stdout

    def note(line: str) -> None:
        nonlocal replies
        with received:
            lines.append(line)
            replies += 1
            received.notify_all()

    def reader() -> None:
        buf = b""
        while True:
            chunk = stdout.read1(65536)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                note(f"[{time.time():.6f}] < {line.decode()}")
        if buf:  # a cut: half a line, then the end of the stream
            note(f"[{time.time():.6f}] < {buf.decode('utf-8', 'replace')}")

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    expected = 0
    for index, message in enumerate(messages):
        text = json.dumps(message)
        with received:
            lines.append(f"[{time.time():.6f}] > {text}")
        try:
            proc.stdin.write(text.encode() + b"\n")
            proc.stdin.flush()
        except BrokenPipeError:
            break
        fault = faults[index] if index < len(faults) else "none"
        if _expects_reply(message) and not fault.startswith("drop"):
            expected += 1
            with received:
                answered = received.wait_for(lambda n=expected: replies >= n, timeout)
            assert answered, f"no reply line to message {index} within {timeout} s"
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    thread.join(timeout)
    proc.wait(timeout)
    with received:
        transcript = ["# recorded by tests/audit/recording.py", *lines]
    path.write_text("\n".join(transcript) + "\n")
    return transcript


def _expects_reply(message: Any) -> bool:
    """A request (or a batch holding one) gets a line back; notifications do not."""
    if isinstance(message, list):
        return any(_expects_reply(m) for m in message)
    return isinstance(message, dict) and "id" in message

"""One hostile case, run in a child process under an address-space limit.

``python child.py SPEC_JSON``: ``SPEC_JSON`` names the case, the mode (``bare`` or
``instrumented``) and its parameters.  The child limits its own address space first, so a
regression fails the case (a MemoryError, a killed child) instead of taking the machine
down; it then runs the case and prints one JSON line: what the caller saw (a digest of the
bytes or the exception's type), its peak RSS, the seconds the case took, and pairwatch's
counters (instrumented only).  Both modes import pairwatch, so peak RSS compares what
pairwatch does at run time, not what its import costs.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

SPEC: dict[str, Any] = json.loads(sys.argv[1])
LIMIT = int(SPEC.get("limit", 3 << 30))
resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402

import pairwatch  # noqa: E402

READER = InMemoryMetricReader()
PROVIDER = MeterProvider(metric_readers=[READER])
INSTRUMENTED = SPEC["mode"] == "instrumented"
CHUNK = 64 * 1024


def request(n: int) -> bytes:
    if n == 1:
        return b'{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[]}'
    return json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "m"} for i in range(n)], separators=(",", ":")
    ).encode()


def watch(client: Any, **settings: Any) -> Any:
    if not INSTRUMENTED:
        return client
    return pairwatch.instrument(client, meter_provider=PROVIDER, spans=False, **settings)


class Digest:
    """What the caller saw: a running hash of bytes, or of a decoded value."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.size = 0

    def add(self, data: bytes) -> None:
        self._hash.update(data)
        self.size += len(data)

    def value(self, value: Any) -> None:
        self.add(repr(value).encode())

    def text(self) -> str:
        return f"{self.size}:{self._hash.hexdigest()[:16]}"


# --------------------------------------------------------------------------- clients
def httpx_case(url: str, style: str, body: bytes, seen: Digest) -> None:
    import httpx

    headers = {"Content-Type": "application/json"}
    with watch(httpx.Client(timeout=60)) as client:
        if style in ("read", "json"):
            r = client.post(url, content=body, headers=headers)
            seen.add(r.content) if style == "read" else seen.value(r.json())
            return
        with client.stream("POST", url, content=body, headers=headers) as r:
            chunks = {
                "iter_raw": r.iter_raw,
                "iter_bytes": r.iter_bytes,
                "iter_lines": lambda: (line.encode() for line in r.iter_lines()),
            }[style]()
            for chunk in chunks:
                seen.add(chunk)


def requests_case(url: str, style: str, body: bytes, seen: Digest) -> None:
    import requests

    headers = {"Content-Type": "application/json"}
    with watch(requests.Session()) as session:
        if style in ("content", "json"):
            r = session.post(url, data=body, headers=headers, timeout=60)
            seen.add(r.content) if style == "content" else seen.value(r.json())
            return
        r = session.post(url, data=body, headers=headers, timeout=60, stream=True)
        with r:
            if style == "raw":
                while chunk := r.raw.read(CHUNK, decode_content=False):
                    seen.add(chunk)
            elif style == "raw_read":  # the whole raw body in one read
                seen.add(r.raw.read(decode_content=False))
            else:  # iter_content: decoded
                for chunk in r.iter_content(CHUNK):
                    seen.add(chunk)


def aiohttp_case(url: str, style: str, body: bytes, seen: Digest) -> None:
    import aiohttp

    async def run() -> None:
        raw = style in ("raw", "raw_read")
        session = aiohttp.ClientSession(auto_decompress=not raw)
        async with watch(session) as s:
            headers = {"Content-Type": "application/json"}
            async with s.post(url, data=body, headers=headers) as r:
                if style == "json":
                    seen.value(await r.json(content_type=None))
                elif style in ("read", "raw_read"):
                    seen.add(await r.read())
                else:
                    async for chunk in r.content.iter_chunked(CHUNK):
                        seen.add(chunk)

    asyncio.run(run())


CLIENTS: dict[str, Callable[[str, str, bytes, Digest], None]] = {
    "httpx": httpx_case,
    "requests": requests_case,
    "aiohttp": aiohttp_case,
}


def client_case(seen: Digest) -> None:
    CLIENTS[SPEC["library"]](SPEC["url"], SPEC["style"], request(SPEC.get("batch", 1)), seen)


# --------------------------------------------------------------------------- the rest
def capture_case(seen: Digest) -> None:
    """A batch of two pending ids; the server answers the first one 150,000 times."""
    channel = pairwatch.open_channel(
        meter_provider=PROVIDER, spans=False, capture_payloads=INSTRUMENTED
    )
    channel.sent(b'[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]')
    reply = b'{"jsonrpc":"2.0","id":1,"result":"' + b"r" * 400 + b'"}'
    for _ in range(SPEC.get("replies", 150_000)):
        channel.received(reply)
    seen.add(b"done")


def middleware_case(seen: Digest) -> None:
    """Concurrent uploads (or an event stream) through a uvicorn app, bare or wrapped."""
    import http.client

    import uvicorn

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        size = 0
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        if scope["path"] == "/sse-line":
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream")]})  # fmt: skip
            await send({"type": "http.response.body", "more_body": True,
                        "body": b'data: {"jsonrpc":"2.0","id":1,"result":"'})  # fmt: skip
            block = b"x" * CHUNK
            for _ in range(SPEC["line_bytes"] // CHUNK):
                await send({"type": "http.response.body", "body": block, "more_body": True})
            await send({"type": "http.response.body", "body": b'"}\n\n'})
            return
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/plain")]})  # fmt: skip
        await send({"type": "http.response.body", "body": str(size).encode()})

    served = pairwatch.PairwatchMiddleware(app, meter_provider=PROVIDER) if INSTRUMENTED else app
    config = uvicorn.Config(served, host="127.0.0.1", port=0, log_level="error", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]

    def upload(results: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        size = SPEC["upload_bytes"]
        conn.putrequest("POST", "/upload")
        conn.putheader("Content-Type", "application/octet-stream")
        conn.putheader("Content-Length", str(size))
        conn.endheaders()
        block = b"\0" * CHUNK
        for _ in range(size // CHUNK):
            conn.send(block)
        results.append(conn.getresponse().read())
        conn.close()

    if SPEC["what"] == "uploads":
        results: list[bytes] = []
        threads = [threading.Thread(target=upload, args=(results,)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for r in sorted(results):
            seen.add(r)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/sse-line", body=request(1),
                     headers={"Content-Type": "application/json"})  # fmt: skip
        response = conn.getresponse()
        while chunk := response.read(CHUNK):
            seen.add(chunk)
    server.should_exit = True
    thread.join(10)


def audit_case(seen: Digest) -> None:
    import contextlib
    import io

    from pairwatch.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            code = main(["audit", SPEC["path"]])
        except SystemExit as exc:
            code = exc.code
    seen.value(code)
    EXTRA["output"] = out.getvalue()[-2000:]


def lsp_case(seen: Digest) -> None:
    """A language server's stdout written by a hostile peer, read by a plain client.

    ``what``: ``header`` (an endless header line), ``length`` (a huge Content-Length and the
    bytes it announces), ``tiny`` (many tiny frames, then the one reply).  The client wrote one
    request (id 1) and reads the pipe in 64 KiB chunks to its end.
    """
    import io

    read_end, write_end = os.pipe()
    size = SPEC.get("bytes", 256 << 20)

    def frame(body: bytes) -> bytes:
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    def peer() -> None:
        with open(write_end, "wb", buffering=0) as out:
            what = SPEC["what"]
            if what == "tiny":
                block = frame(b'{"jsonrpc":"2.0","method":"$/progress"}') * 1000
                for _ in range(SPEC["frames"] // 1000):
                    out.write(block)
                out.write(frame(b'{"jsonrpc":"2.0","id":1,"result":1}'))
                return
            if what == "length":
                out.write(b"Content-Length: %d\r\n\r\n" % (10**15))
            block = b"A" * CHUNK
            for _ in range(size // CHUNK):
                out.write(block)

    thread = threading.Thread(target=peer, daemon=True)
    thread.start()
    reader: Any = open(read_end, "rb", buffering=0)  # noqa: SIM115 - closed below
    writer: Any = io.BytesIO()
    if INSTRUMENTED:
        reader, writer = pairwatch.instrument_streams(
            reader, writer, meter_provider=PROVIDER, spans=False
        )
    writer.write(frame(b'{"jsonrpc":"2.0","id":1,"method":"initialize"}'))
    while chunk := reader.read(CHUNK):
        seen.add(chunk)
    reader.close()
    thread.join()


EXTRA: dict[str, Any] = {}

CASES: dict[str, Callable[[Digest], None]] = {
    "client": client_case,
    "capture": capture_case,
    "middleware": middleware_case,
    "audit": audit_case,
    "lsp": lsp_case,
}


def counters() -> dict[str, int]:
    pairwatch.flush()
    data = READER.get_metrics_data()
    found: dict[str, int] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if not hasattr(metric.data, "is_monotonic"):
                    continue
                for point in metric.data.data_points:
                    if not point.value:
                        continue
                    attrs = point.attributes or {}
                    label = attrs.get("pairwatch.reason") or attrs.get("pairwatch.close_reason")
                    key = metric.name + (f"[{label}]" if label else "")
                    found[key] = found.get(key, 0) + int(point.value)
    return found


def peak_rss() -> int:
    """This process's peak resident set, in bytes.

    ``VmHWM`` is the peak of this process's own memory map.  ``ru_maxrss`` is not: Linux
    carries it across ``exec``, and a child spawned with ``vfork`` (as ``subprocess`` does)
    starts from its parent's peak, a test runner's hundreds of megabytes.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    seen = Digest()
    start = time.perf_counter()
    try:
        CASES[SPEC["case"]](seen)
        outcome = seen.text()
    except BaseException as exc:  # what the caller saw, whatever it was
        outcome = f"{type(exc).__name__} after {seen.text()}"
    seconds = time.perf_counter() - start
    result = {
        "seen": outcome,
        "seconds": seconds,
        "rss": peak_rss(),
        "counters": counters() if INSTRUMENTED else {},
        "threads": threading.active_count(),
        **EXTRA,
    }
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    os._exit(0)  # the case is measured; no teardown to wait for


if __name__ == "__main__":
    main()

"""A minimal HTTP/1.1 server on asyncio streams, JSON and SSE replies.

Hand-written rather than built on a framework because the faults need control
below what frameworks expose: a body cut after N bytes with the full
Content-Length announced, an SSE stream closed mid-event without the chunked
terminator, events flushed one by one so per-element delays reach the client.

Replies: JSON-RPC errors are HTTP 200 (as go-ethereum and most nodes do); a
message that expects no reply (notifications only) gets ``empty_status``
(default 200) with an empty body, go-ethereum style. SSE bodies use chunked
transfer encoding, so a cut stream is distinguishable from a finished one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

from .engine import Engine
from .faults import Outgoing

SseDefault = Literal["auto", "always", "never"]
SseMode = Literal["elements", "array"]

MAX_HEADER = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
REASONS = {
    100: "Continue",
    200: "OK",
    202: "Accepted",
    204: "No Content",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    502: "Bad Gateway",
}


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class Request:
    def __init__(self, method: str, target: str, version: str, headers: dict[str, str]) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        parts = urlsplit(target)
        self.path = parts.path or "/"
        self.query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self.body = b""

    @property
    def keep_alive(self) -> bool:
        conn = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn


def _accept_q(accept: str, media: str) -> float:
    """The q-value the Accept header gives ``media`` (most specific range wins)."""
    main = media.split("/")[0]
    best: tuple[int, float] = (-1, 0.0)
    for item in accept.split(","):
        fields = [f.strip() for f in item.split(";")]
        rng = fields[0].lower()
        q = 1.0
        for p in fields[1:]:
            if p.startswith("q="):
                with contextlib.suppress(ValueError):
                    q = float(p[2:])
        spec = 2 if rng == media else 1 if rng == f"{main}/*" else 0 if rng == "*/*" else -1
        if spec > best[0]:
            best = (spec, q)
    return best[1]


async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> Request | None:
    """Read one request; None on a clean EOF between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise BadRequest(400, "truncated request head") from e
    except asyncio.LimitOverrunError as e:
        raise BadRequest(400, "request head too large") from e
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError as e:
        raise BadRequest(400, "bad request line") from e
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest(400, "bad header line")
        headers[name.strip().lower()] = value.strip()
    req = Request(method.upper(), target, version.upper(), headers)
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        req.body = await _read_chunked(reader)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError as e:
            raise BadRequest(400, "bad Content-Length") from e
        if length < 0 or length > MAX_BODY:
            raise BadRequest(413, "body too large")
        req.body = await reader.readexactly(length)
    elif req.method == "POST":
        raise BadRequest(411, "Content-Length required")
    return req


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while len(body) <= MAX_BODY:  # bounded: each round consumes one chunk
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";")[0].strip(), 16)
        except ValueError as e:
            raise BadRequest(400, "bad chunk size") from e
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailers are ignored
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)
    raise BadRequest(413, "body too large")


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}"]
    lines += [f"{k}: {v}" for k, v in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def sse_events(out: Outgoing, mode: SseMode) -> list[tuple[float, bytes]]:
    """The events a reply becomes: (delay, bytes of one ``data:`` event)."""
    if out.raw is not None:
        return [(out.max_delay, b"data: " + out.raw + b"\n\n")]
    if out.as_array and (mode == "array" or not out.elements):
        return [(out.max_delay, b"data: " + _dumps(out.value()) + b"\n\n")]
    return [(e.delay, b"data: " + _dumps(e.value) + b"\n\n") for e in out.elements]


class HttpTransport:
    """Serves one `Engine` over HTTP; the engine's source decides backend or proxy."""

    def __init__(
        self,
        engine: Engine,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        sse: SseDefault = "auto",
        sse_mode: SseMode = "elements",
        empty_status: int = 200,
        upstream_errors: type[BaseException] | tuple[type[BaseException], ...] = (),
    ) -> None:
        self.engine = engine
        self.host = host
        self.port = port
        self.sse = sse
        self.sse_mode = sse_mode
        self.empty_status = empty_status
        self.upstream_errors = upstream_errors
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, limit=MAX_HEADER
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    def _wants_sse(self, req: Request) -> tuple[bool, SseMode]:
        mode: SseMode = self.sse_mode
        flag = req.query.get("sse", "").lower()
        if flag in ("array", "elements"):
            return True, "array" if flag == "array" else "elements"
        if flag in ("1", "true", "yes"):
            return True, mode
        if flag in ("0", "false", "no"):
            return False, mode
        if req.path.rstrip("/").endswith("/sse"):
            return True, mode
        if self.sse != "auto":
            return self.sse == "always", mode
        accept = req.headers.get("accept", "")
        return _accept_q(accept, "text/event-stream") > _accept_q(accept, "application/json"), mode

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while True:  # one request per round; ends on EOF, close or error
                try:
                    req = await read_request(reader, writer)
                except BadRequest as e:
                    await self._plain(writer, e.status, str(e), keep_alive=False)
                    return
                if req is None:
                    return
                if not await self._handle(req, writer) or not req.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return
        finally:
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _plain(
        self, writer: asyncio.StreamWriter, status: int, text: str, *, keep_alive: bool = True
    ) -> None:
        body = text.encode()
        headers = [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
        if status == 405:
            headers.append(("Allow", "POST"))
        if not keep_alive:
            headers.append(("Connection", "close"))
        writer.write(_head(status, headers) + body)
        await writer.drain()

    async def _handle(self, req: Request, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False means the connection must not be reused."""
        if req.method == "GET" and req.path.rstrip("/") in ("/health", "/healthz"):
            await self._plain(writer, 200, "ok\n")
            return True
        if req.method != "POST":
            await self._plain(writer, 405, "JSON-RPC takes POST\n")
            return True
        try:
            out = await self.engine.exchange(req.body)
        except self.upstream_errors as e:
            body = _dumps(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": str(e)}}
            )
            head = [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
            writer.write(_head(502, head) + body)
            await writer.drain()
            return True
        sse, mode = self._wants_sse(req)
        conn = [] if req.keep_alive else [("Connection", "close")]
        if out.silent and not out.cut:
            if out.max_delay:
                await asyncio.sleep(out.max_delay)
            length = [] if self.empty_status == 204 else [("Content-Length", "0")]
            writer.write(_head(self.empty_status, length + conn))
            await writer.drain()
            return True
        if out.silent:  # cut with nothing to cut: close without any reply
            return False
        if sse:
            return await self._write_sse(writer, out, mode, conn)
        return await self._write_json(writer, out, conn)

    async def _write_json(
        self, writer: asyncio.StreamWriter, out: Outgoing, conn: list[tuple[str, str]]
    ) -> bool:
        body = out.raw if out.raw is not None else _dumps(out.value())
        if out.max_delay:
            await asyncio.sleep(out.max_delay)
        if out.cut_fraction is not None:
            head = _head(200, self._json_headers(len(body)))
            writer.write(head + body[: int(len(body) * out.cut_fraction)])
            await writer.drain()
            return False
        writer.write(_head(200, [*self._json_headers(len(body)), *conn]) + body)
        await writer.drain()
        return True

    @staticmethod
    def _json_headers(length: int) -> list[tuple[str, str]]:
        return [("Content-Type", "application/json"), ("Content-Length", str(length))]

    async def _write_sse(
        self,
        writer: asyncio.StreamWriter,
        out: Outgoing,
        mode: SseMode,
        conn: list[tuple[str, str]],
    ) -> bool:
        events = sse_events(out, mode)
        headers = [
            ("Content-Type", "text/event-stream"),
            ("Cache-Control", "no-cache"),
            ("Transfer-Encoding", "chunked"),
            *conn,
        ]
        writer.write(_head(200, headers))
        await writer.drain()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        full = len(events)
        if out.cut_events is not None:
            full = min(out.cut_events, max(len(events) - 1, 0))
        for i, (delay, data) in enumerate(events):
            wait = t0 + delay - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if i == full and out.cut:
                part = data[: max(1, int(len(data) * (out.cut_fraction or 0.5)))]
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                await writer.drain()
                return False
            writer.write(b"%x\r\n%s\r\n" % (len(data), data))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

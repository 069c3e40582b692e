"""One driver per HTTP client library, and a scripted stdlib server for exact replies.

A driver performs one POST the way a user of that library would (buffered, or streamed for
SSE), with or without pairwatch, and returns what the caller saw: the body bytes (joined
chunks when streamed), or the exception's type and message.  Comparing two drivers' results
is the transparency check; the counters come from the ``otel`` fixture's in-memory reader.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
import requests

SRC = Path(__file__).resolve().parents[2] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

import pairwatch  # noqa: E402

JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class Seen:
    """What the caller got: the body, a decoded JSON value, or an exception."""

    body: bytes | None = None
    decoded: Any = None
    error: tuple[str, str] | None = None


def _failed(exc: BaseException) -> Seen:
    return Seen(error=(type(exc).__name__, str(exc)))


def _decode(body: bytes) -> Any:
    import json

    try:
        return json.loads(body)
    except ValueError:
        return "<not json>"


def httpx_sync(url: str, body: bytes, sse: bool, instrument: Callable[[Any], Any]) -> Seen:
    with instrument(httpx.Client(timeout=5)) as client:
        try:
            if sse:
                with client.stream("POST", url, content=body, headers=JSON) as r:
                    return Seen(b"".join(r.iter_bytes()))
            r = client.post(url, content=body, headers=JSON)
            return Seen(r.content, _decode(r.content))
        except Exception as exc:
            return _failed(exc)


def httpx_async(url: str, body: bytes, sse: bool, instrument: Callable[[Any], Any]) -> Seen:
    async def run() -> Seen:
        async with instrument(httpx.AsyncClient(timeout=5)) as client:
            try:
                if sse:
                    async with client.stream("POST", url, content=body, headers=JSON) as r:
                        return Seen(b"".join([c async for c in r.aiter_bytes()]))
                r = await client.post(url, content=body, headers=JSON)
                return Seen(r.content, _decode(r.content))
            except Exception as exc:
                return _failed(exc)

    return asyncio.run(run())


def requests_session(url: str, body: bytes, sse: bool, instrument: Callable[[Any], Any]) -> Seen:
    with instrument(requests.Session()) as session:
        try:
            if sse:
                with session.post(url, data=body, headers=JSON, stream=True, timeout=5) as r:
                    return Seen(b"".join(r.iter_content(chunk_size=None)))
            r = session.post(url, data=body, headers=JSON, timeout=5)
            return Seen(r.content, _decode(r.content))
        except Exception as exc:
            return _failed(exc)


def aiohttp_session(url: str, body: bytes, sse: bool, instrument: Callable[[Any], Any]) -> Seen:
    async def run() -> Seen:
        async with aiohttp.ClientSession() as session:
            instrument(session)
            try:
                async with session.post(url, data=body, headers=JSON) as r:
                    if sse:
                        return Seen(b"".join([c async for c in r.content.iter_any()]))
                    got = await r.read()  # web3.py's AsyncHTTPProvider reads this way
                    return Seen(got, _decode(got))
            except Exception as exc:
                return _failed(exc)

    return asyncio.run(run())


class _Server(ThreadingHTTPServer):
    """A listen backlog for 20 clients connecting at once (the standard library's is 5: a
    burst beyond it is reset by the kernel, which reads as a flaky client)."""

    request_queue_size = 128


DRIVERS: dict[str, Callable[..., Seen]] = {
    "httpx": httpx_sync,
    "httpx_async": httpx_async,
    "requests": requests_session,
    "aiohttp": aiohttp_session,
}


LIBRARY = {"httpx": "httpx", "httpx_async": "httpx", "requests": "requests", "aiohttp": "aiohttp"}
"""Each driver's client library, by driver name."""


def decodes_or_skip(driver: str, encoding: str) -> None:
    """Skip where the client library, at the version installed, does not decode ``encoding``
    itself (zstd came with httpx 0.27.1 and aiohttp 3.12): pairwatch follows the library.
    Asked of the library, not of pairwatch's decoder choice, so that a pairwatch that lost an
    encoding fails here instead of skipping."""
    import importlib
    from importlib.metadata import version

    library = LIBRARY.get(driver, driver)
    if library == "httpx":
        decodes = encoding in importlib.import_module("httpx._decoders").SUPPORTED_DECODERS
        name = "httpx"
    elif library in ("requests", "urllib3"):
        response = importlib.import_module("urllib3.response").HTTPResponse
        decodes = encoding in response.CONTENT_DECODERS
        name = "urllib3"
    else:
        utils = importlib.import_module("aiohttp.compression_utils")
        flag = {"br": "HAS_BROTLI", "zstd": "HAS_ZSTD"}.get(encoding)
        decodes = flag is None or bool(getattr(utils, flag, False))
        name = "aiohttp"
    if not decodes:
        pytest.skip(f"{name} {version(name)} does not decode {encoding}")


def instrumenting(otel: Any) -> Callable[[Any], Any]:
    def apply(client: Any) -> Any:
        return pairwatch.instrument(
            client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )

    return apply


def bare(client: Any) -> Any:
    return client


# ----------------------------------------------------------------- scripted server
SCRIPTS: dict[str, tuple[int, dict[str, str], list[bytes], bool]] = {}
"""path -> (status, headers, body chunks written one by one, whether to cut the body)."""

HOOKS: dict[str, Callable[[int], None]] = {}
"""path -> called with the chunk's index before each body chunk, after the headers are sent
(a slow server's pauses)."""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self) -> None:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:  # a streamed request body: read it all, or the connection desyncs
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                self.rfile.read(size + 2)
                if not size:
                    break
        else:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, headers, chunks, cut = SCRIPTS.get(self.path, (404, {}, [b"no script"], False))
        self.send_response(status)
        body = b"".join(chunks)
        chunked = headers.get("Transfer-Encoding") == "chunked"
        for k, v in headers.items():
            self.send_header(k, v)
        if not chunked:
            self.send_header("Content-Length", str(len(body) * (2 if cut else 1)))
        self.end_headers()
        hook = HOOKS.get(self.path)
        for index, chunk in enumerate(chunks):
            if hook is not None:
                self.wfile.flush()
                hook(index)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            self.wfile.flush()
        if cut:
            self.close_connection = True
            return
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    do_POST = _reply
    do_GET = _reply


@contextlib.contextmanager
def serve_scripted() -> Iterator[str]:
    """A stdlib HTTP server on 127.0.0.1 answering each path with the bytes scripted for it
    in ``SCRIPTS`` (status, headers, chunks), exactly as given; yields its base URL."""
    server = _Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()

"""A hostile JSON-RPC peer on loopback: bombs, endless streams, trickles, huge and odd replies.

Every reply is produced as it is sent (a bomb is compressed once per session and kept on
disk; a stream is written a chunk at a time), so the peer itself stays small whatever it
sends.  Paths (POST or GET):

``/bomb/<encoding>``   a small body of ``<encoding>`` that inflates to ``BOMB_BYTES`` zeros
``/sse-line``          one ``data:`` line of ``SSE_LINE_BYTES`` bytes, then the event's end
``/sse-endless``       ``ENDLESS_BYTES`` of an event-stream line that never ends
``/trickle``           a JSON-RPC reply, one byte every 20 ms
``/batch``             a reply of ``BATCH`` elements answering ids 0..BATCH-1
``/nested``            100,000 ``[`` then as many ``]``
``/bad-utf8``          a reply with invalid UTF-8 in every field
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MIB = 1024 * 1024
BOMB_BYTES = int(os.environ.get("PAIRWATCH_HOSTILE_BOMB_MIB", "256")) * MIB
SSE_LINE_BYTES = int(os.environ.get("PAIRWATCH_HOSTILE_LINE_MIB", "16")) * MIB
ENDLESS_BYTES = 160 * MIB
BATCH = int(os.environ.get("PAIRWATCH_HOSTILE_BATCH", "100000"))
ENCODINGS = ("gzip", "deflate", "br", "zstd")


def make_bomb(encoding: str, size: int, path: Path) -> Path:
    """``size`` zeros compressed with ``encoding``, written to ``path`` a MiB at a time."""
    zeros = bytes(MIB)
    if encoding in ("gzip", "deflate"):
        obj = zlib.compressobj(9, zlib.DEFLATED, 31 if encoding == "gzip" else 15)
        step: Callable[[bytes], bytes] = obj.compress
        end: Callable[[], bytes] = obj.flush
    elif encoding == "br":
        import brotli

        comp = brotli.Compressor(quality=5)
        step, end = comp.process, comp.finish
    else:
        import sys

        zstd = __import__(
            "compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd",
            fromlist=["ZstdCompressor"],
        )
        cz = zstd.ZstdCompressor()
        step, end = cz.compress, lambda: cz.flush()
    with path.open("wb") as out:
        for _ in range(size // MIB):
            out.write(step(zeros))
        out.write(end())
    return path


class Peer:
    """The hostile server, in a thread; ``url`` is its base."""

    def __init__(self, bombs: dict[str, Path]) -> None:
        self.bombs = bombs
        peer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                peer.answer(self)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                peer.answer(self)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        path = h.path
        try:
            if path.startswith("/bomb/"):
                encoding = path.rsplit("/", 1)[1]
                data = self.bombs[encoding].read_bytes()
                self._send(h, "application/json", [data], encoding=encoding)
            elif path == "/sse-line":
                self._send(h, "text/event-stream", _sse_line(SSE_LINE_BYTES))
            elif path == "/sse-endless":
                self._send(h, "text/event-stream", _endless(ENDLESS_BYTES))
            elif path == "/trickle":
                reply = b'{"jsonrpc":"2.0","id":1,"result":"slow"}'
                self._send(h, "application/json", _trickle(reply), length=len(reply))
            elif path == "/batch":
                self._send(h, "application/json", _batch(BATCH))
            elif path == "/nested":
                self._send(h, "application/json", [b"[" * 100_000 + b"]" * 100_000])
            elif path == "/bad-utf8":
                body = (
                    b'[{"jsonrpc":"2.\xff","id":"\xfe\xff","result":"\xc3\x28"},'
                    b'{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"\xed\xa0\x80"}},'
                    b'{"jsonrpc":"2.0","id":2,"result":{"\xff":"\xf0\x28\x8c\x28"}}]'
                )
                self._send(h, "application/json; charset=utf-8", [body])
            else:
                self._send(h, "text/plain", [b"no such path"], status=404)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what hostile tests do

    @staticmethod
    def _send(
        h: BaseHTTPRequestHandler,
        content_type: str,
        chunks: Iterator[bytes] | list[bytes],
        *,
        encoding: str | None = None,
        status: int = 200,
        length: int | None = None,
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        if encoding:
            h.send_header("Content-Encoding", encoding)
        if isinstance(chunks, list):
            length = sum(len(c) for c in chunks)
        if length is None:
            h.send_header("Connection", "close")  # the body ends when the connection does
            h.close_connection = True
        else:
            h.send_header("Content-Length", str(length))
        h.end_headers()
        for chunk in chunks:
            h.wfile.write(chunk)
            h.wfile.flush()


def _sse_line(size: int) -> Iterator[bytes]:
    head = b'data: {"jsonrpc":"2.0","id":1,"result":"'
    yield head
    left = size
    block = b"x" * (64 * 1024)
    while left > 0:
        yield block[: min(left, len(block))]
        left -= len(block)
    yield b'"}\n\n'


def _endless(size: int) -> Iterator[bytes]:
    yield b"data: "
    block = b"y" * (64 * 1024)
    for _ in range(size // len(block)):
        yield block


def _trickle(reply: bytes) -> Iterator[bytes]:
    for i in range(len(reply)):
        time.sleep(0.02)
        yield reply[i : i + 1]


def _batch(n: int) -> Iterator[bytes]:
    yield b"["
    step = 10_000
    for start in range(0, n, step):
        part = b",".join(
            b'{"jsonrpc":"2.0","id":%d,"result":%d}' % (i, i)
            for i in range(start, min(n, start + step))
        )
        yield part if start == 0 else b"," + part
    yield b"]"

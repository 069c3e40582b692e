"""The HTTP server of a metrics endpoint: one thread, bounded connections, idle ones closed.

A thread per connection (what ``prometheus_client.start_http_server`` does) lets 200
half-sent requests hold 200 threads for ever.  This server multiplexes every connection on
one thread with :mod:`selectors`: a connection may hold at most :data:`MAX_HEAD` bytes of
request head, is closed after :data:`IDLE_TIMEOUT` seconds without progress, and when
:data:`MAX_CONNECTIONS` are open the one idle longest makes room, so a scrape is answered
whatever a slow or hostile peer holds open.  Each request is answered whole and the
connection closed (``Connection: close``): Prometheus scrapes that way cost nothing more.
"""

from __future__ import annotations

import contextlib
import gzip
import selectors
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["IDLE_TIMEOUT", "MAX_CONNECTIONS", "MAX_HEAD", "ScrapeServer"]

MAX_CONNECTIONS: Final = 64
IDLE_TIMEOUT: Final = 10.0
MAX_HEAD: Final = 16 * 1024


@dataclass
class _Connection:
    last: float
    head: bytearray = field(default_factory=bytearray)
    out: memoryview | None = None


class ScrapeServer:
    """Serves ``registry`` on ``addr:port`` (``port=0``: the OS picks; see ``server_port``)."""

    def __init__(self, addr: str, port: int, registry: CollectorRegistry) -> None:
        self._registry = registry
        family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        try:
            self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listener.bind((addr, port))
            self._listener.listen(128)
            self._listener.setblocking(False)
        except BaseException:
            self._listener.close()
            raise
        self.server_address: tuple[str, int] = self._listener.getsockname()[:2]
        self.server_port: int = self.server_address[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ)
        self._connections: dict[socket.socket, _Connection] = {}
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="pairwatch-metrics", daemon=True)
        self._thread.start()

    @property
    def connections(self) -> int:
        """Connections open now (for tests)."""
        return len(self._connections)

    def shutdown(self) -> None:
        """Stop serving and wait for the thread."""
        self._stopping = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._thread.join(5)

    def server_close(self) -> None:
        """Close every socket (after :meth:`shutdown`)."""
        for conn in list(self._connections):
            self._close(conn)
        for sock in (self._listener, self._wake_r, self._wake_w):
            sock.close()
        self._selector.close()

    def _run(self) -> None:
        while not self._stopping:
            try:
                events = self._selector.select(timeout=1.0)
                for key, mask in events:
                    sock = key.fileobj
                    if sock is self._listener:
                        self._accept()
                    elif sock is self._wake_r:
                        self._wake_r.recv(64)
                    elif isinstance(sock, socket.socket):
                        self._serve(sock, mask)
                self._expire(time.monotonic())
            except Exception:  # one bad connection must not stop the endpoint
                continue

    def _accept(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        if len(self._connections) >= MAX_CONNECTIONS:
            oldest = min(self._connections, key=lambda c: self._connections[c].last)
            self._close(oldest)
        conn.setblocking(False)
        self._connections[conn] = _Connection(time.monotonic())
        self._selector.register(conn, selectors.EVENT_READ)

    def _serve(self, conn: socket.socket, mask: int) -> None:
        state = self._connections.get(conn)
        if state is None:
            return
        state.last = time.monotonic()
        try:
            if mask & selectors.EVENT_WRITE and state.out is not None:
                sent = conn.send(state.out)
                state.out = state.out[sent:]
                if not state.out:
                    self._close(conn)
                return
            data = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        state.head += data
        end = state.head.find(b"\r\n\r\n")
        if end < 0:
            if len(state.head) > MAX_HEAD:
                self._close(conn)
            return
        state.out = memoryview(self._response(bytes(state.head[:end])))
        state.head = bytearray()
        self._selector.modify(conn, selectors.EVENT_WRITE)

    def _response(self, head: bytes) -> bytes:
        lines = head.decode("latin-1").split("\r\n")
        method = lines[0].split(" ", 1)[0]
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if method not in ("GET", "HEAD"):
            return _reply(b"405 Method Not Allowed", b"text/plain", b"", b"GET or HEAD\n")
        encoder, content_type = choose_encoder(headers.get("accept", ""))
        body = encoder(self._registry)
        extra = b""
        if "gzip" in headers.get("accept-encoding", ""):
            body = gzip.compress(body)
            extra = b"Content-Encoding: gzip\r\n"
        if method == "HEAD":
            return _reply(b"200 OK", content_type.encode(), extra, b"", len(body))
        return _reply(b"200 OK", content_type.encode(), extra, body)

    def _expire(self, now: float) -> None:
        for conn, state in list(self._connections.items()):
            if now - state.last > IDLE_TIMEOUT:
                self._close(conn)

    def _close(self, conn: socket.socket) -> None:
        self._connections.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(conn)
        conn.close()


def _reply(
    status: bytes, content_type: bytes, extra: bytes, body: bytes, length: int | None = None
) -> bytes:
    size = len(body) if length is None else length
    return (
        b"HTTP/1.1 " + status + b"\r\nContent-Type: " + content_type
        + b"\r\nContent-Length: " + str(size).encode() + b"\r\n" + extra
        + b"Connection: close\r\n\r\n" + body
    )  # fmt: skip

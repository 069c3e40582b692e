"""A language server's framing over stdio: ``Content-Length`` frames, faults per exchange.

Why an LSP mode: language-server clients (pygls, python-lsp-jsonrpc, home-grown ones) read
``Content-Length``-framed messages, not lines, and a session has traffic that is no pairing
event: server-to-client requests, the client's answers to them, ``$/progress``.  This mode
serves the built-in methods with that traffic around them:

* ``initialize`` answers ``{"capabilities": {}}``, after first asking the client
  ``window/workDoneProgress/create`` under the *same id* as the client's request (ids of the
  two directions are separate spaces; a client that mixes them mispairs) and sending a
  ``$/progress`` notification;
* ``shutdown`` answers null; ``exit`` ends the server (status 0 after ``shutdown``, else 1);
* ``$/cancelRequest`` answers the named request, if still running, with error -32800
  (LSP requires the reply); the client's responses are read and otherwise ignored.

Every request and notification is one exchange of the fault plan (as on the line transport):
``drop``, ``duplicate`` (each copy its own frame), ``null_id``, ``wrong_id``, ``delay``
(so replies overtake each other: pairing by id, not order), ``cut`` (half a frame, then
stdout closes).  Frames are read by pairwatch's one frame parser
(:mod:`pairwatch.integrations._kit.framing`), which imports only the standard library; the
server shares nothing with the books.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import threading
from typing import IO, Any

from pairwatch.integrations._kit.framing import FrameParser, frame

from .backend import Backend
from .engine import Engine
from .faults import Outgoing

MAX_FRAME = 16 * 1024 * 1024
REQUEST_CANCELLED = -32800


class FrameOut:
    """Whole frames only, so concurrent replies never interleave."""

    def __init__(self, stream: IO[bytes] | _StreamOut) -> None:
        self.stream = stream
        self.closed = False

    def write(self, value: Any) -> None:
        if self.closed:
            return
        body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        self.stream.write(frame(body, content_type=True))
        self.stream.flush()

    def cut(self, partial: bytes) -> None:
        if self.closed:
            return
        self.stream.write(partial)
        self.stream.flush()
        with contextlib.suppress(OSError):
            self.stream.close()
        self.closed = True


def lsp_backend() -> Backend:
    """The built-in methods plus the two of the LSP life cycle that answer."""
    return Backend({"initialize": lambda _p: {"capabilities": {}}, "shutdown": lambda _p: None})


async def write_outgoing(out: Outgoing, sink: FrameOut) -> None:
    if out.max_delay:
        await asyncio.sleep(out.max_delay)
    if out.silent:
        if out.cut:
            sink.cut(b"")
        return
    if out.raw is not None:
        data = frame(out.raw)
    elif out.as_array:
        data = frame(json.dumps(out.value(), separators=(",", ":")).encode())
    else:  # one frame per element: a duplicate is written twice
        if out.cut_fraction is None:
            for element in out.elements:
                sink.write(element.value)
            return
        data = b"".join(frame(json.dumps(e.value).encode()) for e in out.elements)
    if out.cut_fraction is not None:
        sink.cut(data[: int(len(data) * out.cut_fraction)])
    else:
        sink.stream.write(data)
        sink.stream.flush()


async def serve_lsp(engine: Engine, reader: asyncio.StreamReader, sink: FrameOut) -> int:
    """Serve frames until ``exit``, the end of stdin, or a cut; return the exit status."""
    parser = FrameParser(MAX_FRAME)
    tasks: set[asyncio.Task[None]] = set()
    running: dict[Any, asyncio.Task[None]] = {}
    shut_down = False
    server_ids = 0

    async def one(body: bytes, message: Any) -> None:
        nonlocal server_ids
        if isinstance(message, dict) and message.get("method") == "initialize":
            server_ids += 1
            sink.write(
                {
                    "jsonrpc": "2.0",
                    "id": message.get("id"),  # the client's id, in the server's own space
                    "method": "window/workDoneProgress/create",
                    "params": {"token": f"chaos-{server_ids}"},
                }
            )
            sink.write(
                {
                    "jsonrpc": "2.0",
                    "method": "$/progress",
                    "params": {"token": f"chaos-{server_ids}", "value": {"kind": "begin"}},
                }
            )
        await write_outgoing(await engine.exchange(body), sink)

    def cancel(params: Any) -> None:
        target = params.get("id") if isinstance(params, dict) else None
        task = running.pop(target, None) if isinstance(target, (int, str)) else None
        if task is not None and task.cancel():
            sink.write(
                {
                    "jsonrpc": "2.0",
                    "id": target,
                    "error": {"code": REQUEST_CANCELLED, "message": "Request cancelled"},
                }
            )

    while not sink.closed:
        chunk = await reader.read(65536)
        if not chunk:
            break
        for body in parser.feed(chunk):
            if not isinstance(body, bytes):
                continue  # a frame past the cap: not served
            try:
                message = json.loads(body)
            except ValueError:
                message = None
            method = message.get("method") if isinstance(message, dict) else None
            if isinstance(message, dict) and method is None and "id" in message:
                continue  # the client answering one of our requests
            if method == "$/cancelRequest":
                cancel(message.get("params"))
                continue
            if method == "exit":
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                return 0 if shut_down else 1
            if method == "shutdown":
                shut_down = True
            task = asyncio.create_task(one(body, message))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            key = message.get("id") if isinstance(message, dict) else None
            if isinstance(key, (int, str)):
                running[key] = task
                task.add_done_callback(_forget(running, key))
        if parser.broken is not None:
            break
    if sink.closed:
        for task in tasks:
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return 0


def _forget(running: dict[Any, asyncio.Task[None]], key: Any) -> Any:
    """A done callback: the request ``key`` no longer runs."""

    def forget(task: asyncio.Task[None]) -> None:
        if running.get(key) is task:
            del running[key]

    return forget


class _StreamOut:
    """An asyncio ``StreamWriter`` seen as the file :class:`FrameOut` writes to."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._writer.close()


class LspServerThread:
    """The LSP mode on one end of a connected socket, on a private loop in a daemon thread
    (the demo's server: its engine is in this process, so its record can be read)."""

    def __init__(self, engine: Engine, sock: socket.socket) -> None:
        self.engine = engine
        self._sock = sock
        self._thread = threading.Thread(target=self._main, name="chaos-lsp", daemon=True)

    def start(self) -> LspServerThread:
        self._thread.start()
        return self

    def _main(self) -> None:
        async def serve() -> None:
            reader, writer = await asyncio.open_connection(sock=self._sock)
            try:
                await serve_lsp(self.engine, reader, FrameOut(_StreamOut(writer)))
            finally:
                writer.close()

        asyncio.run(serve())

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)


async def run(engine: Engine) -> int:
    from .stdio_transport import stdin_reader

    reader = await stdin_reader()
    sink = FrameOut(sys.stdout.buffer)
    return await serve_lsp(engine, reader, sink)

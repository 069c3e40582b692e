"""Line-delimited JSON-RPC over stdio: a server and a line proxy.

This is the MCP stdio shape: one JSON message per line each way, requests
handled concurrently so a slow call can be overtaken, which is what makes
pairing by id (not by arrival order) necessary. A ``cut`` writes half a line
and closes stdout, as a crashing server would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import IO, Any

from .engine import Engine
from .faults import Outgoing, Reply
from .upstream import expects_reply, is_response, parse_reply

MAX_LINE = 16 * 1024 * 1024
UPSTREAM_EXIT_TIMEOUT = 5.0


class LineOut:
    """Whole lines only, so concurrent replies never interleave mid-line."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.closed = asyncio.Event()

    def write_line(self, data: bytes) -> None:
        if self.closed.is_set():
            return
        self.stream.write(data.replace(b"\n", b" ") + b"\n")
        self.stream.flush()

    def cut(self, partial: bytes) -> None:
        if self.closed.is_set():
            return
        self.stream.write(partial)
        self.stream.flush()
        with contextlib.suppress(OSError):
            self.stream.close()
        self.closed.set()


async def stdin_reader() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


def _encode(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


async def write_outgoing(out: Outgoing, sink: LineOut) -> None:
    if out.max_delay:
        await asyncio.sleep(out.max_delay)
    if out.silent:
        if out.cut:
            sink.cut(b"")
        return
    data = out.raw if out.raw is not None else _encode(out.value())
    if out.cut_fraction is not None:
        sink.cut(data[: int(len(data) * out.cut_fraction)])
    else:
        sink.write_line(data)


async def _readline(reader: asyncio.StreamReader, sink: LineOut) -> bytes:
    """One line, or b"" at EOF or as soon as the output was cut."""
    if sink.closed.is_set():
        return b""
    read = asyncio.ensure_future(reader.readline())
    closed = asyncio.ensure_future(sink.closed.wait())
    done, _ = await asyncio.wait({read, closed}, return_when=asyncio.FIRST_COMPLETED)
    closed.cancel()
    if read not in done:
        read.cancel()
        return b""
    return read.result()


async def _next_line(reader: asyncio.StreamReader, sink: LineOut) -> bytes | None:
    """Next non-empty line, stripped, or None at EOF or after a cut."""
    while line := await _readline(reader, sink):  # bounded by EOF of the reader
        if line.strip():
            return line.strip()
    return None


async def _finish(tasks: set[asyncio.Task[None]], sink: LineOut) -> None:
    if sink.closed.is_set():
        for t in tasks:
            t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def serve_stdio(engine: Engine, reader: asyncio.StreamReader, sink: LineOut) -> int:
    """Serve until stdin ends (after answering what is in flight) or a cut."""
    tasks: set[asyncio.Task[None]] = set()

    async def one(line: bytes) -> None:
        await write_outgoing(await engine.exchange(line), sink)

    while (line := await _next_line(reader, sink)) is not None:
        task = asyncio.create_task(one(line))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    await _finish(tasks, sink)
    return 0


async def proxy_stdio(
    engine: Engine, command: list[str], reader: asyncio.StreamReader, sink: LineOut
) -> int:
    """Relay lines to and from ``command``; faults hit only lines that are responses.

    Server-initiated requests and notifications pass through untouched. A client
    message that expects no reply still takes a fault turn, so
    ``reply_to_notifications`` can answer it from the proxy.
    """
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=MAX_LINE,
    )
    assert proc.stdin is not None
    assert proc.stdout is not None
    upstream_in, upstream_out = proc.stdin, proc.stdout
    tasks: set[asyncio.Task[None]] = set()

    def spawn(coro: Any) -> None:
        task = asyncio.create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def client_to_upstream() -> None:
        while (line := await _next_line(reader, sink)) is not None:
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if message is not None and not expects_reply(message):
                turn = engine.take_turn()
                batch = isinstance(message, list)
                spawn(write_outgoing(engine.apply(turn, Reply([], batch=batch)), sink))
            upstream_in.write(line + b"\n")
            with contextlib.suppress(ConnectionError):
                await upstream_in.drain()
        with contextlib.suppress(Exception):
            upstream_in.close()

    async def upstream_to_client() -> None:
        while (stripped := await _next_line(upstream_out, sink)) is not None:
            try:
                message = json.loads(stripped)
            except ValueError:
                message = None
            if message is None or not is_response(message):
                sink.write_line(stripped)
                continue
            turn = engine.take_turn()
            spawn(write_outgoing(engine.apply(turn, parse_reply(stripped)), sink))

    pump_in = asyncio.create_task(client_to_upstream())
    await upstream_to_client()
    await _finish(tasks, sink)
    pump_in.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await pump_in
    if proc.returncode is None:
        with contextlib.suppress(Exception):
            upstream_in.close()
        if sink.closed.is_set():
            proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), UPSTREAM_EXIT_TIMEOUT)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0

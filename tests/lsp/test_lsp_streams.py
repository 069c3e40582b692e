"""``pairwatch.instrument_streams``: a home-grown LSP client on any framed stream pair.

The client here is twenty lines of asyncio over a subprocess's pipes, talking to
``python -m pairwatch.chaos lsp``; it reads through the stand-ins exactly what it reads bare.
Also LSP's own rules, read off the wire: a ``$/cancelRequest`` is answered (-32800) and pairs;
one the server never answers is missing, not withdrawn; an end before ``exit`` drops the
stream, an end after it is in order.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest
from lsp_support import ENV, chaos_command
from otel_support import Otel

import pairwatch
from pairwatch.integrations._kit.framing import FrameParser, frame

pytestmark = pytest.mark.timeout(60)


def _message(method: str, params: Any) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "method": method}
    return message if params is None else {**message, "params": params}


class Client:
    """A minimal LSP client: integer ids, replies matched by id, frames read in chunks."""

    def __init__(self, reader: Any, writer: Any) -> None:
        self.reader, self.writer = reader, writer
        self.ids = 0
        self.waiting: dict[int, asyncio.Future[Any]] = {}
        self.seen: list[bytes] = []  # every frame body read, in order
        self.task = asyncio.create_task(self._read())

    def notify(self, method: str, params: Any = None) -> None:
        self._write(_message(method, params))

    def request(self, method: str, params: Any = None) -> tuple[int, asyncio.Future[Any]]:
        self.ids += 1
        future = self.waiting[self.ids] = asyncio.get_running_loop().create_future()
        self._write({**_message(method, params), "id": self.ids})
        return self.ids, future

    def _write(self, message: Any) -> None:
        self.writer.write(frame(json.dumps(message).encode()))

    async def _read(self) -> None:
        parser = FrameParser(1 << 24)
        while chunk := await self.reader.read(4096):
            for body in parser.feed(chunk):
                assert isinstance(body, bytes)
                self.seen.append(body)
                message = json.loads(body)
                if "method" in message and "id" in message:  # the server asks: answer
                    self._write({"jsonrpc": "2.0", "id": message["id"], "result": None})
                elif (future := self.waiting.pop(message.get("id"), None)) is not None:
                    future.set_result(message)


async def session(otel: Otel | None, script: str, steps: Any) -> tuple[list[bytes], int]:
    proc = await asyncio.create_subprocess_exec(
        *chaos_command(script), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=ENV
    )
    reader, writer = proc.stdout, proc.stdin
    if otel is not None:
        reader, writer = pairwatch.instrument_streams(  # the one line
            reader, writer, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )
    client = Client(reader, writer)
    await steps(client, proc)
    code = await proc.wait()
    await asyncio.wait_for(client.task, 10)
    if otel is not None and pairwatch.is_instrumented(reader):
        pairwatch.uninstrument(reader)
    return client.seen, code


async def healthy(client: Client, proc: Any) -> None:
    _, init = client.request("initialize", {"capabilities": {}})
    await init
    client.notify("initialized", {})
    calls = [client.request("echo", [n])[1] for n in range(5)]
    slow_id, slow = client.request("sleep", [5])
    client.notify("$/cancelRequest", {"id": slow_id})
    assert (await slow)["error"]["code"] == -32800  # LSP: the cancelled request is answered
    await asyncio.gather(*calls)
    await client.request("shutdown")[1]
    client.notify("exit")


def test_a_home_grown_client_reads_the_same_and_the_books_are_exact():
    bare, code = asyncio.run(session(None, "-", healthy))
    otel = Otel()
    seen, code_seen = asyncio.run(session(otel, "-", healthy))
    assert sorted(seen) == sorted(bare)  # the same frames (their order is the server's)
    assert code == code_seen == 0
    # initialize, 5 echoes, the cancelled sleep (answered -32800: paired), shutdown
    assert otel.value("batch.requests") == 8
    assert otel.hist("batch.pair_latency")[0] == 8
    assert otel.value("batch.withdrawn_request") == 0
    assert otel.value("batch.missing_response") == 0
    assert otel.value("batch.unknown_id_response") == 0
    assert otel.value("batch.null_id_response") == 0
    attrs = otel.attrs("batch.requests")[0]
    assert (attrs["pairwatch.integration"], attrs["pairwatch.transport"]) == ("lsp-stream", "stdio")


async def cancelled_unanswered(client: Client, proc: Any) -> None:
    """The reply to echo is dropped; the client cancels it; the server has nothing to answer."""
    await client.request("initialize", {})[1]
    echo_id, _ = client.request("echo", ["lost"])
    await asyncio.sleep(0.3)
    client.notify("$/cancelRequest", {"id": echo_id})
    await client.request("shutdown")[1]
    client.notify("exit")


def test_a_cancelled_request_the_server_never_answers_is_missing_not_withdrawn():
    otel = Otel()
    asyncio.run(session(otel, "-;drop;-;-;-", cancelled_unanswered))
    assert otel.value("batch.requests") == 3
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_end") == 1
    assert otel.value("batch.withdrawn_request") == 0


async def dies(client: Client, proc: Any) -> None:
    await client.request("initialize", {})[1]
    for n in range(3):
        client.request("sleep", [n + 10])
    await asyncio.sleep(0.3)
    proc.kill()


def test_a_server_that_dies_before_exit_drops_the_stream():
    otel = Otel()
    asyncio.run(session(otel, "-", dies))
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 3
    assert otel.value("batch.missing_response") == 3


def test_sync_pipes_through_the_stand_ins():
    """A blocking client on a subprocess's pipes: BufferedReader/BufferedWriter stand-ins."""
    otel = Otel()
    proc = subprocess.Popen(chaos_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=ENV)
    reader, writer = pairwatch.instrument_streams(
        proc.stdout, proc.stdin, meter_provider=otel.meter_provider
    )
    for n, method in enumerate(("initialize", "echo", "shutdown"), 1):
        writer.write(frame(json.dumps({"jsonrpc": "2.0", "id": n, "method": method}).encode()))
        writer.flush()
    parser, bodies = FrameParser(1 << 20), []
    while sum(b'"result"' in b for b in bodies) < 3:
        bodies += parser.feed(reader.read1(4096))
    writer.write(frame(b'{"jsonrpc":"2.0","method":"exit"}'))
    writer.close()
    assert reader.read() == b""  # the end, read through the stand-in: in order after exit
    assert proc.wait(10) == 0
    ids = [json.loads(b).get("id") for b in bodies if b'"result"' in b]
    assert sorted(ids) == [1, 2, 3]
    assert otel.value("batch.requests") == 3
    assert otel.hist("batch.pair_latency")[0] == 3
    assert otel.value("batch.missing_response") == 0
    assert otel.value("batch.closed", pairwatch__close_reason="stream_end") == 0
    assert pairwatch.is_instrumented(reader)
    pairwatch.uninstrument(reader)
    assert not pairwatch.is_instrumented(reader)


def test_what_cannot_be_read_or_written_is_refused_at_set_up():
    with pytest.raises(TypeError, match="no read method"):
        pairwatch.instrument_streams(object(), sys.stdout)
    with pytest.raises(TypeError, match="no write method"):
        pairwatch.instrument_streams(sys.stdin, object())


async def lines_by_async_for() -> tuple[list[bytes], int]:
    otel = Otel()
    proc = await asyncio.create_subprocess_exec(
        *chaos_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=ENV
    )
    reader, writer = pairwatch.instrument_streams(
        proc.stdout, proc.stdin, meter_provider=otel.meter_provider
    )
    for n, method in enumerate(("echo", "shutdown"), 1):
        writer.write(frame(json.dumps({"jsonrpc": "2.0", "id": n, "method": method}).encode()))
    await writer.drain()  # not teed: the stream's own
    lines, size, answered = [], 0, 0
    async for line in reader:  # the stream's own iteration, through the stand-in
        lines.append(line)
        if line.lower().startswith(b"content-length:"):
            size = int(line.split(b":")[1])
        elif line == b"\r\n":
            answered += b'"result"' in await reader.readexactly(size)
            if answered == 2:
                break
    writer.write(frame(b'{"jsonrpc":"2.0","method":"exit"}'))
    assert await proc.wait() == 0
    assert await reader.read() == b""
    return lines, otel.value("batch.requests") * 10 + otel.hist("batch.pair_latency")[0]


def test_async_for_and_drain_pass_through_the_stand_ins():
    lines, books = asyncio.run(lines_by_async_for())
    assert lines[0].startswith(b"Content-Length: ")
    assert books == 22  # 2 requests, 2 paired


def test_a_framed_stream_that_is_not_json_rpc_counts_nothing():
    """The Debug Adapter Protocol shares LSP's framing but is not JSON-RPC (it pairs by
    ``request_seq``): a DAP client's stream is not pairwatch's traffic."""
    import io

    otel = Otel()
    reader, writer = pairwatch.instrument_streams(
        io.BytesIO(frame(b'{"seq":1,"type":"response","request_seq":1,"success":true}')),
        io.BytesIO(),
        meter_provider=otel.meter_provider,
    )
    writer.write(frame(b'{"seq":1,"type":"request","command":"initialize"}'))
    writer.write(frame(b'{"seq":2,"type":"request","command":"launch"}'))
    assert reader.read() != b""
    assert reader.read() == b""
    assert otel.counters(zeros=True) == {}


def test_a_read_that_times_out_or_finds_nothing_yet_does_not_end_the_session():
    """A socket polled with a timeout, or non-blocking: the session goes on."""
    import socket

    otel = Otel()
    mine, theirs = socket.socketpair()
    reader, writer = pairwatch.instrument_streams(mine, mine, meter_provider=otel.meter_provider)
    writer.sendall(frame(b'{"jsonrpc":"2.0","id":1,"method":"echo"}'))
    mine.settimeout(0.05)
    with pytest.raises(TimeoutError):
        reader.recv(4096)
    mine.setblocking(False)
    with pytest.raises(BlockingIOError):
        reader.recv(4096)
    assert theirs.recv(4096).endswith(b'"echo"}')
    theirs.sendall(frame(b'{"jsonrpc":"2.0","id":1,"result":1}'))
    mine.setblocking(True)
    assert reader.recv(4096).endswith(b'"result":1}')
    theirs.close()
    assert reader.recv(4096) == b""
    mine.close()
    assert otel.counters() == {"batch.requests": 1, "batch.closed": 1}
    assert otel.hist("batch.pair_latency")[0] == 1
    attrs = otel.attrs("batch.requests")[0]
    assert attrs["pairwatch.transport"] == "socket"

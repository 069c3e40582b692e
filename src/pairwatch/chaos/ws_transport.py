"""Websocket server and relay proxy (imports ``websockets``; loaded only when used).

One text message per JSON-RPC message each way. Replies are sent as they
complete, so a slow call is overtaken, as on real nodes. A ``cut`` aborts the
TCP connection without a close frame, which is how a dropped socket looks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from .engine import Engine
from .faults import Outgoing, Reply
from .upstream import expects_reply, is_response, parse_reply

MAX_MESSAGE = 16 * 1024 * 1024


def _text(data: str | bytes) -> bytes:
    return data.encode() if isinstance(data, str) else data


async def send_outgoing(ws: ServerConnection, out: Outgoing) -> None:
    if out.max_delay:
        await asyncio.sleep(out.max_delay)
    if out.cut:
        ws.transport.abort()
        return
    if out.silent:
        return
    if out.raw is not None:
        await ws.send(out.raw.decode("utf-8", "replace"))
    else:
        await ws.send(json.dumps(out.value(), separators=(",", ":"), ensure_ascii=False))


class WsUpstream:
    """Reply source for one-shot use: one upstream connection per exchange.

    The relay in `WsTransport` is what a proxy uses; this exists so the engine
    of a ws proxy has a source with the same shape as the HTTP one.
    """

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        if not url.startswith(("ws://", "wss://")):
            raise ValueError(f"upstream must be a ws:// URL, got {url!r}")
        self.url = url
        self.timeout = timeout

    async def __call__(self, body: bytes) -> Reply:
        async with connect(self.url, max_size=MAX_MESSAGE, open_timeout=self.timeout) as up:
            await up.send(body.decode("utf-8", "replace"))
            if not expects_reply(_loads(body)):
                return Reply([], batch=False)
            reply = await asyncio.wait_for(up.recv(), self.timeout)
        return parse_reply(_text(reply))


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


class WsTransport:
    """Serves the engine's source, or relays to ``upstream`` when one is given."""

    def __init__(
        self,
        engine: Engine,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        upstream: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.engine = engine
        self.host = host
        self.port = port
        self.upstream = upstream
        self.timeout = timeout
        self._server: Server | None = None

    async def start(self) -> int:
        handler = self._relay if self.upstream else self._serve
        self._server = await serve(handler, self.host, self.port, max_size=MAX_MESSAGE)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None

    async def _serve(self, ws: ServerConnection) -> None:
        tasks: set[asyncio.Task[None]] = set()

        async def one(body: bytes) -> None:
            with contextlib.suppress(ConnectionClosed):
                await send_outgoing(ws, await self.engine.exchange(body))

        with contextlib.suppress(ConnectionClosed):
            async for message in ws:  # bounded by the connection's lifetime
                task = asyncio.create_task(one(_text(message)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        for t in tasks:
            t.cancel()

    async def _relay(self, ws: ServerConnection) -> None:
        assert self.upstream is not None
        tasks: set[asyncio.Task[None]] = set()

        def spawn(out: Outgoing) -> None:
            task = asyncio.create_task(_quiet(send_outgoing(ws, out)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

        async with connect(self.upstream, max_size=MAX_MESSAGE, open_timeout=self.timeout) as up:

            async def client_to_upstream() -> None:
                async for message in ws:  # bounded by the client connection
                    body = _text(message)
                    value = _loads(body)
                    if value is not None and not expects_reply(value):
                        turn = self.engine.take_turn()
                        batch = isinstance(value, list)
                        spawn(self.engine.apply(turn, Reply([], batch=batch)))
                    await up.send(message)

            async def upstream_to_client(up: ClientConnection) -> None:
                async for message in up:  # bounded by the upstream connection
                    body = _text(message)
                    if not is_response(_loads(body)):
                        await ws.send(message)
                        continue
                    turn = self.engine.take_turn()
                    spawn(self.engine.apply(turn, parse_reply(body)))

            pumps = [
                asyncio.create_task(_quiet(client_to_upstream())),
                asyncio.create_task(_quiet(upstream_to_client(up))),
            ]
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            for p in pumps:
                p.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _quiet(coro: Any) -> None:
    with contextlib.suppress(ConnectionClosed):
        await coro

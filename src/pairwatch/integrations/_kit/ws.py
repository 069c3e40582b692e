"""Shared by the websocket integrations: a tap on one connection's frames.

Both ``websockets_client`` (a connection the user holds) and ``web3_provider`` (the connection
web3's WebSocketProvider opens) observe the same thing, the frames of one
:mod:`websockets` connection, so the tap lives here and neither integration imports the
other.  One connection is one stream channel: responses pair across all of its open batches.

Frames are recorded where the bytes cross the connection's API: ``send`` before the frame
leaves (so a fast reply can never arrive before its request is registered), ``recv`` and
``recv_streaming`` after a whole message is read.  ``ConnectionClosed`` from any of them
closes the channel: ``stream_end`` for a normal close (code 1000/1001, websockets'
``ConnectionClosedOK``), ``stream_dropped`` otherwise.  Cancellation and timeouts are not a
close.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import threading
from collections import OrderedDict
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any

from websockets.exceptions import ConnectionClosed, ConnectionClosedOK

from pairwatch.channel import Channel, Options
from pairwatch.integrations._kit.calls import Around
from pairwatch.integrations._kit.patch import Patches
from pairwatch.pairing import wire
from pairwatch.pairing.repair import repair
from pairwatch.runtime import guard

_TEXT = (str, bytes, bytearray, memoryview)


def close_reason(exc: BaseException) -> str:
    return "stream_end" if isinstance(exc, ConnectionClosedOK) else "stream_dropped"


def _looks_json(data: object) -> bool:
    """Frames that cannot be JSON-RPC (pings in text, binary blobs) are not recorded."""
    if isinstance(data, str):
        return data.lstrip(" \t\r\n\ufeff")[:1] in ("{", "[")
    if isinstance(data, (bytes, bytearray, memoryview)):
        head = bytes(data[:64]).lstrip(b" \t\r\n\xef\xbb\xbf")[:1]
        return head in (b"{", b"[")
    return False


class WsTap:
    """Feeds one websocket connection's messages into one stream channel.

    With ``repair``, each array frame the client reads is first recorded as it arrived, then
    aligned (:func:`pairwatch.pairing.repair.repair`) to the batch it answers: the open batch
    sharing the most ids with it, else the oldest.  Single-object frames are never repaired on a
    stream, where a lone object may as well answer a single request.
    """

    def __init__(self, conn: object, channel: Channel, *, repair: bool = False) -> None:
        self.conn = conn
        self.channel = channel
        self.patches = Patches()
        self._batches: OrderedDict[int, list[wire.IdKey | None]] | None = (
            OrderedDict() if repair else None
        )
        self._seq = 0
        self.seen = 0
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- install
    def install(self) -> WsTap:
        conn = self.conn
        is_async = inspect.iscoroutinefunction(conn.recv)  # type: ignore[attr-defined]
        # ConnectionClosed from send or recv ends the stream (normally or not).
        closed = Around("ws", failed=self._closed_by, failing=ConnectionClosed)
        send = replace(closed, swap=lambda a, k: self._swap_message(a, k, is_async=is_async))
        recv = replace(closed, after=lambda _, data: self.frame(data))
        self.patches.wrap(conn, "send", send.wrapper(is_async))
        self.patches.wrap(conn, "recv", recv.wrapper(is_async))
        if hasattr(conn, "recv_streaming"):
            self.patches.wrap(conn, "recv_streaming", self._recv_streaming)
        close = Around("ws_close", finally_=lambda: self.close("closed"))
        self.patches.wrap(conn, "close", close.wrapper(is_async), always=True)
        return self

    def uninstall(self, reason: str = "closed") -> None:
        self.patches.uninstall()
        self.close(reason)

    def close(self, reason: str) -> None:
        self.channel.close(reason)
        if self._batches is not None:
            with self._lock:
                self._batches.clear()

    # ------------------------------------------------------------- recording
    def record_sent(self, payload: object) -> None:
        try:
            if not _looks_json(payload):
                return
            parsed = wire.parse(payload)
            self.channel.sent_parsed(parsed)
            if self._batches is not None and parsed.is_batch:
                ids = [m.key for m in parsed.messages if m.kind is wire.Kind.REQUEST]
                if ids:
                    with self._lock:
                        self._seq += 1
                        self._batches[self._seq] = ids
                        while len(self._batches) > self.channel.options.max_open_batches:
                            self._batches.popitem(last=False)
        except Exception as exc:
            guard.report("ws_sent", exc, self.channel.telemetry.internal_error)

    def frame(self, data: Any) -> Any:
        """Record a received message; return it, or its repaired form in repair mode."""
        try:
            if not _looks_json(data):
                return data
            self.seen += 1
            if not self._batches:
                self.channel.received(data)
                return data
            value, problem = wire.decode(data)
            if problem is not None or not isinstance(value, list):
                self.channel.received(data)
                return data
            fixed = self._record_and_repair(value)
            if fixed is value:
                return data
            text = json.dumps(fixed, separators=(",", ":"), ensure_ascii=False)
            return text if isinstance(data, str) else text.encode()
        except Exception as exc:
            guard.report("ws_received", exc, self.channel.telemetry.internal_error)
            return data

    def decoded(self, value: Any) -> Any:
        """Like :meth:`frame` for a message a reader decoded without passing through ``recv``.

        A read already waiting when the tap was installed returns through the original
        ``recv``; an integration that can see the decoded message further on hands it here.
        """
        try:
            if self._batches and isinstance(value, list):
                return self._record_and_repair(value)
            self.channel.received(value)
        except Exception as exc:
            guard.report("ws_received", exc, self.channel.telemetry.internal_error)
        return value

    def take_seen(self) -> bool:
        """True (once per message) when :meth:`frame` recorded a message."""
        if self.seen:
            self.seen -= 1
            return True
        return False

    def _record_and_repair(self, value: list[Any]) -> Any:
        parsed = wire.classify(value)
        self.channel.received_parsed(parsed)
        ids = self._answered_batch(parsed)
        if ids is None:
            return value
        fixed = repair(value, ids)
        if not fixed.changed:
            return value
        self.channel.repaired(fixed.actions)
        return fixed.value

    def _answered_batch(self, parsed: wire.Payload) -> list[wire.IdKey | None] | None:
        keys = {m.key for m in parsed.messages if m.key is not None}
        with self._lock:
            if not self._batches:
                return None
            best, overlap = next(iter(self._batches)), -1
            for seq, ids in self._batches.items():
                n = sum(1 for k in ids if k in keys)
                if n > overlap:
                    best, overlap = seq, n
            return self._batches.pop(best)

    def _outgoing(self, message: Any, is_async: bool) -> Any:
        """Record a message about to be sent; fragmented messages are recorded when complete."""
        if isinstance(message, _TEXT):
            self.record_sent(message)
            return message
        if isinstance(message, Mapping):
            return message  # websockets refuses it; let it say so
        if is_async and isinstance(message, AsyncIterable):
            return self._acollect(message, self.record_sent)
        if isinstance(message, Iterable):
            return self._collect(message, self.record_sent)
        return message

    def _collect(self, parts: Iterable[Any], record: Callable[[Any], Any]) -> Iterator[Any]:
        """Pass fragments through; record the whole message once the last one went by."""
        seen: list[Any] = []
        with self._closing_on_drop():
            for part in parts:
                seen.append(part)
                yield part
        self._record_joined(seen, record)

    async def _acollect(
        self, parts: AsyncIterable[Any], record: Callable[[Any], Any]
    ) -> AsyncIterator[Any]:
        seen: list[Any] = []
        with self._closing_on_drop():
            async for part in parts:
                seen.append(part)
                yield part
        self._record_joined(seen, record)

    @contextlib.contextmanager
    def _closing_on_drop(self) -> Iterator[None]:
        try:
            yield
        except ConnectionClosed as exc:
            self._closed_by(exc)
            raise

    def _closed_by(self, exc: BaseException) -> None:
        self.close(close_reason(exc))

    def _record_joined(self, parts: list[Any], record: Callable[[Any], Any]) -> None:
        try:
            if parts and all(isinstance(p, str) for p in parts):
                record("".join(parts))
            elif parts:
                record(b"".join(bytes(p) for p in parts))
        except Exception as exc:
            guard.report("ws_fragments", exc, self.channel.telemetry.internal_error)

    # -------------------------------------------------------------- wrappers
    def _swap_message(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], *, is_async: bool
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        try:
            if args:
                return (self._outgoing(args[0], is_async), *args[1:]), kwargs
            if "message" in kwargs:
                return args, {**kwargs, "message": self._outgoing(kwargs["message"], is_async)}
        except Exception as exc:
            guard.report("ws_send", exc, self.channel.telemetry.internal_error)
        return args, kwargs

    def _recv_streaming(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        stream = wrapped(*args, **kwargs)
        if inspect.isasyncgen(stream) or hasattr(stream, "__anext__"):
            return self._acollect(stream, self.frame)
        return self._collect(stream, self.frame)


def server_endpoint(conn: Any) -> tuple[str | None, int | None]:
    """The peer's host and port, for ``server.address`` and ``server.port`` (the port is
    capped with the address in the telemetry)."""
    try:
        address = conn.remote_address
        if isinstance(address, tuple) and address:
            port = address[1] if len(address) > 1 and isinstance(address[1], int) else None
            return str(address[0]), port
    except Exception:
        pass
    return None, None


def instrument_connection(conn: Any, options: Options, *, integration: str = "websockets") -> WsTap:
    """Tap one open connection: a new stream channel, labelled with ``integration``."""
    host, port = server_endpoint(conn)
    channel = Channel(
        transport="websocket",
        integration=integration,
        server_address=host,
        server_port=port,
        options=options,
    )
    return WsTap(conn, channel, repair=options.repair).install()

"""One LSP session's books: the bytes each way, framed, fed to one stream channel.

Why bytes and not the library's message objects: a language-server client library parses
what it reads before any hook could see it (pygls structures it with cattrs, and drops what
it cannot), so exact unknown-id, null-id and invalid counts need the frames as they crossed
the pipe.  Every LSP integration therefore tees the two byte streams into a
:class:`FramedTap`; the frames are split by the one parser
(:class:`pairwatch.integrations._kit.framing.FrameParser`) and go to the channel's three
calls.  The tee stand-ins (:class:`TeeReader`, :class:`TeeWriter`) hand the caller exactly the
bytes, results and exceptions of the stream they stand in for.

LSP's rules, read from what the client writes:

* ``$/cancelRequest`` is a notification like any other: the request it names still expects
  its reply (usually error -32800), which pairs normally; unanswered, it is missing.
* server-to-client requests (``workspace/configuration``, ``client/registerCapability``,
  ``window/workDoneProgress/create``) and the client's answers pair in the ledger's inbound
  table, apart from the client's own ids; notifications such as ``$/progress`` count nothing.
* a stream whose first frame from the client is not JSON-RPC (the Debug Adapter Protocol
  shares LSP's framing but pairs by ``request_seq``) counts nothing;
* the session ends in order once the client has sent ``exit``: what is still pending then is
  missing with ``stream_end``.  A server stream that ends before ``exit`` (the server crashed
  or was killed) or breaks drops it: ``stream_dropped``.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any, Final

from pairwatch.channel import Channel
from pairwatch.channel.channel import ended_by
from pairwatch.integrations._kit.body import MAX_BODY, body_budget
from pairwatch.integrations._kit.framing import FrameParser
from pairwatch.pairing import wire
from pairwatch.runtime import guard

__all__ = ["EXIT", "FramedTap", "TeeReader", "TeeWriter"]

EXIT: Final = "exit"
"""The notification after which the server may end the session in order."""


class _Side:
    """One direction: its parser and the lock that keeps its frames in order."""

    __slots__ = ("lock", "parser")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.parser = FrameParser(MAX_BODY, body_budget())


class FramedTap:
    """Frames both directions of one session into ``channel``; every method is shielded.

    ``wrote`` takes bytes the client wrote, ``read`` bytes it read, ``ended`` the end of what
    it reads (EOF) and ``failed`` an exception its read raised.  A direction whose framing
    breaks (a peer that does not speak the base protocol) stops the books: what is open is
    counted unchecked (``framing``) and nothing more is recorded.
    """

    __slots__ = ("__weakref__", "_in", "_judged", "_out", "channel", "done", "exiting")

    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self._out = _Side()
        self._in = _Side()
        self.exiting = False  # the client sent ``exit``: an end from now on is in order
        self.done = False
        self._judged = False  # whether the client's first frame showed JSON-RPC

    def wrote(self, data: object) -> None:
        if self.done or not data:
            return
        try:
            side = self._out
            with side.lock:
                frames = side.parser.feed(_bytes(data))
                for found in frames:
                    if type(found) is bytes:
                        self._sent(found)
                        if self.done:
                            break
                broken = side.parser.broken
            if self.done:
                self._release()  # not JSON-RPC: nothing more is read
            elif broken is not None:
                self._stop("framing")
        except Exception as exc:
            guard.report("lsp_write", exc, self.channel.telemetry.internal_error)

    def _sent(self, body: bytes) -> None:
        if not self._judged:
            self._judged = True
            if not wire.is_jsonrpc(body):
                # Framed, but not JSON-RPC (the Debug Adapter Protocol pairs by request_seq):
                # not pairwatch's traffic, so it counts nothing at all.
                self.done = True
                return
        payload = wire.parse(body, wire.Kind.REQUEST)
        self.channel.sent_parsed(payload, body)
        if payload.plain is None and not self.exiting:
            for message in payload.messages:
                if message[0] is wire.Kind.NOTIFICATION and message[3] == EXIT:
                    self.exiting = True

    def read(self, data: object) -> None:
        if self.done or not data:
            return
        try:
            side = self._in
            with side.lock:
                frames = side.parser.feed(_bytes(data))
                for found in frames:
                    if type(found) is bytes:
                        self.channel.received_parsed(wire.parse(found, wire.Kind.RESULT), found)
                    else:  # a frame too large to check: what is open cannot be checked
                        self.channel.unchecked(str(found))
                broken = side.parser.broken
            if broken is not None:
                self._stop("framing")
        except Exception as exc:
            guard.report("lsp_read", exc, self.channel.telemetry.internal_error)

    def ended(self) -> None:
        """The server's stream ended (EOF)."""
        self.close("stream_end" if self.exiting else "stream_dropped")

    def failed(self, exc: BaseException) -> None:
        """A read raised: the stream broke, unless the caller only stopped waiting for now
        (its task cancelled, its read's own timeout, nothing to read yet on a non-blocking
        stream), after which the stream goes on."""
        if isinstance(exc, _NOT_YET) or ended_by(exc, "stream_dropped") == "cancelled":
            return
        self.close("stream_end" if self.exiting else "stream_dropped")

    def close(self, reason: str) -> None:
        if self.done:
            return
        self.done = True
        guard.shielded("lsp_close", self._release, count=self.channel.telemetry.internal_error)
        self.channel.close(reason)

    def _stop(self, reason: str) -> None:
        if self.done:
            return
        self.done = True
        guard.shielded("lsp_close", self._release, count=self.channel.telemetry.internal_error)
        self.channel.unchecked(reason)

    def _release(self) -> None:
        for side in (self._out, self._in):
            with side.lock:
                side.parser.close()


_NOT_YET: Final = (TimeoutError, asyncio.TimeoutError, BlockingIOError, InterruptedError)
"""What a read raises while its stream goes on: a socket's timeout, no data yet."""


def _bytes(data: object) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    found: bytes = bytes(data)  # type: ignore[call-overload]
    return found


_READS: Final = frozenset({"read", "readline", "readexactly", "readuntil", "read1", "recv"})
_WRITES: Final = frozenset({"write", "send", "sendall"})


class _Tee:
    """Stands in for one byte stream: its own methods of the tapped kind tee, everything
    else is the stream's own attribute."""

    __slots__ = ("__weakref__", "_tap", "inner")

    def __init__(self, inner: Any, tap: FramedTap) -> None:
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "_tap", tap)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.inner, name, value)

    def __enter__(self) -> Any:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> Any:
        return self.inner.__exit__(*exc)

    def __repr__(self) -> str:
        return f"<pairwatch tee of {self.inner!r}>"


class TeeReader(_Tee):
    """A read stream (asyncio ``StreamReader``, a pipe or file, a socket's ``recv``): each
    read's result is shown to the tap after the caller's stream returned it."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if name in _READS and callable(found):
            return _reading(found, self._tap, name)
        return found

    # Special methods are looked up on the type: line iteration, sync and async, reads
    # through the tee as the stream's own iteration reads its lines.
    def __iter__(self) -> Any:
        return iter(self.readline, b"")

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        line = await self.readline()
        if not line:
            raise StopAsyncIteration
        return line


class TeeWriter(_Tee):
    """A write stream (asyncio ``StreamWriter``, a pipe or file, a socket's ``sendall``):
    each write's bytes are shown to the tap before the caller's stream takes them."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.inner, name)
        if name in _WRITES and callable(found):
            return _writing(found, self._tap)
        if name == "writelines" and callable(found):
            return _writing_lines(found, self._tap)
        return found


def _reading(method: Callable[..., Any], tap: FramedTap, name: str) -> Callable[..., Any]:
    def read(*args: Any, **kwargs: Any) -> Any:
        try:
            result = method(*args, **kwargs)
        except BaseException as exc:
            guard.shielded("lsp_read", tap.failed, exc)
            raise
        if inspect.isawaitable(result):
            return _awaited(result, tap, args, name)
        _show(tap, result, args, name)
        return result

    return read


async def _awaited(result: Any, tap: FramedTap, args: tuple[Any, ...], name: str) -> Any:
    try:
        data = await result
    except BaseException as exc:
        partial = getattr(exc, "partial", None)  # IncompleteReadError: the stream ended
        if isinstance(partial, bytes):
            tap.read(partial)
            guard.shielded("lsp_read", tap.ended)
        else:
            guard.shielded("lsp_read", tap.failed, exc)
        raise
    _show(tap, data, args, name)
    return data


def _show(tap: FramedTap, data: Any, args: tuple[Any, ...], name: str) -> None:
    if data:
        tap.read(data)
    elif isinstance(data, (bytes, bytearray)) and not (args and args[0] == 0):
        guard.shielded("lsp_read", tap.ended)  # b"" from a read that asked for bytes: EOF


def _writing(method: Callable[..., Any], tap: FramedTap) -> Callable[..., Any]:
    def write(data: Any, *args: Any, **kwargs: Any) -> Any:
        tap.wrote(data)
        return method(data, *args, **kwargs)

    return write


def _writing_lines(method: Callable[..., Any], tap: FramedTap) -> Callable[..., Any]:
    def writelines(lines: Any) -> Any:
        lines = list(lines)  # a generator would be used up here: the caller gets a list
        for line in lines:
            tap.wrote(line)
        return method(lines)

    return writelines

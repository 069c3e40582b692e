"""Any ``Content-Length``-framed stream pair, and python-lsp-jsonrpc's reader and writer.

``pairwatch.instrument_streams(reader, writer)`` is the one line for a home-grown LSP
client: it returns stand-ins for the two streams (:class:`TeeReader`, :class:`TeeWriter`)
that the client then reads and writes as before.  Any stream works whose reads return bytes
(``read``, ``readline``, ``readexactly``, ``readuntil``, ``read1``, ``recv``: an asyncio
``StreamReader``, a subprocess's ``stdout``, ``socket.makefile("rb")`` or a socket) and whose
writes take bytes (``write``, ``writelines``, ``send``, ``sendall``).

python-lsp-jsonrpc's ``JsonRpcStreamReader`` and ``JsonRpcStreamWriter`` are instrumented in
place instead: their file objects are swapped for the stand-ins (and put back by
``uninstrument``), so the same two objects are returned and ``reader.listen(...)`` and
``Endpoint(dispatcher, writer.write)`` read as before.  Integration label ``pylsp-jsonrpc``
there, ``lsp-stream`` for plain streams; transport ``stdio`` unless a stream is a socket
(or its peer name says it is a connection), then ``socket``.
"""

from __future__ import annotations

import socket
from typing import Any

from pairwatch.channel import Channel, Options
from pairwatch.integrations._kit.patch import Patches
from pairwatch.integrations.lsp.framed import FramedTap, TeeReader, TeeWriter

__all__ = ["StreamsHandle", "install"]


class StreamsHandle(Patches):
    """Undoes one pair's instrumentation; the session's pending requests close as missing."""

    def __init__(self, tap: FramedTap) -> None:
        super().__init__()
        self.tap = tap
        self.channel = tap.channel
        self.on_uninstall.append(lambda: tap.close("closed"))


def _is_pylsp(obj: object) -> bool:
    return type(obj).__module__.startswith("pylsp_jsonrpc")


def _socket_peer(stream: object) -> tuple[bool, str | None]:
    """Whether a stream is a network connection, and its peer's host when known."""
    if isinstance(stream, socket.socket):
        try:
            return True, str(stream.getpeername()[0])
        except (OSError, IndexError, TypeError):
            return True, None
    extra = getattr(stream, "get_extra_info", None)
    if callable(extra):
        try:
            peer = extra("peername")
        except Exception:
            peer = None
        if peer:
            return True, str(peer[0] if isinstance(peer, tuple) else peer)
    return False, None


def install(
    reader: object,
    writer: object,
    options: Options,
    *,
    transport: str | None = None,
    integration: str | None = None,
) -> tuple[StreamsHandle, Any, Any]:
    """Instrument a stream pair; return the handle and the pair the client should use."""
    pylsp = _is_pylsp(reader) or _is_pylsp(writer)
    if pylsp and not (hasattr(reader, "_rfile") and hasattr(writer, "_wfile")):
        raise TypeError(
            "pairwatch: pass python-lsp-jsonrpc's JsonRpcStreamReader and JsonRpcStreamWriter "
            "together: instrument_streams(reader, writer)"
        )
    inner_reader = getattr(reader, "_rfile", None) if pylsp else reader
    inner_writer = getattr(writer, "_wfile", None) if pylsp else writer
    if not any(callable(getattr(inner_reader, m, None)) for m in ("read", "readline", "recv")):
        raise TypeError(f"pairwatch: {type(reader).__qualname__} has no read method")
    if not any(callable(getattr(inner_writer, m, None)) for m in ("write", "sendall", "send")):
        raise TypeError(f"pairwatch: {type(writer).__qualname__} has no write method")
    connected, address = _socket_peer(inner_writer)
    if not connected:
        connected, address = _socket_peer(inner_reader)
    channel = Channel(
        transport=transport or ("socket" if connected else "stdio"),
        integration=integration or ("pylsp-jsonrpc" if pylsp else "lsp-stream"),
        server_address=address,
        options=options,
    )
    tap = FramedTap(channel)
    handle = StreamsHandle(tap)
    if not pylsp:
        return handle, TeeReader(reader, tap), TeeWriter(writer, tap)
    try:
        handle.replace(reader, "_rfile", lambda f: TeeReader(f, tap))
        handle.replace(writer, "_wfile", lambda f: TeeWriter(f, tap))
    except Exception:
        handle.uninstall()
        raise
    return handle, reader, writer

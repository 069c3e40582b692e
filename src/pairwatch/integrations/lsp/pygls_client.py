"""``pairwatch.instrument(client)`` for pygls's ``LanguageClient`` (any ``JsonRPCClient``).

Instrument before ``start_io()`` or ``start_tcp()``::

    client = pairwatch.instrument(LanguageClient("my-tool", "v1"))
    await client.start_io("pyright-langserver", "--stdio")

Where the bytes are, and why these hooks: pygls writes each message (header and body) in one
``protocol.writer.write``, and reads with a loop (``pygls.io_.run_async``) that is handed the
server's stdout (or the socket's reader) as an argument and keeps it to itself; replies then
reach the caller as callback arguments, already structured.  So:

* ``protocol.set_writer`` (on the instance) hands pygls a :class:`TeeWriter` around the
  writer it is given (a websocket writer, which carries no framing, is left alone);
* ``pygls.client.run_async`` (the module attribute ``start_io`` and ``start_tcp`` call,
  wrapped once for every instrumented client, reference-counted) hands the loop a
  :class:`TeeReader` around its reader when the protocol is one of ours.

The caller's streams are never changed: the stand-ins pass every call through.  Transport
``stdio`` (a subprocess's pipes) or ``socket`` (``start_tcp``); integration ``pygls``.
A client already started cannot be instrumented (its read loop holds its reader): that
raises ``TypeError`` at set-up.  With the global instrumentor on, every ``JsonRPCClient``
is instrumented as it is made (:func:`targets`); an explicit ``instrument(client)`` then
takes over with its own settings.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from pairwatch.channel import Channel, Options
from pairwatch.integrations._kit.calls import Args, Kwargs
from pairwatch.integrations._kit.patch import Patches, Wrapper
from pairwatch.integrations.lsp.framed import FramedTap, TeeReader, TeeWriter
from pairwatch.runtime import guard

__all__ = ["PyglsHandle", "install", "targets"]

_TAPS: weakref.WeakKeyDictionary[Any, FramedTap] = weakref.WeakKeyDictionary()
"""protocol -> its session's tap, for the shared ``run_async`` wrapper."""


class _Loop:
    """The one wrapper on ``pygls.client.run_async``, installed while a client is instrumented."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._patches = Patches()

    def acquire(self) -> None:
        with self._lock:
            self._users += 1
            if self._users == 1:
                import pygls.client

                self._patches.wrap(pygls.client, "run_async", _run_async, always=True)

    def release(self) -> None:
        with self._lock:
            if self._users:
                self._users -= 1
                if not self._users:
                    self._patches.uninstall()


_loop = _Loop()


def _run_async(wrapped: Any, instance: Any, args: Args, kwargs: Kwargs) -> Any:
    """pygls's read loop starting: hand it a tee of its reader when the protocol is ours."""
    swapped = guard.shielded("pygls_reader", _tee_reader, args, kwargs, fallback=None)
    if swapped is not None:
        kwargs = swapped
    return wrapped(*args, **kwargs)


def _tee_reader(args: Args, kwargs: Kwargs) -> Kwargs | None:
    if args:  # pygls passes keywords; positional calls are someone else's: left alone
        return None
    tap = _TAPS.get(kwargs.get("protocol"))
    reader = kwargs.get("reader")
    if tap is None or reader is None or tap.done:
        return None
    return {**kwargs, "reader": TeeReader(reader, tap)}


class PyglsHandle(Patches):
    """Undoes one client's hooks; its writer is put back if it is still the tee."""

    def __init__(self, protocol: Any, tap: FramedTap) -> None:
        super().__init__()
        self.tap = tap
        self.channel = tap.channel
        ref = weakref.ref(protocol)

        def restore() -> None:
            found = ref()
            if found is None:
                return
            _TAPS.pop(found, None)
            writer = getattr(found, "writer", None)
            if isinstance(writer, TeeWriter) and writer._tap is tap:
                found.writer = writer.inner

        self.on_uninstall.append(restore)
        self.on_uninstall.append(lambda: tap.close("closed"))


def _protocol_of(client: object) -> Any:
    from pygls.client import JsonRPCClient
    from pygls.protocol import JsonRPCProtocol

    if isinstance(client, JsonRPCClient):
        return client.protocol
    if isinstance(client, JsonRPCProtocol) and isinstance(
        getattr(client, "_server", None), JsonRPCClient
    ):
        return client
    raise TypeError(
        f"pairwatch instruments pygls's clients (LanguageClient, JsonRPCClient), not "
        f"{type(client).__qualname__}"
    )


def _transport(writer: Any) -> tuple[str, str | None]:
    """``socket`` (with the peer's host) for a connection, ``stdio`` for a pipe."""
    try:
        peer = writer.get_extra_info("peername")
    except Exception:
        peer = None
    if peer:
        host = peer[0] if isinstance(peer, tuple) else str(peer)
        return "socket", str(host)
    return "stdio", None


_AUTO: weakref.WeakKeyDictionary[Any, PyglsHandle] = weakref.WeakKeyDictionary()
"""Protocols the global instrumentor instrumented, so that an explicit instrument() replaces
its handle instead of stacking a second one."""


def targets(options: Callable[[], Options]) -> list[tuple[Any, str, Wrapper]]:
    """For the global instrumentor: every pygls client is instrumented as it is made."""
    from pygls.client import JsonRPCClient

    def init(wrapped: Any, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        result = wrapped(*args, **kwargs)
        guard.shielded("pygls_auto", _auto, instance, options())
        return result

    return [(JsonRPCClient, "__init__", init)]


def _auto(client: object, options: Options) -> None:
    protocol = _protocol_of(client)
    if protocol not in _AUTO:
        _AUTO[protocol] = install(client, options)


def install(client: object, options: Options) -> PyglsHandle:
    protocol = _protocol_of(client)
    auto = _AUTO.pop(protocol, None)
    if auto is not None:
        auto.uninstall()
    if getattr(protocol, "writer", None) is not None:
        raise TypeError(
            "pairwatch: instrument the pygls client before start_io()/start_tcp(): "
            "its read loop already holds the server's stream"
        )
    channel = Channel(transport="stdio", integration="pygls", options=options)
    tap = FramedTap(channel)
    handle = PyglsHandle(protocol, tap)

    def set_writer(wrapped: Any, instance: Any, args: Args, kwargs: Kwargs) -> Any:
        writer = args[0] if args else kwargs.get("writer")
        headers = args[1] if len(args) > 1 else kwargs.get("include_headers", True)
        if writer is None or not headers or tap.done:
            return wrapped(*args, **kwargs)  # a websocket: no framing to read
        transport, address = _transport(writer)
        if transport != "stdio":
            channel.relabel(transport, integration="pygls", server_address=address)
        tee = TeeWriter(writer, tap)
        return wrapped(tee, *args[1:], **{k: v for k, v in kwargs.items() if k != "writer"})

    try:
        handle.wrap(protocol, "set_writer", set_writer, always=True)
        _TAPS[protocol] = tap
        _loop.acquire()
        # Released once: at uninstall, or when the client is collected without one.
        lease = weakref.finalize(protocol, _loop.release)
        handle.on_uninstall.insert(0, lease)
    except Exception:
        handle.uninstall()
        raise
    return handle

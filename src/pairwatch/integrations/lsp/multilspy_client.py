"""``pairwatch.instrument(lsp)`` for multilspy's ``SyncLanguageServer`` and ``LanguageServer``.

Instrument before ``start_server()``::

    lsp = pairwatch.instrument(SyncLanguageServer.create(config, logger, repo))
    with lsp.start_server():
        lsp.request_definition("m.py", 3, 1)

Where the bytes are: multilspy's ``LanguageServerHandler`` starts the server process in
``start()`` and then reads ``process.stdout`` and writes ``process.stdin`` (with
``writelines``) from its own tasks, looking both up on the process at every call.  So
``start`` is wrapped on the handler instance: when it returns (its read task created, not yet
run) the process's two streams are swapped for the tee stand-ins
(:mod:`pairwatch.integrations.lsp.framed`), and ``stop`` is wrapped to end the session (it
cancels the read task before the stream's end could be read).  Integration ``multilspy``,
transport ``stdio``.

What runs here: multilspy's Python server (jedi-language-server, from PyPI) works offline;
its other servers are downloaded at run time and cannot.  multilspy 0.1.1 pins pygls 1.x
(through jedi-language-server 0.41), so it lives in a virtualenv of its own, not beside
pygls 2.x (see ``tests/lsp/test_lsp_multilspy.py``).
"""

from __future__ import annotations

from typing import Any

from pairwatch.channel import Channel, Options
from pairwatch.integrations._kit.calls import Around
from pairwatch.integrations._kit.patch import Patches
from pairwatch.integrations.lsp.framed import FramedTap, TeeReader, TeeWriter

__all__ = ["MultilspyHandle", "install"]


class MultilspyHandle(Patches):
    """Undoes one server's hooks; the session's pending requests close as missing."""

    def __init__(self, tap: FramedTap) -> None:
        super().__init__()
        self.tap = tap
        self.channel = tap.channel
        self.on_uninstall.append(lambda: tap.close("closed"))


def _handler_of(obj: object) -> Any:
    """The ``LanguageServerHandler`` of a ``SyncLanguageServer`` or ``LanguageServer``."""
    server = getattr(obj, "language_server", obj)
    handler = getattr(server, "server", None)
    if handler is None or not all(callable(getattr(handler, m, None)) for m in ("start", "stop")):
        raise TypeError(
            f"pairwatch instruments multilspy's SyncLanguageServer and LanguageServer, not "
            f"{type(obj).__qualname__}"
        )
    return handler


def install(obj: object, options: Options) -> MultilspyHandle:
    handler = _handler_of(obj)
    if getattr(handler, "process", None) is not None:
        raise TypeError(
            "pairwatch: instrument the multilspy server before start_server(): "
            "its read task already holds the server's stdout"
        )
    tap = FramedTap(Channel(transport="stdio", integration="multilspy", options=options))
    handle = MultilspyHandle(tap)
    count = tap.channel.telemetry.internal_error

    def tee(_: None, result: object) -> object:
        process = getattr(handler, "process", None)
        if process is not None and not tap.done:
            handle.replace(process, "stdout", lambda stream: TeeReader(stream, tap))
            handle.replace(process, "stdin", lambda stream: TeeWriter(stream, tap))
        return result

    def ended() -> None:
        tap.close("stream_end" if tap.exiting else "stream_dropped")

    started = Around("multilspy", count, after=tee)
    stopped = Around("multilspy", count, finally_=ended)
    try:
        handle.wrap(handler, "start", started.wrapper(is_async=True), always=True)
        handle.wrap(handler, "stop", stopped.wrapper(is_async=True), always=True)
    except Exception:
        handle.uninstall()
        raise
    return handle

"""WSGI middleware: the server's books of every JSON-RPC exchange the application answers.

Wrap the application once (``app = PairwatchWSGIMiddleware(app)``).  WSGI has no message
stream to watch, so the middleware stands in three places an application already uses:
``wsgi.input`` (a thin reader that copies what the application reads, when it reads it),
``start_response`` (the response head) and the returned iterable (each chunk is looked at as
the server takes it).  Every read, call and chunk is passed on unchanged; the iterable keeps
``len()`` when the application's had one (servers use it to set ``Content-Length``) and its
``close()`` is always called, as PEP 3333 requires.  Nothing pairwatch does raises into the
application or the server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pairwatch.channel import Options
from pairwatch.runtime import guard, switch
from pairwatch.server.exchange import (
    APP_ERROR,
    Exchange,
    counter,
    may_be_jsonrpc,
    middleware_options,
    parent_context,
    server_name,
)

__all__ = ["PairwatchWSGIMiddleware"]

Environ = dict[str, Any]
StartResponse = Callable[..., Callable[[bytes], object]]
WSGIApp = Callable[[Environ, StartResponse], Iterable[bytes]]


class PairwatchWSGIMiddleware:
    """Keeps the server's side of the books for a WSGI application.

    Same keywords as :class:`~pairwatch.server.asgi.PairwatchMiddleware`: ``server_address``
    (default: the ``Host`` header's host name) and :class:`~pairwatch.channel.Options`
    fields.  Only ``POST`` requests are looked at.
    """

    def __init__(
        self,
        app: WSGIApp,
        *,
        server_address: str | None = None,
        options: Options | None = None,
        **settings: Any,
    ) -> None:
        self.app = app
        self.server_address = server_address
        self.options = middleware_options(options, settings)

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        posted = switch.on and environ.get("REQUEST_METHOD") == "POST"
        exchange = self._exchange(environ) if posted else None
        if exchange is None:
            return self.app(environ, start_response)

        def tapped_start_response(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            write = start_response(status, headers, *rest)
            guard.shielded("server_head", _head, exchange, status, headers)
            return _Write(write, exchange)

        try:
            body = self.app(environ, tapped_start_response)
        except BaseException:
            guard.shielded("server_app_error", exchange.dropped, APP_ERROR)
            raise
        return _SizedBody(body, exchange) if hasattr(body, "__len__") else _Body(body, exchange)

    def _exchange(self, environ: Environ) -> Exchange | None:
        try:
            if not may_be_jsonrpc(environ.get("CONTENT_TYPE")):
                return None
            headers = [
                (key[5:].replace("_", "-").lower(), value)
                for key, value in environ.items()
                if key.startswith("HTTP_") and isinstance(value, str)
            ]
            host = self.server_address
            if host is None:
                host = server_name(environ.get("HTTP_HOST") or environ.get("SERVER_NAME"))
            exchange = Exchange(self.options, "wsgi", host, parent_context(headers))
            stream = environ.get("wsgi.input")
            if stream is None:
                return None
            try:
                length = int(environ.get("CONTENT_LENGTH") or -1)
            except ValueError:
                length = -1
            if length == 0:
                return None  # no body: nothing JSON-RPC to keep books of
            environ["wsgi.input"] = _Input(stream, exchange, length)
            return exchange
        except Exception as exc:
            guard.report("server_exchange", exc, counter(self.options))
            return None


def _head(exchange: Exchange, status: str, headers: list[tuple[str, str]]) -> None:
    content_type = encoding = None
    for key, value in headers:
        name = key.lower()
        if name == "content-type":
            content_type = value
        elif name == "content-encoding":
            encoding = value
    exchange.response_start(int(status[:3]), content_type, encoding)


class _Input:
    """``wsgi.input`` as the application reads it, with a copy of each read kept aside.

    The body is complete when ``CONTENT_LENGTH`` bytes were read, or at end of input when the
    length is unknown (chunked requests).  Reads the application does not make are never
    made: an application that ignores the body leaves the books closed.
    """

    def __init__(self, stream: Any, exchange: Exchange, length: int) -> None:
        self._stream = stream
        self._exchange = exchange
        self._left = length

    def _saw(self, data: bytes, asked: int | None = None) -> None:
        if not self._exchange.active:
            return
        try:
            ended = not data and asked != 0
            if self._left >= 0:
                self._left -= len(data)
                ended = ended or self._left <= 0
            self._exchange.request_chunk(data, not ended)
        except Exception as exc:
            guard.report("server_input", exc, None)

    def read(self, *args: Any) -> bytes:
        data: bytes = self._stream.read(*args)
        self._saw(data, args[0] if args and args[0] is not None and args[0] >= 0 else None)
        return data

    def readline(self, *args: Any) -> bytes:
        data: bytes = self._stream.readline(*args)
        self._saw(data, args[0] if args and args[0] is not None and args[0] >= 0 else None)
        return data

    def readlines(self, *args: Any) -> list[bytes]:
        lines: list[bytes] = self._stream.readlines(*args)
        for line in lines:
            self._saw(line)
        if not args:
            self._saw(b"")
        return lines

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _Write:
    """The legacy ``write`` callable start_response returns: written first, looked at after."""

    __slots__ = ("_exchange", "_write")

    def __init__(self, write: Callable[[bytes], object], exchange: Exchange) -> None:
        self._write = write
        self._exchange = exchange

    def __call__(self, data: bytes) -> object:
        try:
            return self._write(data)
        finally:
            if self._exchange.active:
                guard.shielded("server_write", self._exchange.response_chunk, data)


class _Body:
    """The application's iterable, each chunk seen as the server takes it."""

    def __init__(self, body: Iterable[bytes], exchange: Exchange) -> None:
        self._body = body
        self._iter: Iterator[bytes] | None = None
        self._exchange = exchange
        self._ended = False

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self._iter is None:
            self._iter = iter(self._body)
        try:
            chunk = next(self._iter)
        except StopIteration:
            self._ended = True
            guard.shielded("server_end", self._exchange.response_end)
            guard.shielded("server_end", self._exchange.finished)  # a reply never started
            raise
        except BaseException:
            self._ended = True
            guard.shielded("server_app_error", self._exchange.dropped, APP_ERROR)
            raise
        if self._exchange.active:
            guard.shielded("server_chunk", self._exchange.response_chunk, chunk)
        return chunk

    def close(self) -> None:
        try:
            close = getattr(self._body, "close", None)
            if close is not None:
                close()
        finally:
            if not self._ended:
                # The server stopped taking the body before its end: the caller went away.
                guard.shielded("server_close", self._exchange.finished)


class _SizedBody(_Body):
    def __len__(self) -> int:
        return len(self._body)  # type: ignore[arg-type]

"""httpx and httpx2: ``Client`` and ``AsyncClient``, wrapped at ``send``.

Every request of these clients goes through ``send``, including ``client.stream(...)`` and
httpx-sse's ``connect_sse``, so that is the one method wrapped: on the instance for
``instrument(client)``, on the class for the global instrumentor.  httpx2 (the fork the MCP
Python SDK 2.x uses) shares the API, so one module serves both; the library is picked from
the client's class, never imported unless the client came from it.

The exchange skeleton (:mod:`pairwatch.integrations._kit.exchange`) does the rest: ``send`` is
called with ``stream=True``.  A buffered call then reads the body exactly as httpx's own
``send`` does (``read()``, and ``close()`` if that raises) and shows pairwatch the
``content`` httpx keeps, decoded once, by httpx.  A streamed call gets a tee in place of the
response's byte stream before any byte is read, and pairwatch decodes a private copy of
each raw chunk.  The caller gets the same response object, the same bytes and the same
exceptions.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import math
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any

from pairwatch.channel import Options
from pairwatch.channel.channel import ended_by
from pairwatch.integrations._kit import decoders as _decoders
from pairwatch.integrations._kit.calls import Args, Kwargs, argument
from pairwatch.integrations._kit.exchange import (
    REDIRECTS,
    Exchange,
    HttpClient,
    Reply,
    Request,
    Streamed,
    async_send,
    endpoint_of,
    fixed,
    sync_send,
)
from pairwatch.integrations._kit.patch import Patches, Wrapper
from pairwatch.integrations._kit.stream import Tap
from pairwatch.pairing import wire
from pairwatch.runtime import guard

LIBRARIES = ("httpx", "httpx2")


def library_of(cls: type) -> str | None:
    """Which of httpx / httpx2 a client class (or a subclass of one) comes from."""
    for klass in cls.__mro__:
        root = klass.__module__.split(".", 1)[0]
        if root in LIBRARIES:
            return root
    return None


@functools.cache
def _tees(lib_name: str) -> tuple[type, type]:
    """Tee stream classes deriving from the library's own stream bases, so that httpx's
    ``isinstance(response.stream, SyncByteStream)`` checks still hold."""
    lib = importlib.import_module(lib_name)

    class SyncTee(lib.SyncByteStream):  # type: ignore[name-defined,misc]
        """Yields the inner stream's chunks unchanged; the tap sees a copy of each."""

        def __init__(self, inner: Any, tap: Tap) -> None:
            self._pw_inner = inner
            self._pw_tap: Tap | None = tap

        def __iter__(self) -> Iterator[bytes]:
            tap = self._pw_tap
            if tap is None:  # the body ended once already: nothing left to tell pairwatch
                yield from self._pw_inner
                return
            try:
                for chunk in self._pw_inner:
                    tap.raw_chunk(chunk)
                    yield chunk
            except BaseException as exc:
                tap.dropped(ended_by(exc, "stream_dropped"))
                raise
            tap.end()
            # The response and its stream sit in httpx's own reference cycle, freed only by
            # the cyclic collector: an ended tap (and its channel) need not wait for it.
            self._pw_tap = None

        def close(self) -> None:
            try:
                self._pw_inner.close()
            finally:
                if self._pw_tap is not None:
                    self._pw_tap.dropped()  # a no-op when the body already ended

        def __getattr__(self, name: str) -> Any:
            # ``elapsed`` and anything else the library hangs on its own stream.
            return getattr(self.__dict__["_pw_inner"], name)

    class AsyncTee(lib.AsyncByteStream):  # type: ignore[name-defined,misc]
        """The asynchronous twin of ``SyncTee``."""

        def __init__(self, inner: Any, tap: Tap) -> None:
            self._pw_inner = inner
            self._pw_tap: Tap | None = tap

        async def __aiter__(self) -> AsyncIterator[bytes]:
            tap = self._pw_tap
            if tap is None:  # the body ended once already: nothing left to tell pairwatch
                async for chunk in self._pw_inner:
                    yield chunk
                return
            inner = self._pw_inner.__aiter__()
            try:
                async for chunk in inner:
                    tap.raw_chunk(chunk)
                    yield chunk
            except BaseException as exc:
                tap.dropped(ended_by(exc, "stream_dropped"))
                raise
            finally:
                if isinstance(inner, AsyncGenerator):
                    await inner.aclose()
            tap.end()
            self._pw_tap = None  # as SyncTee: let the ended tap go before httpx's cycle

        async def aclose(self) -> None:
            try:
                await self._pw_inner.aclose()
            finally:
                if self._pw_tap is not None:
                    self._pw_tap.dropped()

        def __getattr__(self, name: str) -> Any:
            return getattr(self.__dict__["_pw_inner"], name)

    return SyncTee, AsyncTee


@functools.cache
def _request_tee(lib_name: str) -> type:
    """A request body stream (both sync and async, like httpx's own ``ByteStream``) that
    hands the transport the inner stream's chunks unchanged and shows pairwatch a copy."""
    lib = importlib.import_module(lib_name)

    class RequestTee(lib.SyncByteStream, lib.AsyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, streamed: Streamed) -> None:
            self._pw_inner = inner
            self._pw_streamed = streamed

        def __iter__(self) -> Iterator[bytes]:
            seen = self._pw_streamed
            for chunk in self._pw_inner:
                guard.shielded("request_tee", seen.chunk, chunk)
                yield chunk
            guard.shielded("request_tee", seen.end)

        async def __aiter__(self) -> AsyncIterator[bytes]:
            seen = self._pw_streamed
            async for chunk in self._pw_inner:
                guard.shielded("request_tee", seen.chunk, chunk)
                yield chunk
            guard.shielded("request_tee", seen.end)

        def close(self) -> None:
            close = getattr(self._pw_inner, "close", None)
            if close is not None:
                close()

        async def aclose(self) -> None:
            aclose = getattr(self._pw_inner, "aclose", None)
            if aclose is not None:
                await aclose()

        def __getattr__(self, name: str) -> Any:
            return getattr(self.__dict__["_pw_inner"], name)

    return RequestTee


class _Httpx(HttpClient):
    """The request is ``send``'s first argument; the response's byte stream gets a tee."""

    stream_flag = "stream"
    reads_whole = True  # a buffered call: ``read()``, then ``content`` shown to the tap whole

    def __init__(self, lib_name: str, tee: type) -> None:
        self.integration = lib_name
        self._tee = tee

    def request(self, instance: Any, args: Args, kwargs: Kwargs) -> Request | None:
        request: Any = argument(args, kwargs, 0, "request")
        timeout = _read_timeout(request)
        followed = _REDIRECTED.pop(request, None) if _redirects_seen else None
        if followed is not None:  # the caller sends a redirect's next_request itself
            return Request(
                followed[1],
                request.url,
                parsed=followed[0],
                read_timeout=timeout,
                headers=request.headers,
            )
        try:
            body = request.content  # raises for a streaming request body: not ours
        except Exception:
            return None
        url = request.url
        host, port = endpoint_of(url)
        return Request(
            body, url, read_timeout=timeout, headers=request.headers, host=host, port=port
        )

    def stream_request(
        self, instance: Any, args: Args, kwargs: Kwargs, streamed: Streamed
    ) -> Request | None:
        """A generator or file body: the exchange opens once httpx has sent it whole."""
        request: Any = argument(args, kwargs, 0, "request")
        try:
            request.content  # noqa: B018 - bytes were judged already: not a stream
            return None
        except Exception:
            pass
        lib = importlib.import_module(self.integration)
        wanted = (
            lib.AsyncByteStream if isinstance(instance, lib.AsyncClient) else lib.SyncByteStream
        )
        inner = getattr(request, "stream", None)
        if not isinstance(inner, wanted):
            return None  # httpx will refuse this body itself: leave its error untouched
        request.stream = _request_tee(self.integration)(inner, streamed)
        return Request(None, request.url, read_timeout=_read_timeout(request))

    def reply(self, exchange: Exchange, response: Any) -> Reply:
        """A buffered call: ``read`` decodes the body, and ``content`` is what is shown."""
        content_type, _, location = _wanted_headers(response.headers)
        _remember_redirect(exchange, response)
        return content_type, response.status_code, location

    def body(self, response: Any) -> bytes:
        return response.content  # type: ignore[no-any-return]

    def attach(self, exchange: Exchange, response: Any, instance: Any, kwargs: Any) -> Tap | None:
        """A streamed call: the caller reads through the tee, which shows raw chunks."""
        content_type, encoding, location = _wanted_headers(response.headers)
        tap = exchange.tap(
            content_type,
            encoding,
            decoder=_decoders.for_httpx(self.integration, encoding),
            status=response.status_code,
            location=location,
        )
        _remember_redirect(exchange, response)
        if response.is_stream_consumed:
            # A response hook already read the body: it is all in ``content``.
            tap.chunk(response.content)
            tap.end()
            return None
        response.stream = self._tee(response.stream, tap)
        return tap

    def read(self, response: Any) -> None:
        try:  # what httpx's own send does for stream=False
            response.read()
        except BaseException:
            response.close()
            raise

    async def aread(self, response: Any) -> None:
        try:
            await response.aread()
        except BaseException:
            await response.aclose()
            raise


_WANTED: dict[bytes, int] = {b"content-type": 0, b"content-encoding": 1, b"location": 2}


def _wanted_headers(headers: Any) -> list[str | None]:
    """Content-Type, Content-Encoding and Location, in one pass over the headers.

    ``Headers.get`` scans every header per name; three of them cost four times this pass.
    Repeated headers are joined with ", " as ``Headers.get`` does.  Values are read as
    Latin-1, which equals httpx's own reading for the ASCII these headers hold.
    """
    found: list[str | None] = [None, None, None]
    kind = type(headers)
    rows = _ROWS.get(kind)
    if rows is None:
        rows = _ROWS[kind] = _keeps_rows(kind)
    held = headers._list if rows else [(key, key.lower(), value) for key, value in headers.raw]
    for _, key, value in held:
        slot = _WANTED.get(key)
        if slot is not None:
            text = value.decode("latin-1")
            prior = found[slot]
            found[slot] = text if prior is None else prior + ", " + text
    return found


_ROWS: dict[type, bool] = {}
"""Headers class -> whether its instances keep ``_list``: rows of (raw name, lower-cased
name, value), as httpx 0.29 and httpx2 2.16 do, from which ``Headers.raw`` builds a new list
on every read.  Each class is probed once; one that keeps anything else is read through
``raw``."""


def _keeps_rows(kind: type) -> bool:
    """Whether ``kind`` keeps its headers as rows :func:`_wanted_headers` can read."""
    try:
        return bool(kind({"X-Pw": "v"})._list == [(b"X-Pw", b"x-pw", b"v")])
    except Exception:
        return False


_REDIRECTED: weakref.WeakKeyDictionary[Any, tuple[wire.Payload, object]] = (
    weakref.WeakKeyDictionary()
)
"""A redirect's ``next_request`` -> the payload (and body) of the request it re-sends.

With ``follow_redirects=False`` httpx hands the caller a 3xx whose ``next_request`` carries
the original body as a *stream* (the MCP SDK then calls ``client.send(next_request)``
itself).  pairwatch must not read that stream; it already knows what it holds, so the
re-sent request is tracked with the payload of the one it repeats.  Keyed weakly: a redirect
nobody follows is forgotten with its request.
"""


_redirects_seen = False
"""Whether any redirect was remembered: until then a request needs no look-up."""


def _remember_redirect(exchange: Exchange, response: Any) -> None:
    global _redirects_seen
    if response.status_code not in REDIRECTS:  # only a redirect carries a next_request
        return
    following = getattr(response, "next_request", None)
    original = getattr(response, "request", None)
    # 303 (and 301/302 after a POST) turn the method into GET without a body: nothing to carry.
    if following is not None and original is not None and following.method == original.method:
        _REDIRECTED[following] = (exchange.payload, exchange.raw)
        _redirects_seen = True


def _read_timeout(request: Any) -> float | None:
    """httpx's read timeout for this request (its ``Timeout.read``): inf for none."""
    try:
        timeouts = request.extensions.get("timeout")
        if not isinstance(timeouts, dict) or "read" not in timeouts:
            return None
        read = timeouts["read"]
        return math.inf if read is None else float(read)
    except Exception:
        return None


def _wrapper(lib_name: str, is_async: bool, options: Callable[[], Options]) -> Wrapper:
    sync_tee, async_tee = _tees(lib_name)
    if is_async:
        return async_send(_Httpx(lib_name, async_tee), options)
    return sync_send(_Httpx(lib_name, sync_tee), options)


def install(client: object, options: Options) -> Patches:
    """Wrap ``send`` on this one client; TypeError for anything that is not a client."""
    lib_name = library_of(type(client))
    if lib_name is None:
        raise TypeError(f"{type(client).__qualname__} is not an httpx client")
    lib = importlib.import_module(lib_name)
    if not isinstance(client, (lib.Client, lib.AsyncClient)):
        raise TypeError(
            f"pairwatch instruments {lib_name}.Client and {lib_name}.AsyncClient, "
            f"not {type(client).__qualname__}"
        )
    patches = Patches()
    is_async = isinstance(client, lib.AsyncClient)
    patches.wrap(client, "send", _wrapper(lib_name, is_async, fixed(options)))
    return patches


def targets(options: Callable[[], Options]) -> list[tuple[type, str, Wrapper]]:
    """Every (class, method, wrapper) the global instrumentor wraps, for installed libraries."""
    found: list[tuple[type, str, Wrapper]] = []
    for lib_name in LIBRARIES:
        if importlib.util.find_spec(lib_name) is None:
            continue
        lib = importlib.import_module(lib_name)
        found.append((lib.Client, "send", _wrapper(lib_name, False, options)))
        found.append((lib.AsyncClient, "send", _wrapper(lib_name, True, options)))
    return found

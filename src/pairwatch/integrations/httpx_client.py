"""httpx and httpx2: ``Client`` and ``AsyncClient``, wrapped at ``send``.

Every request of these clients goes through ``send``, including ``client.stream(...)`` and
httpx-sse's ``connect_sse``, so that is the one method wrapped: on the instance for
``instrument(client)``, on the class for the global instrumentor.  httpx2 (the fork the MCP
Python SDK 2.x uses) shares the API, so one module serves both; the library is picked from
the client's class, never imported unless the client came from it.

How a tracked exchange runs: the request body is sniffed and, when it is JSON-RPC, recorded
on a new bound channel; ``send`` is then called with ``stream=True`` so that the response's
byte stream can be replaced by a tee before any byte is read; for a buffered call the wrapper
then reads the body exactly as httpx's own ``send`` does (``read()``, and ``close()`` if that
raises).  The caller gets the same response object, the same bytes and the same exceptions.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from typing import Any

from pairwatch import guard
from pairwatch.channel import Channel, Options
from pairwatch.integrations._patch import ACTIVE, PatchHandle, Wrapper, host_of
from pairwatch.integrations._stream import (
    Tap,
    close_quietly,
    request_payload,
    send_streamed,
    send_streamed_async,
    start_exchange,
)

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
            self._pw_tap = tap

        def __iter__(self) -> Iterator[bytes]:
            tap = self._pw_tap
            try:
                for chunk in self._pw_inner:
                    tap.raw_chunk(chunk)
                    yield chunk
            except BaseException:
                tap.dropped()
                raise
            tap.end()

        def close(self) -> None:
            try:
                self._pw_inner.close()
            finally:
                self._pw_tap.dropped()  # a no-op when the body already ended

        def __getattr__(self, name: str) -> Any:
            # ``elapsed`` and anything else the library hangs on its own stream.
            return getattr(self.__dict__["_pw_inner"], name)

    class AsyncTee(lib.AsyncByteStream):  # type: ignore[name-defined,misc]
        """The asynchronous twin of ``SyncTee``."""

        def __init__(self, inner: Any, tap: Tap) -> None:
            self._pw_inner = inner
            self._pw_tap = tap

        async def __aiter__(self) -> AsyncIterator[bytes]:
            tap = self._pw_tap
            inner = self._pw_inner.__aiter__()
            try:
                async for chunk in inner:
                    tap.raw_chunk(chunk)
                    yield chunk
            except BaseException:
                tap.dropped()
                raise
            finally:
                if isinstance(inner, AsyncGenerator):
                    await inner.aclose()
            tap.end()

        async def aclose(self) -> None:
            try:
                await self._pw_inner.aclose()
            finally:
                self._pw_tap.dropped()

        def __getattr__(self, name: str) -> Any:
            return getattr(self.__dict__["_pw_inner"], name)

    return SyncTee, AsyncTee


def _begin(request: Any, options: Options, lib_name: str) -> tuple[Channel, bool] | None:
    """Open the exchange's channel when the request body is JSON-RPC, else None."""
    try:
        try:
            body = request.content  # raises for a streaming request body: not ours
        except Exception:
            return None
        payload = request_payload(body)
        if payload is None:
            return None
        channel = start_exchange(payload, options, lib_name, host_of(request.url), body)
        return channel, payload.is_batch
    except Exception as exc:
        guard.report("httpx_send", exc, None)
        return None


def _attach(response: Any, begun: tuple[Channel, bool], tee: type) -> Tap | None:
    """Put the tee in front of the response's stream before anyone reads it."""
    channel, batch_sent = begun
    try:
        headers = response.headers
        tap = Tap(
            channel,
            headers.get("content-type"),
            headers.get("content-encoding"),
            batch_sent=batch_sent,
        )
        if response.is_stream_consumed:
            # A response hook already read the body: it is all in ``content``.
            tap.chunk(response.content)
            tap.end()
            return None
        response.stream = tee(response.stream, tap)
        return tap
    except Exception as exc:
        guard.report("httpx_attach", exc, channel.telemetry.internal_error)
        close_quietly(channel, "closed")
        return None


def _request_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[0] if args else kwargs.get("request")


def sync_send(options: Callable[[], Options], lib_name: str) -> Wrapper:
    """The wrapper for ``Client.send``; ``options`` is read per call (the instrumentor may
    be re-configured)."""
    tee = _tees(lib_name)[0]

    def send(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if ACTIVE.get():
            return wrapped(*args, **kwargs)
        begun = _begin(_request_of(args, kwargs), options(), lib_name)
        if begun is None:
            return wrapped(*args, **kwargs)
        stream = kwargs.get("stream", False)
        response = send_streamed(wrapped, args, kwargs, begun[0])
        tap = _attach(response, begun, tee)
        if stream:
            if tap is not None:
                tap.abandon_with(response)
            return response
        try:  # what httpx's own send does for stream=False
            response.read()
        except BaseException:
            response.close()
            raise
        return response

    return send


def async_send(options: Callable[[], Options], lib_name: str) -> Wrapper:
    """The wrapper for ``AsyncClient.send``."""
    tee = _tees(lib_name)[1]

    async def send(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if ACTIVE.get():
            return await wrapped(*args, **kwargs)
        begun = _begin(_request_of(args, kwargs), options(), lib_name)
        if begun is None:
            return await wrapped(*args, **kwargs)
        stream = kwargs.get("stream", False)
        response = await send_streamed_async(wrapped, args, kwargs, begun[0])
        tap = _attach(response, begun, tee)
        if stream:
            if tap is not None:
                tap.abandon_with(response)
            return response
        try:
            await response.aread()
        except BaseException:
            await response.aclose()
            raise
        return response

    return send


def install(client: object, options: Options) -> PatchHandle:
    """Wrap ``send`` on this one client; TypeError for anything that is not a client."""
    lib_name = library_of(type(client))
    if lib_name is None:
        raise TypeError(f"{type(client).__qualname__} is not an httpx client")
    lib = importlib.import_module(lib_name)
    handle = PatchHandle(client)
    if isinstance(client, lib.AsyncClient):
        handle.wrap("send", async_send(lambda: options, lib_name))
    elif isinstance(client, lib.Client):
        handle.wrap("send", sync_send(lambda: options, lib_name))
    else:
        raise TypeError(
            f"pairwatch instruments {lib_name}.Client and {lib_name}.AsyncClient, "
            f"not {type(client).__qualname__}"
        )
    return handle


def targets(options: Callable[[], Options]) -> list[tuple[type, str, Wrapper]]:
    """Every (class, method, wrapper) the global instrumentor wraps, for installed libraries."""
    found: list[tuple[type, str, Wrapper]] = []
    for lib_name in LIBRARIES:
        if importlib.util.find_spec(lib_name) is None:
            continue
        lib = importlib.import_module(lib_name)
        found.append((lib.Client, "send", sync_send(options, lib_name)))
        found.append((lib.AsyncClient, "send", async_send(options, lib_name)))
    return found

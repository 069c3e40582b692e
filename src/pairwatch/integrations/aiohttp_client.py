"""aiohttp: ``ClientSession._request``, the coroutine behind ``post``, ``request`` and the rest.

web3.py's AsyncHTTPProvider does ``session.post(...)`` and then ``await response.read()``;
others use ``response.json()``, ``response.text()`` or read ``response.content`` as a stream
(lines for SSE).  All of these read through ``response.content``, aiohttp's StreamReader, so
a tracked exchange replaces that attribute with a tee: a StreamReader subclass whose every
method delegates to the original, and whose reading methods also show pairwatch a copy of
what they return.  The protocol keeps feeding the original reader; pairwatch never reads it.

The tee class is built from StreamReader's own method list (so it follows aiohttp versions)
and keeps ``isinstance(response.content, StreamReader)`` true for code that checks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from pairwatch import guard
from pairwatch.channel import Channel, Options
from pairwatch.integrations._patch import ACTIVE, PatchHandle, Wrapper, host_of, tracking
from pairwatch.integrations._stream import Tap, decoded_payload, request_payload, start_exchange

INTEGRATION = "aiohttp"

_TEED_ASYNC = ("read", "readany", "readline", "readuntil", "readexactly", "readchunk")
_SKIPPED = frozenset(
    {
        "__init__",
        "__new__",
        "__slots__",
        "__dict__",
        "__weakref__",
        "__module__",
        "__doc__",
        "__qualname__",
        "__getattribute__",
        "__setattr__",
        "__delattr__",
        "__init_subclass__",
        "__subclasshook__",
        "__class_getitem__",
        "__orig_bases__",
        "__parameters__",
        "__annotations__",
    }
)


def _delegate(name: str) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(self._pw_inner, name)(*args, **kwargs)

    method.__name__ = name
    return method


def _reader_of(name: str) -> Callable[[Any], Any]:
    def read(self: Any) -> Any:
        return getattr(self._pw_inner, name)

    return read


def _teed(name: str) -> Callable[..., Any]:
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            data = await getattr(self._pw_inner, name)(*args, **kwargs)
        except BaseException:
            self._pw_tap.dropped()
            raise
        self._pw_seen(data[0] if name == "readchunk" else data)
        return data

    method.__name__ = name
    return method


@functools.cache
def tee_class() -> type:
    """A StreamReader subclass delegating to a wrapped reader, teeing the read methods."""
    from aiohttp import streams

    base = streams.StreamReader
    ns: dict[str, Any] = {"__slots__": ("_pw_inner", "_pw_tap")}
    for klass in reversed(base.__mro__[:-1]):
        for name, value in vars(klass).items():
            if name in _SKIPPED:
                continue
            if isinstance(value, property):
                ns[name] = property(_reader_of(name))
            elif callable(value) and not isinstance(value, type):
                ns[name] = _delegate(name)
    for name in _TEED_ASYNC:
        ns[name] = _teed(name)

    def read_nowait(self: Any, *args: Any, **kwargs: Any) -> bytes:
        try:
            data: bytes = self._pw_inner.read_nowait(*args, **kwargs)
        except BaseException:
            self._pw_tap.dropped()
            raise
        self._pw_seen(data)
        return data

    def seen(self: Any, data: bytes) -> None:
        tap: Tap = self._pw_tap
        tap.raw_chunk(data)
        try:
            at_eof = self._pw_inner.at_eof()
        except Exception:
            at_eof = False
        if at_eof:
            tap.end()

    def getattr_(self: Any, name: str) -> Any:
        # Unset slots of this subclass (aiohttp's private state) read from the original.
        return getattr(object.__getattribute__(self, "_pw_inner"), name)

    ns.update(
        read_nowait=read_nowait,
        _pw_seen=seen,
        __getattr__=getattr_,
        __aiter__=lambda self: streams.AsyncStreamIterator(self.readline),
        iter_chunked=lambda self, n: streams.AsyncStreamIterator(lambda: self.read(n)),
        iter_any=lambda self: streams.AsyncStreamIterator(self.readany),
        iter_chunks=lambda self: streams.ChunkTupleAsyncStreamIterator(self),
        __doc__="StreamReader tee installed by pairwatch; reads go to the original.",
    )
    return type("PairwatchStreamReader", (base,), ns)


def _tee(inner: Any, tap: Tap) -> Any:
    cls = tee_class()
    obj: Any = object.__new__(cls)
    object.__setattr__(obj, "_pw_inner", inner)
    object.__setattr__(obj, "_pw_tap", tap)
    return obj


def _payload(kwargs: dict[str, Any]) -> Any:
    data = kwargs.get("data")
    if data is not None:
        return request_payload(data)
    body = kwargs.get("json")
    return decoded_payload(body) if body is not None else None


def _begin(
    session: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: Options
) -> tuple[Channel, bool] | None:
    try:
        payload = _payload(kwargs)
        if payload is None:
            return None
        url = args[1] if len(args) > 1 else kwargs.get("str_or_url")
        host = host_of(url) or host_of(getattr(session, "_base_url", None))
        return start_exchange(payload, options, INTEGRATION, host), payload.is_batch
    except Exception as exc:
        guard.report("aiohttp_send", exc, None)
        return None


def _attach(
    response: Any, session: Any, kwargs: dict[str, Any], begun: tuple[Channel, bool]
) -> None:
    channel, batch_sent = begun
    try:
        decompress = kwargs.get("auto_decompress")
        if decompress is None:
            decompress = getattr(session, "_auto_decompress", True)
        headers = response.headers
        tap = Tap(
            channel,
            headers.get("Content-Type"),
            None if decompress else headers.get("Content-Encoding"),
            batch_sent=batch_sent,
        )
        inner = response.content
        response.content = _tee(inner, tap)
        for name in ("release", "close"):
            original = getattr(response, name)
            setattr(response, name, _closing(original, tap, inner))
        tap.abandon_with(response)
    except Exception as exc:
        guard.report("aiohttp_attach", exc, channel.telemetry.internal_error)
        channel.close("closed")


def _closing(original: Callable[..., Any], tap: Tap, inner: Any) -> Callable[..., Any]:
    """Releasing or closing a response before its body ended cuts the exchange short; an
    empty body nobody needed to read ends normally."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if not tap.done:
            try:
                ended = bool(inner.at_eof())
            except Exception:
                ended = False
            if ended:
                tap.end()
            else:
                tap.dropped()
        return original(*args, **kwargs)

    return call


def session_request(options: Callable[[], Options]) -> Wrapper:
    """The wrapper for ``ClientSession._request``."""

    async def request(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if ACTIVE.get():
            return await wrapped(*args, **kwargs)
        session = instance if instance is not None else getattr(wrapped, "__self__", None)
        begun = _begin(session, args, kwargs, options())
        if begun is None:
            return await wrapped(*args, **kwargs)
        try:
            with tracking():
                response = await wrapped(*args, **kwargs)
        except BaseException:
            begun[0].close("send_failed")
            raise
        _attach(response, session, kwargs, begun)
        return response

    return request


def install(client: object, options: Options) -> PatchHandle:
    import aiohttp

    if not isinstance(client, aiohttp.ClientSession):
        raise TypeError(
            f"pairwatch instruments aiohttp.ClientSession, not {type(client).__qualname__}"
        )
    handle = PatchHandle(client)
    handle.wrap("_request", session_request(lambda: options))
    return handle


def targets(options: Callable[[], Options]) -> list[tuple[type, str, Wrapper]]:
    import aiohttp

    return [(aiohttp.ClientSession, "_request", session_request(options))]

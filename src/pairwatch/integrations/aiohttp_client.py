"""aiohttp: ``ClientSession._request``, the coroutine behind ``post``, ``request`` and the rest.

web3.py's AsyncHTTPProvider does ``session.post(...)`` and then ``await response.read()``;
others use ``response.json()``, ``response.text()`` or read ``response.content`` as a stream
(lines for SSE).  All of these read through ``response.content``, aiohttp's StreamReader, so
a tracked exchange replaces that attribute with a tee: a StreamReader subclass whose every
method delegates to the original, and whose reading methods also show pairwatch a copy of
what they return.  The protocol keeps feeding the original reader; pairwatch never reads it.

The tee class is built from StreamReader's own method list (so it follows aiohttp versions)
and keeps ``isinstance(response.content, StreamReader)`` true for code that checks.

What the tee shows its reads to: for a plain reply (no ``Content-Encoding`` left to undo, a
Content-Type that is not an event stream, not a 202 or a redirect), a
:class:`~pairwatch.integrations._kit.tap_on_need.TapOnNeed`, which takes a body read whole
straight to the exchange's books and builds a tap only if anything else happens; for any
other response, a tap from the start.

A response released or closed before its body ended cuts the exchange short.  aiohttp tells
its reader so itself: the first ``release()`` or ``close()`` asks ``content.exception()`` and,
when the reader has none yet, calls ``content.set_exception()``.  The tee hears both, so the
exchange ends there (``stream_dropped``, or ``body_end`` for an empty body nobody needed to
read) with nothing hooked on the response; a response collected without either is caught by
the tap's weak reference (:meth:`~pairwatch.integrations._kit.stream.Tap.abandon_with`).
Once the body has ended, the tee puts aiohttp's own reader back on the response, so the
release that follows costs what it costs without pairwatch.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections.abc import Callable
from typing import Any

from pairwatch.channel import Options
from pairwatch.channel.channel import ended_by
from pairwatch.integrations._kit import decoders as _decoders
from pairwatch.integrations._kit.calls import Args, Kwargs, argument
from pairwatch.integrations._kit.exchange import (
    Exchange,
    HttpClient,
    Request,
    answered_elsewhere,
    async_send,
    endpoint_of,
    fixed,
)
from pairwatch.integrations._kit.patch import Patches, Wrapper
from pairwatch.integrations._kit.stream import Tap, plain_type
from pairwatch.integrations._kit.tap_on_need import TapOnNeed
from pairwatch.runtime import guard

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
    chunk = name == "readchunk"  # returns (data, end_of_http_chunk)

    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            data = await getattr(self._pw_inner, name)(*args, **kwargs)
        except BaseException as exc:
            self._pw_tap.dropped(ended_by(exc, "stream_dropped"))
            raise
        self._pw_seen(data[0] if chunk else data)
        return data

    method.__name__ = name
    return method


@functools.cache
def tee_class() -> type:
    """A StreamReader subclass delegating to a wrapped reader, teeing the read methods."""
    from aiohttp import streams

    base = streams.StreamReader
    ns: dict[str, Any] = {"__slots__": ("_pw_inner", "_pw_owner", "_pw_tap")}
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
        except BaseException as exc:
            self._pw_tap.dropped(ended_by(exc, "stream_dropped"))
            raise
        self._pw_seen(data)
        return data

    def exception(self: Any) -> BaseException | None:
        found: BaseException | None = self._pw_inner.exception()
        if found is not None:  # a dead reader: nothing more will be read from it
            self._pw_ended()
        return found

    def set_exception(self: Any, *args: Any, **kwargs: Any) -> None:
        self._pw_ended()
        self._pw_inner.set_exception(*args, **kwargs)

    def ended(self: Any) -> None:
        tap: Tap | TapOnNeed = self._pw_tap
        try:
            if not tap.done:
                if _at_eof(self._pw_inner):
                    tap.end()
                else:
                    tap.dropped()
        except Exception as exc:  # the caller's release or close must still run
            guard.report("aiohttp_close", exc, None)

    def seen(self: Any, data: bytes) -> None:
        tap: Tap | TapOnNeed = self._pw_tap
        if _at_eof(self._pw_inner):  # the body ends with this read (usually all of it)
            tap.last_raw_chunk(data)
            _off(self)
        else:
            tap.raw_chunk(data)

    def getattr_(self: Any, name: str) -> Any:
        # Unset slots of this subclass (aiohttp's private state) read from the original.
        return getattr(object.__getattribute__(self, "_pw_inner"), name)

    ns.update(
        read_nowait=read_nowait,
        exception=exception,
        set_exception=set_exception,
        _pw_ended=ended,
        _pw_seen=seen,
        __getattr__=getattr_,
        __aiter__=lambda self: streams.AsyncStreamIterator(self.readline),
        iter_chunked=lambda self, n: streams.AsyncStreamIterator(lambda: self.read(n)),
        iter_any=lambda self: streams.AsyncStreamIterator(self.readany),
        iter_chunks=lambda self: streams.ChunkTupleAsyncStreamIterator(self),
        __doc__="StreamReader tee installed by pairwatch; reads go to the original.",
    )
    return type("PairwatchStreamReader", (base,), ns)


def _off(tee: Any) -> None:
    """Put aiohttp's own reader back on the response once the body has ended.

    Why: after the end the tap is done and the tee has nothing left to show it, yet
    aiohttp's release and close would still go through it (``exception()``, then
    ``set_exception()``, four Python calls of the tee's on every exchange).  Only if the
    tee is still what the response holds; a caller that kept the tee reads through it as
    before.  The tee holds the response weakly: a strong reference would make the two a
    cycle, left to the garbage collector.
    """
    owner = tee._pw_owner()
    if owner is not None and owner.content is tee:
        owner.content = tee._pw_inner


class _CallHeaders:
    """The ``headers=`` argument of one aiohttp call, as a place to add trace context.

    aiohttp takes headers per call, often as a mapping the caller reuses: adding to it would
    leak one request's ``traceparent`` into the next.  So a key is added to a copy (a
    ``CIMultiDict``, which keeps repeated headers), put in this call's arguments only.
    """

    __slots__ = ("_kwargs",)

    def __init__(self, kwargs: Kwargs) -> None:
        self._kwargs = kwargs

    def __contains__(self, key: object) -> bool:
        headers = self._kwargs.get("headers")
        if not headers or not isinstance(key, str):
            return False
        names = headers.keys() if hasattr(headers, "keys") else (k for k, _ in headers)
        return key.lower() in {str(k).lower() for k in names}

    def __setitem__(self, key: str, value: str) -> None:
        from multidict import CIMultiDict

        headers: CIMultiDict[str] = CIMultiDict(self._kwargs.get("headers") or {})
        headers[key] = value
        self._kwargs["headers"] = headers


class _Aiohttp(HttpClient):
    """The body is ``data=`` or ``json=``; ``response.content`` is replaced by the tee."""

    integration = "aiohttp"

    def request(self, instance: Any, args: Args, kwargs: Kwargs) -> Request | None:
        url = argument(args, kwargs, 1, "str_or_url")
        host, port = endpoint_of(url)
        if host is None:  # a path relative to the session's base URL
            url = getattr(instance, "_base_url", None)
        timeout = _read_timeout(kwargs.get("timeout"), instance)
        headers = _CallHeaders(kwargs)
        if kwargs.get("data") is not None:
            return Request(
                kwargs["data"], url, read_timeout=timeout, headers=headers, host=host, port=port
            )
        body = kwargs.get("json")
        if body is None:
            return None
        return Request(body, url, True, None, timeout, headers, host, port)

    def attach(self, exchange: Exchange, response: Any, instance: Any, kwargs: Any) -> None:
        """The tee replaces ``response.content``; what it shows its reads to watches the
        response already, so nothing is returned for the skeleton to watch."""
        decompress = kwargs.get("auto_decompress")
        if decompress is None:
            decompress = getattr(instance, "_auto_decompress", True)
        headers = response.headers
        # aiohttp decodes in its protocol, before the reader the tee wraps; only a session
        # that leaves decoding to its caller hands the tee encoded bytes.
        encoding = None if decompress else headers.get("Content-Encoding")
        content_type = headers.get("Content-Type")
        status, location = response.status, headers.get("Location")
        tap: Tap | TapOnNeed
        if (
            encoding is None
            and not answered_elsewhere(status, location)
            and plain_type(content_type)
        ):  # a plain reply, read whole by nearly every caller: a tap only if needed
            tap = TapOnNeed(exchange, content_type)
        else:
            tap = exchange.tap(
                content_type,
                encoding,
                decoder=_decoders.for_aiohttp(encoding),
                status=status,
                location=location,
            )
        tee: Any = object.__new__(tee_class())  # no __init__: its state is the original's
        tee._pw_inner, tee._pw_tap = response.content, tap
        tee._pw_owner = weakref.ref(response)
        response.content = tee
        tap.abandon_with(response)  # last: a failure above leaves nothing watching


def _read_timeout(timeout: object, session: Any) -> float | None:
    """aiohttp's ``ClientTimeout`` for this call: ``sock_read`` (restarted per read), else
    ``total``; inf when both are None.  The call's ``timeout=`` wins over the session's."""
    try:
        kind = _client_timeout()
        found: Any = timeout if isinstance(timeout, kind) else getattr(session, "timeout", None)
        last = _LAST  # one read: another thread may replace it
        if last[0] is found:  # a session's own setting, nearly always
            return last[1]
        if not isinstance(found, kind):
            return None
        read = found.sock_read if found.sock_read is not None else found.total
        seconds = math.inf if read is None else float(read)
        _remember(found, seconds)
        return seconds
    except Exception:
        return None


def _remember(timeout: object, seconds: float) -> None:
    global _LAST
    _LAST = (timeout, seconds)


_LAST: tuple[object, float] = (object(), 0.0)
"""The last ClientTimeout read and its read timeout, compared by identity: a ClientTimeout
is frozen, and hashing one runs Python code."""


@functools.cache
def _client_timeout() -> Any:
    """aiohttp's ClientTimeout, imported once (an import statement per call is not free)."""
    from aiohttp import ClientTimeout

    return ClientTimeout


def _at_eof(inner: Any) -> bool:
    try:
        return bool(inner.at_eof())
    except Exception:
        return False


def install(client: object, options: Options) -> Patches:
    import aiohttp

    if not isinstance(client, aiohttp.ClientSession):
        raise TypeError(
            f"pairwatch instruments aiohttp.ClientSession, not {type(client).__qualname__}"
        )
    patches = Patches()
    patches.wrap(client, "_request", async_send(_Aiohttp(), fixed(options)))
    return patches


def targets(options: Callable[[], Options]) -> list[tuple[type, str, Wrapper]]:
    import aiohttp

    return [(aiohttp.ClientSession, "_request", async_send(_Aiohttp(), options))]

"""requests: ``Session.send``, buffered and ``stream=True``.

``Session.send`` is where every request of a session goes (``get``, ``post``, ``request``).
A tracked exchange calls it with ``stream=True`` and then, for a buffered call, touches
``response.content`` exactly as requests itself does at the end of ``send``; in between, the
urllib3 response (``response.raw``) gets a tee on its reading methods, so ``content``,
``json()``, ``iter_content``, ``iter_lines`` and direct ``raw.read`` calls all show pairwatch a
copy of what the caller receives, chunk by chunk, without pairwatch reading anything itself.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from pairwatch.channel import Options
from pairwatch.integrations._kit import decoders as _decoders
from pairwatch.integrations._kit.calls import Args, Kwargs, argument
from pairwatch.integrations._kit.exchange import (
    Exchange,
    HttpClient,
    Reply,
    Request,
    Streamed,
    fixed,
    sync_send,
)
from pairwatch.integrations._kit.patch import Patches, Wrapper
from pairwatch.integrations._kit.stream import Tap
from pairwatch.integrations._kit.urllib3 import RawTee
from pairwatch.runtime import guard


class _Requests(HttpClient):
    """The prepared request is ``send``'s first argument; the urllib3 response gets a tee."""

    integration = "requests"
    stream_flag = "stream"

    def request(self, instance: Any, args: Args, kwargs: Kwargs) -> Request | None:
        prepared = argument(args, kwargs, 0, "request")
        body = getattr(prepared, "body", None)
        return Request(
            body,
            getattr(prepared, "url", None),
            read_timeout=_read_timeout(kwargs),
            headers=getattr(prepared, "headers", None),
        )

    def stream_request(
        self, instance: Any, args: Args, kwargs: Kwargs, streamed: Streamed
    ) -> Request | None:
        """A generator body (sent chunked): seen as requests sends it.  File objects are
        left alone (requests may seek them)."""
        prepared = argument(args, kwargs, 0, "request")
        body = getattr(prepared, "body", None)
        if not isinstance(body, Iterator):
            return None
        prepared.body = _teed(body, streamed)
        return Request(None, getattr(prepared, "url", None), read_timeout=_read_timeout(kwargs))

    reads_whole = True  # a buffered call: ``content`` is read, then shown to the tap whole

    def reply(self, exchange: Exchange, response: Any) -> Reply:
        headers = response.headers
        return headers.get("content-type"), response.status_code, headers.get("location")

    def _tap(self, exchange: Exchange, response: Any) -> Tap:
        content_type, status, location = self.reply(exchange, response)
        encoding = response.headers.get("content-encoding")
        return exchange.tap(
            content_type,
            encoding,
            decoder=_decoders.for_urllib3(encoding),
            status=status,
            location=location,
        )

    def attach(self, exchange: Exchange, response: Any, instance: Any, kwargs: Any) -> Tap | None:
        """A ``stream=True`` call: the caller reads, through the tee."""
        tap = self._tap(exchange, response)
        if getattr(response, "_content", False) is not False:
            # A response hook already read the body into ``content``.
            tap.chunk(self.body(response))
            tap.end()
            return None
        RawTee(response.raw, tap)
        return tap

    def body(self, response: Any) -> bytes:
        return response.content or b""

    def read(self, response: Any) -> None:
        response.content  # noqa: B018 - what Session.send does for stream=False


def _teed(body: Iterator[Any], streamed: Streamed) -> Iterator[Any]:
    for chunk in body:
        data = chunk.encode() if isinstance(chunk, str) else chunk
        guard.shielded("request_tee", streamed.chunk, data)
        yield chunk
    guard.shielded("request_tee", streamed.end)


def _read_timeout(kwargs: Kwargs) -> float | None:
    """requests' ``timeout=``: seconds, a (connect, read) pair, a urllib3 Timeout, or None
    (wait forever: inf)."""
    try:
        timeout = kwargs.get("timeout")
        if timeout is None:
            return math.inf
        if isinstance(timeout, tuple):
            timeout = timeout[1]
        elif not isinstance(timeout, (int, float)):
            timeout = getattr(timeout, "read_timeout", None)
        return math.inf if timeout is None else float(timeout)
    except Exception:
        return None


def install(client: object, options: Options) -> Patches:
    import requests

    if not isinstance(client, requests.Session):
        raise TypeError(f"pairwatch instruments requests.Session, not {type(client).__qualname__}")
    patches = Patches()
    patches.wrap(client, "send", sync_send(_Requests(), fixed(options)))
    return patches


def targets(options: Callable[[], Options]) -> list[tuple[type, str, Wrapper]]:
    import requests

    return [(requests.Session, "send", sync_send(_Requests(), options))]

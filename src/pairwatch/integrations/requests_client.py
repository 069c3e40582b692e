"""requests: ``Session.send``, buffered and ``stream=True``.

``Session.send`` is where every request of a session goes (``get``, ``post``, ``request``).
A tracked exchange calls it with ``stream=True`` and then, for a buffered call, touches
``response.content`` exactly as requests itself does at the end of ``send``; in between, the
urllib3 response (``response.raw``) gets a tee on its reading methods, so ``content``,
``json()``, ``iter_content``, ``iter_lines`` and direct ``raw.read`` calls all show pairwatch a
copy of what the caller receives, chunk by chunk, without pairwatch reading anything itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pairwatch.channel import Options
from pairwatch.integrations._calls import Args, Kwargs, argument
from pairwatch.integrations._exchange import Exchange, HttpClient, Request, sync_send
from pairwatch.integrations._patch import Patches, Wrapper
from pairwatch.integrations._stream import Tap
from pairwatch.integrations._urllib3 import RawTee


class _Requests(HttpClient):
    """The prepared request is ``send``'s first argument; the urllib3 response gets a tee."""

    integration = "requests"
    stream_flag = "stream"

    def request(self, instance: Any, args: Args, kwargs: Kwargs) -> Request | None:
        prepared = argument(args, kwargs, 0, "request")
        return Request(
            getattr(prepared, "body", None),
            getattr(prepared, "url", None),
            headers=getattr(prepared, "headers", None),
        )

    def attach(self, exchange: Exchange, response: Any, instance: Any, kwargs: Any) -> Tap | None:
        headers = response.headers
        tap = exchange.tap(headers.get("content-type"), headers.get("content-encoding"))
        if getattr(response, "_content", False) is not False:
            # A response hook already read the body into ``content``.
            tap.chunk(response.content or b"")
            tap.end()
            return None
        RawTee(response.raw, tap)
        return tap

    def read(self, response: Any) -> None:
        response.content  # noqa: B018 - what Session.send does for stream=False


def install(client: object, options: Options) -> Patches:
    import requests

    if not isinstance(client, requests.Session):
        raise TypeError(f"pairwatch instruments requests.Session, not {type(client).__qualname__}")
    patches = Patches()
    patches.wrap(client, "send", sync_send(_Requests(), lambda: options))
    return patches


def targets(options: Callable[[], Options]) -> list[tuple[type, str, Wrapper]]:
    import requests

    return [(requests.Session, "send", sync_send(_Requests(), options))]

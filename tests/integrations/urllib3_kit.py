"""A whole new HTTP client integration on the exchange skeleton: urllib3's ``PoolManager``.

This is what a new integration has to say and nothing more: where the request body and URL
are in a ``urlopen`` call, how urllib3 is told to leave the body unread
(``preload_content=False``), how to tap the response, and how urllib3 reads a buffered body.
The skeleton does the rest: JSON-RPC sniffing, the bound channel, nested-call pass-through
(urllib3 follows redirects by calling ``urlopen`` again), ``send_failed`` on exceptions,
shielding, suppression and mocks.  The response tee is the one requests uses (a requests
response wraps a urllib3 one), shared in ``_urllib3``, so this needs no tee of its own.
"""

from __future__ import annotations

from typing import Any

from pairwatch.channel import Options
from pairwatch.integrations import Integration, register
from pairwatch.integrations._kit.exchange import Exchange, HttpClient, Request, sync_send
from pairwatch.integrations._kit.patch import Patches
from pairwatch.integrations._kit.stream import Tap
from pairwatch.integrations._kit.urllib3 import RawTee


class Urllib3(HttpClient):
    integration = "urllib3"
    stream_flag = "preload_content"
    streaming = False

    def request(self, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Request:
        url = args[1] if len(args) > 1 else kwargs.get("url")
        return Request(kwargs.get("body"), url)

    def attach(self, exchange: Exchange, response: Any, instance: Any, kwargs: Any) -> Tap:
        headers = response.headers
        tap = exchange.tap(headers.get("content-type"), headers.get("content-encoding"))
        RawTee(response, tap)
        return tap

    def read(self, response: Any) -> None:
        response.data  # noqa: B018 - what preload_content=True does: read and keep the body


def install(pool: object, options: Options) -> Patches:
    import urllib3

    if not isinstance(pool, urllib3.PoolManager):
        raise TypeError(f"not a urllib3.PoolManager: {type(pool).__qualname__}")
    patches = Patches()
    patches.wrap(pool, "urlopen", sync_send(Urllib3(), lambda: options))
    return patches


def detect(obj: object) -> bool:
    return type(obj).__module__.startswith("urllib3.")


def enable() -> Integration:
    """Make ``pairwatch.instrument(pool)`` know urllib3; returns what to unregister."""
    integration = Integration("urllib3", detect, install)
    register(integration)
    return integration

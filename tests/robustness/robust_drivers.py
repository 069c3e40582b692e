"""One buffered JSON POST per HTTP library, the way a user of that library writes it.

Like the integration suite's drivers, but each new client reuses one prebuilt TLS context:
building httpx's default context costs ~50 ms per client, which would dominate a suite
that creates hundreds of clients (every fuzz example runs each library twice).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx
import requests
from http_drivers import JSON, Seen

_TLS = ssl.create_default_context()

Instrument = Callable[[Any], Any]


def _failed(exc: BaseException) -> Seen:
    return Seen(error=(type(exc).__name__, str(exc)))


def _decoded(get: Callable[[], Any]) -> Any:
    try:
        return get()
    except Exception as exc:  # what the caller's .json() raised is part of what it saw
        return ("raised", type(exc).__name__)


def httpx_sync(url: str, body: bytes, instrument: Instrument) -> Seen:
    with instrument(httpx.Client(timeout=5, verify=_TLS)) as client:
        try:
            r = client.post(url, content=body, headers=JSON)
            return Seen(r.content, _decoded(r.json))
        except Exception as exc:
            return _failed(exc)


def httpx_async(url: str, body: bytes, instrument: Instrument) -> Seen:
    async def run() -> Seen:
        async with instrument(httpx.AsyncClient(timeout=5, verify=_TLS)) as client:
            try:
                r = await client.post(url, content=body, headers=JSON)
                return Seen(r.content, _decoded(r.json))
            except Exception as exc:
                return _failed(exc)

    return asyncio.run(run())


def requests_session(url: str, body: bytes, instrument: Instrument) -> Seen:
    with instrument(requests.Session()) as session:
        try:
            r = session.post(url, data=body, headers=JSON, timeout=5)
            return Seen(r.content, _decoded(r.json))
        except Exception as exc:
            return _failed(exc)


def aiohttp_session(url: str, body: bytes, instrument: Instrument) -> Seen:
    async def run() -> Seen:
        async with aiohttp.ClientSession() as session:
            instrument(session)
            try:
                async with session.post(url, data=body, headers=JSON) as r:
                    got = await r.read()
                    return Seen(got, _decoded(lambda: __import__("json").loads(got)))
            except Exception as exc:
                return _failed(exc)

    return asyncio.run(run())


DRIVERS: dict[str, Callable[[str, bytes, Instrument], Seen]] = {
    "httpx": httpx_sync,
    "httpx_async": httpx_async,
    "requests": requests_session,
    "aiohttp": aiohttp_session,
}

"""A tracked exchange leaves nothing for the garbage collector: reference counting frees it.

Why it matters: pairwatch's hooks live on the client's response (requests' urllib3 response,
aiohttp's ``ClientResponse``).  A hook that holds the response it lives on makes a cycle,
and then every exchange leaves its response, buffers and books to the cyclic collector: a
young-generation collection every twenty exchanges where the bare client needs none.
requests and aiohttp leave no cycles of their own on these paths (the first assertion of
each test checks that), so any cyclic garbage of these libraries' types, or pairwatch's,
after instrumented exchanges is pairwatch's doing.  httpx's own response objects are cyclic
garbage with or without pairwatch, and the tee pairwatch sets as the response's stream goes
with them; the books behind it (the tap, the channel, its sink and lock) must not.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from http_drivers import JSON, SCRIPTS, bare, instrumenting

REQUEST = json.dumps(
    [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0", "id": 2, "method": "b"}]
).encode()
REPLY = b'[{"jsonrpc":"2.0","id":1,"result":"A"},{"jsonrpc":"2.0","id":2,"result":"B"}]'
EXCHANGES = 5
WATCHED = ("pairwatch.", "urllib3.", "requests.", "aiohttp.")


def _cyclic_garbage(run: Callable[[], object]) -> Counter[str]:
    """The objects of the watched libraries that only the cyclic collector would free."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return Counter(
            f"{type(o).__module__}.{type(o).__qualname__}"
            for o in gc.garbage
            if type(o).__module__.startswith(WATCHED)
        )
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()


@contextlib.contextmanager
def _requests(
    instrument: Callable[[object], object], url: str
) -> Iterator[Callable[[bool], bytes]]:
    import requests

    with requests.Session() as session:
        instrument(session)

        def post(streamed: bool) -> bytes:
            if streamed:
                with session.post(url, data=REQUEST, headers=JSON, stream=True) as r:
                    return b"".join(r.iter_content(chunk_size=None))
            return session.post(url, data=REQUEST, headers=JSON).content  # type: ignore[no-any-return]

        yield post


@contextlib.contextmanager
def _aiohttp(instrument: Callable[[object], object], url: str) -> Iterator[Callable[[bool], bytes]]:
    import aiohttp

    loop = asyncio.new_event_loop()
    session = loop.run_until_complete(_session(aiohttp))
    instrument(session)

    async def exchange(streamed: bool) -> bytes:
        async with session.post(url, data=REQUEST, headers=JSON) as r:
            if streamed:
                return b"".join([c async for c in r.content.iter_any()])
            return await r.read()  # type: ignore[no-any-return]

    try:
        yield lambda streamed: loop.run_until_complete(exchange(streamed))
    finally:
        loop.run_until_complete(session.close())
        loop.close()


async def _session(aiohttp: Any) -> Any:
    return aiohttp.ClientSession()


CLIENTS = {"requests": _requests, "aiohttp": _aiohttp}


@pytest.mark.parametrize("streamed", [False, True], ids=["buffered", "streamed"])
@pytest.mark.parametrize("library", sorted(CLIENTS))
def test_an_exchange_is_freed_by_reference_counting(otel, scripted, library, streamed):
    """The client is made and instrumented outside what is watched: an instance wrapper and
    its client refer to each other (once per client, not per exchange)."""
    SCRIPTS["/no-cycles"] = (200, JSON, [REPLY], False)
    seen: list[bytes] = []
    for instrument in (bare, instrumenting(otel)):
        with CLIENTS[library](instrument, scripted + "/no-cycles") as post:
            post(streamed)  # connection pools, first-use caches: not what is watched
            found = _cyclic_garbage(
                lambda post=post: seen.extend(post(streamed) for _ in range(EXCHANGES))
            )
        assert found == Counter(), instrument
    assert seen == [REPLY] * (2 * EXCHANGES)
    tracked = EXCHANGES + 1
    assert otel.counters() == {"batch.requests": 2 * tracked, "batch.closed": tracked}
    assert otel.value("batch.closed", pairwatch__close_reason="body_end") == tracked


def _httpx_sync(instrument: Callable[[object], object], url: str, streamed: bool) -> Any:
    import httpx

    client = httpx.Client()
    instrument(client)

    def run() -> list[bytes]:
        out = []
        for _ in range(EXCHANGES):
            if streamed:
                with client.stream("POST", url, content=REQUEST, headers=JSON) as r:
                    out.append(b"".join(r.iter_bytes()))
            else:
                out.append(client.post(url, content=REQUEST, headers=JSON).content)
        return out

    return run


def _httpx_async(instrument: Callable[[object], object], url: str, streamed: bool) -> Any:
    import httpx

    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient()
    instrument(client)

    async def exchanges() -> list[bytes]:
        out = []
        for _ in range(EXCHANGES):
            if streamed:
                async with client.stream("POST", url, content=REQUEST, headers=JSON) as r:
                    out.append(b"".join([c async for c in r.aiter_bytes()]))
            else:
                out.append((await client.post(url, content=REQUEST, headers=JSON)).content)
        return out

    return lambda: loop.run_until_complete(exchanges())


@pytest.mark.parametrize("streamed", [False, True], ids=["buffered", "streamed"])
@pytest.mark.parametrize(("make", "tee"), [(_httpx_sync, "SyncTee"), (_httpx_async, "AsyncTee")])
def test_httpx_leaves_at_most_its_tee_to_the_collector(otel, scripted, make, tee, streamed):
    """An ended tap lets go of its books: they are freed by reference counting, not with the
    response's cycle (before, each exchange left its tap, channel, sink and lock there).  A
    buffered call has no tee (its body is shown whole once read): it leaves nothing."""
    SCRIPTS["/no-cycles-httpx"] = (200, JSON, [REPLY], False)
    seen: list[bytes] = []
    found = []
    for instrument in (bare, instrumenting(otel)):
        run = make(instrument, scripted + "/no-cycles-httpx", streamed)
        run()  # connection pools, first-use caches: not what is watched
        found.append(_cyclic_garbage(lambda run=run: seen.extend(run())))
    without, instrumented = found
    assert without == Counter()  # httpx's own cycles hold no watched type
    tees = {f"pairwatch.integrations.httpx_client._tees.<locals>.{tee}": EXCHANGES}
    assert instrumented == (Counter(tees) if streamed else Counter())
    assert seen == [REPLY] * (2 * EXCHANGES)
    tracked = 2 * EXCHANGES  # the warm-up's and the watched ones
    assert otel.counters() == {"batch.requests": 2 * tracked, "batch.closed": tracked}
    assert otel.value("batch.closed", pairwatch__close_reason="body_end") == tracked

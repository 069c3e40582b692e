"""The least any pairing observer could do to an httpx client or an aiohttp session: the
floor pairwatch is set against.

It decodes the request and the reply with the same msgspec decoders pairwatch uses, compares
their ids, and queues one record per exchange (a plain ``deque``, emptied, never recorded).
It has none of pairwatch's guarantees (no off switch or suppression check, no budget, no
timeouts, no content-type or redirect handling, no metrics), so what pairwatch costs above it
is what those cost; what it costs itself is what any observer that pairs by id must pay.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import wrapt

from pairwatch.pairing import _fast


def _pair(queued: deque[tuple[Any, ...]], sent: Any, got: Any, started: float) -> None:
    """Compare the two bodies' ids and queue one record (the queue emptied, never read)."""
    if (
        sent is not None
        and got is not None
        and sent.plain
        and got.plain
        and got.plain.keys == sent.plain.keys
        and got.is_batch is sent.is_batch
    ):
        queued.append((sent.is_batch, len(sent.plain.keys), time.monotonic() - started))
    if len(queued) > 256:
        queued.clear()


def minimal_observer(client: Any) -> Any:
    """Wrap ``client.send`` (an httpx ``Client``) with the minimal observer; returns it."""
    queued: deque[tuple[Any, ...]] = deque()

    def observe(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        sent = _fast.plain(args[0].content, "request")
        started = time.monotonic()
        response = wrapped(*args, **{**kwargs, "stream": True})
        response.read()
        got = _fast.plain(response.content, "result")
        _pair(queued, sent, got, started)
        return response

    wrapt.wrap_function_wrapper(client, "send", observe)
    return client


def minimal_aiohttp_observer(session: Any) -> Any:
    """The same for an aiohttp ``ClientSession`` (its ``_request``): the body is read inside
    the wrapper, once (aiohttp keeps it, and the caller's ``json()`` reads what it kept), where
    pairwatch must leave the read to the caller and see it through a tee."""
    queued: deque[tuple[Any, ...]] = deque()

    async def observe(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        sent = _fast.plain(kwargs.get("data"), "request")
        started = time.monotonic()
        response = await wrapped(*args, **kwargs)
        got = _fast.plain(await response.read(), "result")
        _pair(queued, sent, got, started)
        return response

    wrapt.wrap_function_wrapper(session, "_request", observe)
    return session

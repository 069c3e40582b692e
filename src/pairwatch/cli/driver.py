"""The demo's traffic: ordinary HTTP clients, instrumented with one line each, sending batches.

Kept apart from the command so that what the demo *does* (an application's calls) is not
mixed with how it is shown.  The clients are real ``httpx`` and ``requests`` objects talking
to a real server on loopback, because that is what a user's application has.
"""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable
from typing import Any

import pairwatch

METHODS = ("eth_blockNumber", "eth_getBalance", "eth_call", "echo")


class Driver:
    """Sends batches through each instrumented client in turn, as an application would."""

    def __init__(
        self,
        url: str,
        clients: list[tuple[str, Callable[[bytes, bool], object]]],
        *,
        batch_size: int,
        client_bug: float,
        seed: int,
        on_stream: Callable[[bytes], None] | None = None,
    ) -> None:
        self.url = url
        self.clients = clients
        self.batch_size = batch_size
        self.client_bug = client_bug
        self.rng = random.Random(seed)
        self.ids = itertools.count(1)
        self.errors = 0
        self.sent = 0
        self.on_stream = on_stream  # told of each body whose reply is asked for as a stream

    def body(self) -> bytes:
        batch = []
        for _ in range(self.batch_size):
            method = self.rng.choice(METHODS)
            batch.append(
                {
                    "jsonrpc": "2.0",
                    "id": next(self.ids),
                    "method": method,
                    "params": [self.rng.randrange(1000)],
                }
            )
        if self.rng.random() < self.client_bug and len(batch) > 1:
            batch[-1]["id"] = batch[0]["id"]  # a shared counter without a lock
        return json.dumps(batch).encode()

    def step(self) -> None:
        _, send = self.clients[self.sent % len(self.clients)]
        sse = self.sent % 4 == 3
        self.sent += 1
        body = self.body()
        if sse and self.on_stream is not None:
            self.on_stream(body)
        try:
            send(body, sse)
        except Exception:
            self.errors += 1  # cut streams and garbage replies raise in clients: expected


def http_clients(url: str, provider: Any, timeout: float) -> tuple[list[Any], list[Any]]:
    """One instrumented client per installed HTTP library; pairwatch needs one line each."""
    clients: list[tuple[str, Callable[[bytes, bool], object]]] = []
    closers: list[Any] = []
    headers = {"Content-Type": "application/json"}
    sse_headers = {**headers, "Accept": "text/event-stream"}
    try:
        import httpx

        hx = pairwatch.instrument(
            httpx.Client(timeout=10), meter_provider=provider, timeout=timeout
        )

        def via_httpx(body: bytes, sse: bool) -> object:
            if sse:
                with hx.stream("POST", url, content=body, headers=sse_headers) as r:
                    return b"".join(r.iter_bytes())
            return hx.post(url, content=body, headers=headers).content

        clients.append(("httpx", via_httpx))
        closers.append(hx)
    except ImportError:
        pass
    try:
        import requests

        rq = pairwatch.instrument(requests.Session(), meter_provider=provider, timeout=timeout)

        def via_requests(body: bytes, sse: bool) -> object:
            if sse:
                with rq.post(url, data=body, headers=sse_headers, stream=True, timeout=10) as r:
                    return b"".join(r.iter_content(None))
            return rq.post(url, data=body, headers=headers, timeout=10).content

        clients.append(("requests", via_requests))
        closers.append(rq)
    except ImportError:
        pass
    return clients, closers

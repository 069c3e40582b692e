"""A WSGI app for tests/fleet/test_gunicorn_preload.py: instrumented once, in the master.

Loaded with ``gunicorn --preload``: the instrumentor patches httpx here, before the workers
are forked, with no provider of its own (the global one, which the example's ``post_fork``
sets in each worker).  Each request makes one JSON-RPC batch of 3 to ``CHAOS_URL``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from pairwatch.instrumentor import PairwatchInstrumentor

PairwatchInstrumentor().instrument(spans=False)
UPSTREAM = os.environ["CHAOS_URL"]
_client: httpx.Client | None = None


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    global _client
    if _client is None:  # one client per worker, made after the fork
        _client = httpx.Client()
    n = int(environ.get("PATH_INFO", "/0").strip("/") or 0)
    batch = [{"jsonrpc": "2.0", "id": n * 10 + i, "method": "echo"} for i in range(3)]
    got = _client.post(UPSTREAM, json=batch).json()
    body = json.dumps({"pid": os.getpid(), "replies": len(got)}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]

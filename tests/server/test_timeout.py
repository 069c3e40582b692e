"""An application slower than the timeout: the server's books time out like a client's.

The app holds its reply until the test lets it go (an event, no sleep): first the request
closes as missing by ``timeout``, then the reply that finally leaves is a late response.
"""

from __future__ import annotations

import threading

import anyio.to_thread
import httpx
from otel_support import Otel
from server_support import call, uvicorn_server, wait_until

import pairwatch


def test_a_held_reply_times_out_then_counts_late(otel: Otel):
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    release = threading.Event()

    async def hold(request: Request) -> Response:
        await request.body()
        await anyio.to_thread.run_sync(release.wait, 20)
        return Response(b'{"jsonrpc": "2.0", "id": 1, "result": "late"}')

    app = pairwatch.PairwatchMiddleware(
        Starlette(routes=[Route("/", hold, methods=["POST"])]),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        timeout=0.2,
    )
    replies: list[bytes] = []
    with uvicorn_server(app) as base:
        caller = threading.Thread(
            target=lambda: replies.append(httpx.post(base + "/", json=call(1), timeout=20).content)
        )
        caller.start()
        wait_until(lambda: otel.value("batch.closed") == 1, what="the timeout (sweeper)")
        release.set()
        caller.join(20)
        wait_until(lambda: otel.value("batch.late_response") == 1, what="the late reply")
    assert replies == [b'{"jsonrpc": "2.0", "id": 1, "result": "late"}']
    assert otel.attrs("batch.closed")[0]["pairwatch.close_reason"] == "timeout"
    assert otel.counters() == {
        "batch.closed": 1,
        "batch.requests": 1,
        "batch.missing_response": 1,
        "batch.response_count_mismatch": 1,
        "batch.unknown_id_response": 1,  # a late reply is still an unknown id
        "batch.late_response": 1,
    }

"""Keep a JSON-RPC server's side of the books, and find a reply lost between two ends.

A Starlette JSON-RPC app is wrapped in one line (``pairwatch.PairwatchMiddleware(app)``) and
served by uvicorn; an httpx client is instrumented as usual.  Between them runs pairwatch's
chaos proxy, dropping the reply to id 2 on its way back.  The server's books say it answered
all three requests; the client's say one went missing; side by side that is
``lost_in_transit``, not the server's fault.

Run:  python examples/server_middleware.py          (needs starlette, uvicorn and httpx)
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import httpx
import uvicorn
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import pairwatch
from pairwatch.chaos import ChaosServer, Fault
from pairwatch.server import Crosscheck


async def rpc(request: Request) -> Response:
    """A well-behaved JSON-RPC server: echoes each request's params, in order."""
    batch = json.loads(await request.body())
    replies = [{"jsonrpc": "2.0", "id": r["id"], "result": r["params"]} for r in batch]
    return Response(json.dumps(replies), media_type="application/json")


def totals(reader: InMemoryMetricReader, side: str) -> dict[str, int]:
    """Every counter that moved on one side, as a scrape would show it."""
    out: dict[str, int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    value: Any = getattr(point, "value", None)
                    attrs = point.attributes or {}
                    if value and attrs.get("pairwatch.side") == side:
                        out[metric.name] = out.get(metric.name, 0) + value
    return dict(sorted(out.items()))


def main() -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    crosscheck = Crosscheck()
    app = pairwatch.PairwatchMiddleware(
        Starlette(routes=[Route("/", rpc, methods=["POST"])]),
        meter_provider=meters,
        on_batch_closed=crosscheck.server,  # only for the per-batch verdict below
    )
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    proxy = ChaosServer(Fault("drop", indices=(1,)), upstream=f"http://127.0.0.1:{port}/")
    proxy.run_in_thread()
    try:
        with httpx.Client() as client:
            pairwatch.instrument(
                client,
                meter_provider=meters,
                on_batch_closed=crosscheck.client,
                propagate=True,  # the server's batch span joins the client's trace
            )
            batch = [
                {"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in [1, 2, 3]
            ]
            reply = client.post(proxy.url, json=batch).json()
        print("the client got ids", [r["id"] for r in reply])
        while not crosscheck.verdicts:
            time.sleep(0.01)
        print("client side:", totals(reader, "client"))
        print("server side:", totals(reader, "server"))
        verdict = crosscheck.verdicts[0]
        print(f"verdict: {verdict.diagnosis}: {verdict.words}")
    finally:
        proxy.stop_thread()
        server.should_exit = True


if __name__ == "__main__":
    main()

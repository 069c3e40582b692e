"""What the caller receives is byte for byte what the bare application sends, and traces join.

Two uvicorn servers run the same Starlette app, one wrapped: every exchange is compared
byte for byte on the wire (status line, headers, chunked SSE framing, body), Date aside.
Then two instrumented clients (httpx, requests) share one wrapped server: their integrations
propagate ``traceparent``, so each client's batch span and the server's batch span for that
batch meet in one trace, and no batch lands in the other's.
"""

from __future__ import annotations

import json
import threading

import httpx
from components import need
from otel_support import Otel
from server_apps import starlette_app
from server_support import call, note, raw_exchange, uvicorn_server, wait_until

import pairwatch

need("starlette", "pip install starlette (in the test extra; the MCP SDK brings it)")

EXCHANGES = [
    ("/", [call(0), call(1, "drop"), note(), call(2, "null_id")]),
    ("/?reverse=1", [call(i) for i in range(20)]),
    ("/", call(5)),
    ("/", [note(), note()]),
    ("/sse", [call(0), call(1)]),
    ("/?boom=1", [call(0)]),
    ("/health", {"not": "json-rpc"}),
]


def test_wrapped_and_bare_apps_send_identical_bytes(otel):
    wrapped = pairwatch.PairwatchMiddleware(
        starlette_app(), meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    with uvicorn_server(starlette_app()) as bare, uvicorn_server(wrapped) as seen:
        for path, body in EXCHANGES:
            data = json.dumps(body).encode()
            assert raw_exchange(seen, path, data) == raw_exchange(bare, path, data), path
    # And the wrapped one kept books of the six JSON-RPC exchanges (not /health).
    wait_until(lambda: otel.value("batch.closed") == 6, what="six closed batches")
    assert otel.value("batch.requests") == 3 + 20 + 1 + 0 + 2 + 1


def test_two_clients_one_server_meet_in_one_trace_per_batch(otel: Otel):
    """httpx and requests, each instrumented, each batch sent inside its own span: the
    integrations propagate ``traceparent`` and the server's batch span joins that trace."""
    import requests

    app = pairwatch.PairwatchMiddleware(
        starlette_app(), meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    tracer = otel.tracer_provider.get_tracer("test")
    parents: dict[str, list[int]] = {"httpx": [], "requests": []}
    providers = {"meter_provider": otel.meter_provider, "tracer_provider": otel.tracer_provider}

    def client_run(name: str, url: str) -> None:
        client = pairwatch.instrument(
            httpx.Client(timeout=5) if name == "httpx" else requests.Session(), **providers
        )
        try:
            for i in range(5):
                with tracer.start_as_current_span(f"{name}-{i}") as span:
                    parents[name].append(span.get_span_context().span_id)
                    r = client.post(url, json=[call(i), call(100 + i)])
                    assert [x["id"] for x in r.json()] == [i, 100 + i]
        finally:
            client.close()

    with uvicorn_server(app) as base:
        threads = [threading.Thread(target=client_run, args=(n, base + "/")) for n in parents]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        wait_until(lambda: otel.value("batch.closed", pairwatch__side="server") == 10)
    assert otel.value("batch.requests", pairwatch__side="client") == 20
    assert otel.value("batch.requests", pairwatch__side="server") == 20
    assert otel.value("batch.missing_response") == 0

    spans = otel.spans()
    batches = [s for s in spans if s.name == "jsonrpc batch"]
    assert len(batches) == 20
    by_parent: dict[int, list[str]] = {}
    for s in batches:
        assert s.parent is not None
        by_parent.setdefault(s.parent.span_id, []).append(s.kind.name)
    outer = {s.context.span_id: s for s in spans if s.name.startswith(("httpx-", "requests-"))}
    assert len(outer) == 10
    # One client batch span and one server batch span under each caller span, in that
    # span's trace: no batch of one client under a span of the other.
    assert {k: sorted(v) for k, v in by_parent.items()} == {
        span_id: ["CLIENT", "SERVER"] for span_id in outer
    }
    for s in batches:
        assert s.context.trace_id == outer[s.parent.span_id].context.trace_id
        assert s.attributes["pairwatch.side"] == s.kind.name.lower()


def test_traceparent_is_added_only_inside_a_span_and_never_overwritten(otel: Otel):
    """What the server received, as it received it: untraced requests go out unchanged."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo_header(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        seen = request.headers.get("traceparent")
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": seen})

    app = Starlette(routes=[Route("/", echo_header, methods=["POST"])])
    tracer = otel.tracer_provider.get_tracer("test")
    with uvicorn_server(app) as base, httpx.Client(timeout=5) as client:
        pairwatch.instrument(client, tracer_provider=otel.tracer_provider)
        assert client.post(base + "/", json=call(1)).json()["result"] is None
        with tracer.start_as_current_span("caller") as span:
            got = client.post(base + "/", json=call(2)).json()["result"]
            mine = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
            kept = client.post(base + "/", json=call(3), headers={"traceparent": mine})
        ctx = span.get_span_context()
        assert got == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"
        assert kept.json()["result"] == mine
        off = pairwatch.instrument(httpx.Client(timeout=5), propagate=False)
        with tracer.start_as_current_span("untold"), off:
            assert off.post(base + "/", json=call(4)).json()["result"] is None


async def test_aiohttp_propagates_on_a_copy_of_the_callers_headers(otel: Otel):
    """aiohttp takes headers per call: the caller's own mapping must stay as it was."""
    aiohttp = need("aiohttp", "pip install 'pairwatch[aiohttp]'")
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo_header(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        seen = [request.headers.get("traceparent"), request.headers.getlist("x-twice")]
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": seen})

    app = Starlette(routes=[Route("/", echo_header, methods=["POST"])])
    tracer = otel.tracer_provider.get_tracer("test")
    mine = {"X-Twice": "1"}
    with uvicorn_server(app) as base:
        async with aiohttp.ClientSession() as session:
            pairwatch.instrument(session, tracer_provider=otel.tracer_provider)
            async with session.post(base + "/", json=call(1), headers=mine) as r:
                untraced = (await r.json())["result"]
            with tracer.start_as_current_span("caller") as span:
                async with session.post(base + "/", json=call(2), headers=mine) as r:
                    traced = (await r.json())["result"]
    ctx = span.get_span_context()
    assert untraced == [None, ["1"]]
    assert traced == [f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}", ["1"]]
    assert mine == {"X-Twice": "1"}  # the caller's mapping was copied, not written to

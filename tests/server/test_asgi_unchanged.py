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
from typing import Any

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
    providers = {
        "meter_provider": otel.meter_provider,
        "tracer_provider": otel.tracer_provider,
        "propagate": True,
    }

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


def test_traceparent_is_added_only_when_asked_inside_a_span_and_never_overwritten(otel: Otel):
    """What the server received, as it received it: by default nothing is added; asked to
    propagate, untraced requests still go out unchanged and a caller's own header stays."""
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
        pairwatch.instrument(client, tracer_provider=otel.tracer_provider, propagate=True)
        assert client.post(base + "/", json=call(1)).json()["result"] is None
        with tracer.start_as_current_span("caller") as span:
            got = client.post(base + "/", json=call(2)).json()["result"]
            mine = "00-" + "1" * 32 + "-" + "2" * 16 + "-01"
            kept = client.post(base + "/", json=call(3), headers={"traceparent": mine})
        ctx = span.get_span_context()
        assert got == traceparent(span)
        assert kept.json()["result"] == mine
        off = pairwatch.instrument(httpx.Client(timeout=5))  # the default: propagate=False
        with tracer.start_as_current_span("untold"), off:
            assert off.post(base + "/", json=call(4)).json()["result"] is None
        assert ctx.is_valid


def traceparent(span: Any) -> str:
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}"


def test_a_request_object_sent_twice_carries_each_sends_span_and_stays_the_callers(otel: Otel):
    """httpx ``send(req)`` and requests' ``send(prepared)`` twice, under span a then span b:
    by default the caller's headers are untouched; asked to propagate, each send carries its
    own span (pairwatch's earlier header replaced), a caller's own header is never replaced,
    and the response's request is the caller's object."""
    import requests
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def echo_header(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        return JSONResponse(
            {"jsonrpc": "2.0", "id": body["id"], "result": request.headers.get("traceparent")}
        )

    app = Starlette(routes=[Route("/", echo_header, methods=["POST"])])
    tracer = otel.tracer_provider.get_tracer("test")
    mine = "00-" + "3" * 32 + "-" + "4" * 16 + "-01"
    with uvicorn_server(app) as base:
        for propagate in (False, True):
            hx = pairwatch.instrument(
                httpx.Client(timeout=5), tracer_provider=otel.tracer_provider, propagate=propagate
            )
            rq = pairwatch.instrument(
                requests.Session(), tracer_provider=otel.tracer_provider, propagate=propagate
            )
            with hx, rq:
                req = hx.build_request("POST", base + "/", json=call(1))
                prepared = rq.prepare_request(requests.Request("POST", base + "/", json=call(1)))
                before = (dict(req.headers), dict(prepared.headers))
                seen: list[tuple[str | None, str | None, str]] = []
                for name in ("a", "b"):
                    with tracer.start_as_current_span(name) as span:
                        r1 = hx.send(req)
                        r2 = rq.send(prepared)
                        seen.append((r1.json()["result"], r2.json()["result"], traceparent(span)))
                        assert r1.request is req
                        assert r2.request is prepared
                if propagate:
                    assert [(a, b) for a, b, _ in seen] == [(t, t) for _, _, t in seen]
                    assert seen[0][2] != seen[1][2]
                else:
                    assert [(a, b) for a, b, _ in seen] == [(None, None), (None, None)]
                    assert (dict(req.headers), dict(prepared.headers)) == before
                # A caller's own traceparent is left alone, whatever pairwatch set before.
                req.headers["traceparent"] = mine
                prepared.headers["traceparent"] = mine
                with tracer.start_as_current_span("c"):
                    assert hx.send(req).json()["result"] == mine
                    assert rq.send(prepared).json()["result"] == mine


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
            pairwatch.instrument(session, tracer_provider=otel.tracer_provider, propagate=True)
            async with session.post(base + "/", json=call(1), headers=mine) as r:
                untraced = (await r.json())["result"]
            with tracer.start_as_current_span("caller") as span:
                async with session.post(base + "/", json=call(2), headers=mine) as r:
                    traced = (await r.json())["result"]
    ctx = span.get_span_context()
    assert untraced == [None, ["1"]]
    assert traced == [f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{ctx.trace_flags:02x}", ["1"]]
    assert mine == {"X-Twice": "1"}  # the caller's mapping was copied, not written to

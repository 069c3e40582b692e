"""Nothing pairwatch does reaches the application or its caller; cut replies are counted.

A failure inside the middleware's books is counted in ``pairwatch.internal_errors`` while the
caller still gets the application's reply; an event stream the application breaks counts
what it had not answered; a WSGI body the server stops taking closes its books.
"""

from __future__ import annotations

import io
import json
from wsgiref.util import setup_testing_defaults

import httpx
import pytest
from otel_support import Otel
from server_apps import starlette_app, wsgi_app
from server_support import answer_body, call, uvicorn_server, wait_until

import pairwatch
from pairwatch.server import exchange as exchange_module


def wrapped_asgi(otel: Otel) -> pairwatch.PairwatchMiddleware:
    return pairwatch.PairwatchMiddleware(
        starlette_app(), meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )


def test_a_failure_in_the_books_is_counted_and_the_reply_is_untouched(otel, monkeypatch):
    def broken(body: object) -> object:
        raise RuntimeError("pairwatch bug")

    monkeypatch.setattr(exchange_module, "request_payload", broken)
    body = [call(0), call(1)]
    with uvicorn_server(wrapped_asgi(otel)) as url:
        r = httpx.post(url + "/", content=json.dumps(body), timeout=5)
        assert r.content == answer_body(json.dumps(body).encode())
        wait_until(lambda: otel.value("pairwatch.internal_errors") == 1, what="one error")
    (attrs,) = otel.attrs("pairwatch.internal_errors")
    assert attrs == {"pairwatch.error_kind": "server_request"}
    assert otel.value("batch.closed") == 0  # gave up on this exchange, counted nothing else


def test_a_stream_the_app_breaks_counts_what_it_had_not_answered(otel):
    with uvicorn_server(wrapped_asgi(otel)) as url:
        with (
            pytest.raises(httpx.RemoteProtocolError),
            httpx.stream(
                "POST", url + "/sse?cut=1", json=[call(0), call(1), call(2)], timeout=5
            ) as r,
        ):
            for _ in r.iter_lines():
                pass
        wait_until(lambda: otel.value("batch.closed") == 1, what="the batch to close")
    assert otel.counters() == {
        "batch.closed": 1,
        "batch.requests": 3,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 1,
    }
    (missing,) = otel.attrs("batch.missing_response")
    assert (missing["pairwatch.close_reason"], missing["pairwatch.transport"]) == (
        "app_error",
        "sse",
    )


def test_a_wsgi_body_the_server_stops_taking_closes_as_stream_dropped(otel):
    """What a WSGI server does when its caller goes away: close() before the end."""
    app = pairwatch.PairwatchWSGIMiddleware(
        wsgi_app, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    body = json.dumps([call(i) for i in range(3)]).encode()
    environ: dict[str, object] = {
        "REQUEST_METHOD": "POST",
        "QUERY_STRING": "chunks=1",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    setup_testing_defaults(environ)
    heads: list[str] = []
    result = app(environ, lambda status, headers, *rest: heads.append(status))
    first = next(iter(result))
    result.close()  # type: ignore[attr-defined]
    assert heads == ["200 OK"]
    assert first == answer_body(body)[: len(answer_body(body)) // 3]
    assert otel.counters() == {
        "batch.closed": 1,
        "batch.requests": 3,
        "batch.missing_response": 3,
        "batch.response_count_mismatch": 1,
    }
    (missing,) = otel.attrs("batch.missing_response")
    assert missing["pairwatch.close_reason"] == "stream_dropped"
    assert missing["server.address"] == "127.0.0.1"


def test_the_off_switch_lets_every_exchange_pass_uncounted(otel):
    app = pairwatch.PairwatchWSGIMiddleware(wsgi_app, meter_provider=otel.meter_provider)
    body = json.dumps([call(0), call(1, "drop")]).encode()
    environ: dict[str, object] = {
        "REQUEST_METHOD": "POST",
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    setup_testing_defaults(environ)
    pairwatch.disable()
    try:
        result = app(environ, lambda status, headers, *rest: None)
        assert b"".join(result) == answer_body(body)
        assert isinstance(environ["wsgi.input"], io.BytesIO)  # not even the reader went in
    finally:
        pairwatch.enable()
    pairwatch.flush()
    assert otel.counters(zeros=True) == {}

"""The WSGI middleware around a plain WSGI JSON-RPC app under a real waitress.

Same books as the ASGI side, read from the server's own exported metrics; and the bytes on
the wire are the bare app's (waitress keeps ``Content-Length`` because the wrapped body
keeps ``len()``, and chunked generator bodies stay chunked).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from components import need
from otel_support import Otel
from server_apps import wsgi_app
from server_support import answer_body, call, note, raw_exchange, wait_until, waitress_server

import pairwatch

need("waitress", "pip install -e '.[test]' (waitress is in the test extra)")


def wrapped(otel: Otel) -> pairwatch.PairwatchWSGIMiddleware:
    return pairwatch.PairwatchWSGIMiddleware(
        wsgi_app, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )


@pytest.fixture
def url(otel: Otel) -> Iterator[str]:
    with waitress_server(wrapped(otel)) as base:
        yield base


def closed(otel: Otel, n: int) -> None:
    wait_until(lambda: otel.value("batch.closed") >= n, what=f"{n} closed batches")
    assert otel.value("batch.closed") == n


def post(url: str, body: object) -> httpx.Response:
    return httpx.post(url, content=json.dumps(body).encode(), timeout=5)


def test_healthy_batch(url, otel):
    body = [call(0), note(), call(1)]
    assert post(url + "/", body).content == answer_body(json.dumps(body).encode())
    closed(otel, 1)
    assert otel.counters() == {"batch.closed": 1, "batch.requests": 2}
    (attrs,) = otel.attrs("batch.closed")
    assert (attrs["pairwatch.side"], attrs["pairwatch.integration"]) == ("server", "wsgi")
    assert attrs["pairwatch.close_reason"] == "body_end"
    assert otel.hist("batch.pair_latency")[0] == 2


def test_faults_and_a_reply_in_three_chunks(url, otel):
    body = [call(0), call(1, "drop"), call(2, "null_id"), call(3, "both"), note("chatty")]
    r = post(url + "/?chunks=1&reverse=1", body)
    assert r.content == answer_body(json.dumps(body).encode(), reverse=True)
    closed(otel, 1)
    assert otel.counters() == {
        "batch.closed": 1,
        "batch.requests": 4,
        "batch.missing_response": 2,
        "batch.null_id_response": 2,
        "batch.response_count_mismatch": 1,
        "batch.invalid_response": 1,
        "batch.out_of_order": 1,  # 3 came back before 0
    }


def test_single_object_for_a_batch_and_dropped_single(url, otel):
    post(url + "/?object=1", [call(0), call(1)])
    post(url + "/", call(7, "drop"))
    closed(otel, 2)
    assert otel.counters() == {
        "batch.closed": 2,
        "batch.requests": 3,
        "batch.missing_response": 2,
        "batch.protocol_violation": 1,
        "batch.response_count_mismatch": 2,
    }


def test_an_app_that_raises_closes_its_books_as_app_error(url, otel):
    r = post(url + "/?boom=1", [call(0), call(1)])
    assert r.status_code == 500  # waitress's own answer to an app that raised
    closed(otel, 1)
    assert otel.counters() == {
        "batch.closed": 1,
        "batch.requests": 2,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 1,
    }
    (missing,) = otel.attrs("batch.missing_response")
    assert missing["pairwatch.close_reason"] == "app_error"


def test_wire_bytes_match_the_bare_app(otel):
    exchanges = [
        ("/", [call(0), call(1, "drop")]),
        ("/?chunks=1", [call(i) for i in range(10)]),
        ("/", [note()]),
        ("/health", {"x": 1}),
    ]
    with waitress_server(wsgi_app) as bare, waitress_server(wrapped(otel)) as seen:
        for path, body in exchanges:
            data = json.dumps(body).encode()
            got = raw_exchange(seen, path, data)
            assert got == raw_exchange(bare, path, data), path
            if path == "/":
                assert b"Content-Length:" in got  # len() of the body was kept
    wait_until(lambda: otel.value("batch.closed") == 3, what="three closed batches")
    assert otel.value("batch.requests") == 2 + 10


def test_apps_that_read_by_line_or_in_pieces_see_the_same_body(otel):
    """The reader stands in for wsgi.input: every way of reading gives the bytes sent."""
    seen: list[bytes] = []

    def reading_app(environ, start_response):
        stream = environ["wsgi.input"]
        if environ.get("QUERY_STRING") == "lines":
            body = b"".join(stream)  # iteration, line by line
        else:
            length = int(environ["CONTENT_LENGTH"])
            body = stream.read(5) + stream.readline() + stream.read(length)
        seen.append(body)
        reply = answer_body(body)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [reply]

    app = pairwatch.PairwatchWSGIMiddleware(reading_app, meter_provider=otel.meter_provider)
    body = (
        b'[{"jsonrpc": "2.0", "id": 1, "method": "a"},\n{"jsonrpc": "2.0", "id": 2, "method": "b"}]'
    )
    with waitress_server(app) as base:
        for query in ("lines", "pieces"):
            r = httpx.post(f"{base}/?{query}", content=body, timeout=5)
            assert r.content == answer_body(body)
    assert seen == [body, body]
    closed(otel, 2)
    assert otel.counters() == {"batch.closed": 2, "batch.requests": 4}

"""The ASGI middleware around a Starlette JSON-RPC app under a real uvicorn.

The client here is plain httpx, not instrumented: every number is the server's own books
(``pairwatch.side="server"``).  Each test sends what it chose and asserts every counter
that moved, and that the caller got exactly what the app answered.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import httpx
import pytest
from components import need
from otel_support import Otel
from server_apps import starlette_app
from server_support import answer_body, call, note, uvicorn_server, wait_until

import pairwatch
from pairwatch.otel.names import SIDE

need("starlette", "pip install starlette (in the test extra; the MCP SDK brings it)")


@pytest.fixture
def url(otel: Otel) -> Iterator[str]:
    app = pairwatch.PairwatchMiddleware(
        starlette_app(), meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    with uvicorn_server(app) as base:
        yield base


def closed(otel: Otel, n: int) -> None:
    """The server closes its books just after the reply left: wait for the n-th batch."""
    wait_until(lambda: otel.value("batch.closed") >= n, what=f"{n} closed batches")
    assert otel.value("batch.closed") == n


def settled(otel: Otel, expected: dict[str, int]) -> None:
    """Wait for the books to read ``expected``, then compare (a diff when they never do).

    A reply to a notifications-only batch lands after that batch closed (it expected
    nothing), so waiting for the close alone would read the books too early.
    """
    with contextlib.suppress(TimeoutError):
        wait_until(lambda: otel.counters() == expected, timeout=5, what="the books")
    assert otel.counters() == expected


def post(url: str, body: object) -> httpx.Response:
    return httpx.post(
        url,
        content=json.dumps(body).encode(),
        timeout=5,
        headers={"content-type": "application/json"},
    )


def test_healthy_batch_pairs_every_request_and_changes_nothing(url, otel):
    body = [call(0), call(1), note(), call(2)]
    r = post(url + "/", body)
    assert r.content == answer_body(json.dumps(body).encode())
    closed(otel, 1)
    assert otel.counters() == {"batch.closed": 1, "batch.requests": 3}
    assert otel.attrs("batch.closed") == [
        {
            "rpc.system.name": "jsonrpc",
            "pairwatch.transport": "http",
            "pairwatch.integration": "asgi",
            "pairwatch.side": "server",
            "server.address": "127.0.0.1",
            "jsonrpc.batch": "true",
            "pairwatch.diagnosis": "ok",
            "pairwatch.close_reason": "body_end",
        }
    ]
    assert otel.hist("batch.pair_latency", pairwatch__side="server")[0] == 3
    assert otel.hist("batch.size")[0] == 1


def test_every_fault_the_server_makes_is_counted_once(url, otel):
    body = [
        call(0),
        call(1, "drop"),  # never answered
        call(2, "null_id"),  # answered with id null
        call(3, "both"),  # result and error
        call(4, "no_version"),  # no jsonrpc member
        call(5, "bad_error"),  # error code not an integer
        note("chatty"),  # a notification the server answers anyway (id null)
    ]
    r = post(url + "/", body)
    assert r.content == answer_body(json.dumps(body).encode())
    closed(otel, 1)
    assert otel.counters() == {
        "batch.closed": 1,
        "batch.requests": 6,
        "batch.missing_response": 2,  # 1 dropped, 2 answered with id null
        "batch.null_id_response": 2,
        "batch.response_count_mismatch": 1,
        "batch.invalid_response": 3,
    }
    reasons = {a["pairwatch.reason"] for a in otel.attrs("batch.invalid_response")}
    assert reasons == {"both_result_and_error", "bad_version", "error_code_not_integer"}
    missing = {a["rpc.method"] for a in otel.attrs("batch.missing_response")}
    assert missing == {"drop", "null_id"}
    assert otel.value("batch.closed", pairwatch__diagnosis="server_null_id") == 1
    assert otel.hist("batch.pair_latency")[0] == 4


@pytest.mark.parametrize(
    ("query", "body", "expected"),
    [
        ("?reverse=1", [call(0), call(1), call(2)],
         {"batch.closed": 1, "batch.requests": 3, "batch.out_of_order": 1}),
        ("?object=1", [call(0), call(1)],
         {"batch.closed": 1, "batch.requests": 2, "batch.protocol_violation": 1,
          "batch.missing_response": 1, "batch.response_count_mismatch": 1}),
        ("", [note("chatty")],
         {"batch.closed": 1, "batch.protocol_violation": 1, "batch.null_id_response": 1}),
        ("", [note(), note()], {"batch.closed": 1}),
        ("", call(9, "drop"),
         {"batch.closed": 1, "batch.requests": 1, "batch.missing_response": 1,
          "batch.response_count_mismatch": 1}),
    ],
    ids=["reordered", "object_for_batch", "reply_to_notifications", "notifications", "dropped"],
)  # fmt: skip
def test_reply_shapes(url, otel, query, body, expected):
    r = post(url + "/" + query, body)
    assert r.content == answer_body(
        json.dumps(body).encode(), reverse="reverse" in query, as_object="object" in query
    )
    settled(otel, expected)
    assert {a[SIDE] for a in otel.attrs("batch.closed")} == {"server"}


def test_violation_reasons_name_the_shape(url, otel):
    post(url + "/?object=1", [call(0), call(1)])
    post(url + "/", [note("chatty")])
    closed(otel, 2)
    wait_until(lambda: otel.value("batch.protocol_violation") == 2, what="both violations")
    reasons = sorted(a["pairwatch.reason"] for a in otel.attrs("batch.protocol_violation"))
    assert reasons == ["reply_to_notifications", "single_reply_to_batch"]


def test_sse_replies_pair_per_event(url, otel):
    with httpx.stream("POST", url + "/sse", json=[call(0), call(1), call(2)], timeout=5) as r:
        events = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert len(events) == 3
    closed(otel, 1)
    assert otel.counters() == {"batch.closed": 1, "batch.requests": 3}
    assert otel.attrs("batch.closed")[0]["pairwatch.transport"] == "sse"
    assert otel.attrs("batch.closed")[0]["pairwatch.close_reason"] == "stream_end"
    assert otel.hist("batch.pair_latency")[0] == 3


def test_an_app_that_raises_still_raises_and_its_requests_count_missing(url, otel):
    r = post(url + "/?boom=1", [call(0), call(1)])
    assert (r.status_code, r.content) == (500, b"Internal Server Error")  # Starlette's own
    closed(otel, 1)
    assert otel.counters() == {
        "batch.closed": 1,
        "batch.requests": 2,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 1,
        "batch.invalid_response": 1,  # the text body is no JSON-RPC reply
    }


def test_other_traffic_passes_through_uncounted(url, otel):
    assert httpx.get(url + "/health").content == b"ok"
    assert httpx.post(url + "/health", content=b"not json-rpc").content == b"ok"
    assert post(url + "/", []).status_code == 202  # [] is not a batch pairwatch tracks
    r = post(url + "/", call(1))
    assert r.json()["result"] == [1]
    closed(otel, 1)  # only the last one
    assert otel.counters() == {"batch.closed": 1, "batch.requests": 1}


def test_a_gzipped_reply_is_read_on_a_private_decoder(otel):
    """The app compresses its own replies (Starlette's GZipMiddleware inside the wrap): the
    books decode a copy; the caller gets the compressed bytes the app sent."""
    from starlette.middleware.gzip import GZipMiddleware

    app = pairwatch.PairwatchMiddleware(
        GZipMiddleware(starlette_app(), minimum_size=0), meter_provider=otel.meter_provider
    )
    body = [call(i) for i in range(50)]
    with uvicorn_server(app) as base:
        r = httpx.post(base + "/", json=body, headers={"accept-encoding": "gzip"}, timeout=5)
    assert r.headers["content-encoding"] == "gzip"
    assert r.content == answer_body(json.dumps(body).encode())  # httpx decoded it
    closed(otel, 1)
    assert otel.counters() == {"batch.closed": 1, "batch.requests": 50}

"""pairwatch's exact counts against what real third-party servers answer.

/work/shared/INCIDENTS.md (observed by hand): for ``[]`` both answer the spec-required single
``-32600`` error with id null; for a batch with one invalid element (``5``), PyPI
jsonrpcserver 5.0.9 answers one error object for the whole batch (the valid calls are never
answered) while npm jayson 5.0.0 answers a null-id ``-32600`` for the element and the rest.
"""

from __future__ import annotations

import urllib.request

import pytest
from components import need
from jsonrpc_build import dumps, req
from otel_support import PAIRING_COUNTERS, Otel

import pairwatch
from pairwatch import Options

INVALID_ELEMENT_BATCH = [req(1, "ping"), 5, req(2, "ping")]

SERVERS = ["jsonrpcserver", "jayson"]


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> tuple[str, str]:
    return request.param, request.getfixturevalue(f"{request.param}_url")


def post(url: str, body: bytes) -> bytes:
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read()


def exchange(url: str, otel: Otel, body: bytes) -> bytes:
    """One POST recorded through the channel API, as a hand-written client would."""
    channel = pairwatch.open_channel(
        transport="http",
        bound=True,
        options=Options(meter_provider=otel.meter_provider, spans=False),
    )
    channel.sent(body)
    reply = post(url, body)
    channel.received(reply)
    channel.close("body_end")
    return reply


def books(otel: Otel, **nonzero: int) -> tuple[dict[str, int], dict[str, int]]:
    got = otel.counters()
    want = dict.fromkeys(PAIRING_COUNTERS, 0)
    want.update({k.replace("__", "."): v for k, v in nonzero.items()})
    return {k: got.get(k, 0) for k in want}, want


def test_empty_batch_gets_the_spec_reply_and_no_violation(server):
    _name, url = server
    otel = Otel()
    exchange(url, otel, b"[]")
    got, want = books(otel, batch__null_id_response=1, batch__invalid_request=1)
    assert got == want
    assert otel.value("batch.invalid_request", pairwatch__reason="empty_batch") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="malformed_request_element") == 1
    assert otel.hist("batch.size") == (1, 0)


def test_jsonrpcserver_answers_a_batch_with_one_invalid_element_with_one_error(
    jsonrpcserver_url,
):
    otel = Otel()
    reply = exchange(jsonrpcserver_url, otel, dumps(INVALID_ELEMENT_BATCH))
    assert reply.lstrip().startswith(b"{")  # one object for the whole batch, as observed
    got, want = books(
        otel,
        batch__invalid_request=1,
        batch__null_id_response=1,
        batch__missing_response=2,
        batch__response_count_mismatch=1,
        batch__protocol_violation=1,
    )
    assert got == want
    assert otel.value("batch.invalid_request", pairwatch__reason="not_an_object") == 1
    assert otel.value("batch.protocol_violation", pairwatch__reason="single_reply_to_batch") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="malformed_request_element") == 1
    assert otel.hist("batch.pair_latency")[0] == 0


def test_jayson_answers_the_invalid_element_and_the_rest(jayson_url):
    otel = Otel()
    reply = exchange(jayson_url, otel, dumps(INVALID_ELEMENT_BATCH))
    assert reply.lstrip().startswith(b"[")
    got, want = books(otel, batch__invalid_request=1, batch__null_id_response=1)
    assert got == want
    assert otel.value("batch.closed", pairwatch__diagnosis="malformed_request_element") == 1
    assert otel.hist("batch.pair_latency")[0] == 2


@pytest.mark.parametrize(
    ("name", "moved"),
    [
        (
            "jsonrpcserver",
            {
                "batch.invalid_request": 1,
                "batch.null_id_response": 1,
                "batch.missing_response": 2,
                "batch.response_count_mismatch": 1,
                "batch.protocol_violation": 1,
            },
        ),
        ("jayson", {"batch.invalid_request": 1, "batch.null_id_response": 1}),
    ],
)
def test_same_counts_through_the_httpx_integration(request, name, moved):
    httpx = need("httpx", "pip install -e '.[httpx]'")
    url = request.getfixturevalue(f"{name}_url")
    otel = Otel()
    client = pairwatch.instrument(
        httpx.Client(timeout=10), meter_provider=otel.meter_provider, spans=False
    )
    with client:
        client.post(
            url, content=dumps(INVALID_ELEMENT_BATCH), headers={"Content-Type": "application/json"}
        )
    got, want = books(otel, **{k.replace(".", "__"): v for k, v in moved.items()})
    assert got == want
    assert otel.value("batch.closed", pairwatch__diagnosis="malformed_request_element") == 1

"""Counters at zero: a healthy service exports 0, so the first fault is an increase."""

from __future__ import annotations

import urllib.request

import pytest
from jsonrpc_build import dumps, req, res
from prometheus_client.parser import text_string_to_metric_families

import pairwatch
from pairwatch import Options
from pairwatch.otel import exposition
from pairwatch.otel.vocabulary import INSTRUMENTS

PAIRING = [row.name for row in INSTRUMENTS if row.pairing]
BASE = {
    "rpc.system.name": "jsonrpc",
    "pairwatch.transport": "http",
    "pairwatch.integration": "manual",
    "pairwatch.side": "client",
    "server.address": "node",
    "jsonrpc.batch": "true",
}


def _exchange(channel_for, sent, reply, reason="body_end"):
    channel = channel_for()
    channel.sent(dumps(sent))
    if reply is not None:
        channel.received(dumps(reply))
    channel.close(reason)


def test_one_healthy_batch_exports_every_pairing_counter_at_zero(otel, clock):
    options = Options(meter_provider=otel.meter_provider, clock=clock, spans=False)

    def channel_for():
        return pairwatch.open_channel(
            bound=True, transport="http", server_address="node", options=options
        )

    _exchange(channel_for, [req(1, "a"), req(2, "b")], [res(1), res(2)])
    zeros = sorted(
        (name, tuple(sorted(set(attrs.items()) - set(BASE.items()))))
        for name, attrs, point in otel.collect()
        if name in PAIRING and point.value == 0 and BASE.items() <= attrs.items()
    )
    assert zeros == sorted(
        [
            ("batch.unknown_id_response", ()),
            ("batch.null_id_response", ()),
            ("batch.response_count_mismatch", ()),
            ("batch.invalid_response", ()),
            ("batch.invalid_request", ()),
            ("batch.out_of_order", ()),
            ("batch.protocol_violation", ()),
            ("batch.late_response", ()),
            ("batch.reply_after_withdrawal", ()),
            ("batch.duplicate_id", (("pairwatch.duplicate_scope", "cross_batch"),)),
            ("batch.duplicate_id", (("pairwatch.duplicate_scope", "in_batch"),)),
        ]
        + [
            (
                "batch.missing_response",
                (("pairwatch.close_reason", reason), ("rpc.method", method)),
            )
            for method in "ab"
            for reason in ("body_end", "send_failed", "stream_dropped", "timeout")
        ]
    )
    withdrawn = sorted(
        a["pairwatch.reason"] for a in otel.attrs("batch.withdrawn_request", zeros=True)
    )
    assert withdrawn == ["cancelled", "switched_off"]
    # the 19 pairing zeros and 2 withdrawn ones, closed, requests, size, 2 latencies
    assert len(otel.collect()) == 26
    # A second healthy batch on the same attribute set adds no series.
    _exchange(channel_for, [req(3, "a"), req(4, "b")], [res(3), res(4)])
    assert len(otel.collect()) == 26
    # The first fault raises series that already existed at 0; only batch.closed gains one
    # (its diagnosis attribute names the fault).
    _exchange(channel_for, [req(5, "a"), req(6, "b")], [res(6), res(9)])
    assert len(otel.collect()) == 27
    assert len(otel.attrs("batch.closed")) == 2
    assert (
        otel.value("batch.missing_response", rpc__method="a", pairwatch__close_reason="body_end")
        == 1
    )
    assert (
        otel.value(
            "batch.unknown_id_response", **{k.replace(".", "__"): v for k, v in BASE.items()}
        )
        == 1
    )
    assert otel.value("batch.out_of_order") == 0  # one reply paired: no order to break
    assert otel.value("batch.response_count_mismatch") == 0  # 2 sent, 2 non-null replies
    assert otel.value("batch.closed") == 3


def test_single_requests_get_their_own_zero_series(otel, clock):
    options = Options(meter_provider=otel.meter_provider, clock=clock, spans=False)
    channel = pairwatch.open_channel(transport="websocket", options=options)
    channel.sent(dumps(req(1, "eth_chainId")))
    channel.received(dumps(res(1)))
    pairwatch.flush()
    single = [a for n, a, _ in otel.collect() if n == "batch.missing_response"]
    assert sorted(a["pairwatch.close_reason"] for a in single) == [
        "stream_dropped",
        "stream_end",
        "timeout",
    ]
    assert {a["jsonrpc.batch"] for a in single} == {"false"}
    assert otel.value("batch.missing_response") == 0


@pytest.fixture
def endpoint():
    provider, server = exposition.serve(port=0)
    yield provider, f"http://127.0.0.1:{server.server_port}/metrics"
    server.shutdown()


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_prometheus_page_shows_zero_then_the_first_fault(endpoint):
    provider, url = endpoint
    options = Options(meter_provider=provider, spans=False)

    def channel_for():
        return pairwatch.open_channel(
            bound=True, transport="http", server_address="node", options=options
        )

    labels = (
        ("jsonrpc_batch", "true"),
        ("pairwatch_integration", "manual"),
        ("pairwatch_side", "client"),
        ("pairwatch_transport", "http"),
        ("rpc_system_name", "jsonrpc"),
        ("server_address", "node"),
    )
    missing_a = tuple(
        sorted((*labels, ("rpc_method", "a"), ("pairwatch_close_reason", "body_end")))
    )
    _exchange(channel_for, [req(1, "a")], [res(1)])
    healthy = _scrape(url)
    assert healthy[("batch_missing_response_total", missing_a)] == 0
    assert healthy[("batch_unknown_id_response_total", labels)] == 0
    assert healthy[("batch_null_id_response_total", labels)] == 0
    assert healthy[("batch_late_response_total", labels)] == 0
    in_batch = tuple(sorted((*labels, ("pairwatch_duplicate_scope", "in_batch"))))
    assert healthy[("batch_duplicate_id_total", in_batch)] == 0
    zero_series = sorted(k for k, v in healthy.items() if k[0].endswith("_total") and v == 0)
    assert len(zero_series) == 17  # 9 at the batch attributes, 2 duplicate, 4 missing, 2 withdrawn

    _exchange(channel_for, [req(2, "a")], None)  # the server sent nothing back
    faulty = _scrape(url)
    assert faulty[("batch_missing_response_total", missing_a)] == 1
    # The fault moved an existing series; only batch_closed_total gains its diagnosis.
    assert {k for k in faulty if k[0] != "batch_closed_total"} == {
        k for k in healthy if k[0] != "batch_closed_total"
    }

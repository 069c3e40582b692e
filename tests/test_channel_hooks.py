"""Generic channel hooks integrations use: close one batch, relabel, per-request span attributes."""

from __future__ import annotations

from jsonrpc_build import dumps, req, res

import pairwatch
from pairwatch import Options


def _channel(otel, clock, **kw):
    return pairwatch.open_channel(
        options=Options(
            meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider, clock=clock
        ),
        **kw,
    )


def test_close_batch_counts_its_pending_as_missing_and_leaves_others_open(otel, clock):
    channel = _channel(otel, clock)
    first = channel.sent(dumps(req(1, "a")))
    channel.sent(dumps(req(2, "b")))
    assert first is not None
    channel.close_batch(first, "timeout")
    channel.close_batch(first, "timeout")  # already closed: nothing more
    assert otel.value("batch.missing_response", pairwatch__close_reason="timeout") == 1
    assert channel.ledger.pending_ids == 1
    channel.received(dumps(res(1)))  # late: the batch is closed, so it is unknown
    channel.received(dumps(res(2)))
    assert otel.value("batch.unknown_id_response") == 1
    assert otel.hist("batch.pair_latency")[0] == 1


def test_relabel_applies_to_batches_closed_afterwards(otel, clock):
    channel = _channel(otel, clock, transport="stdio", integration="mcp")
    channel.sent(dumps(req(1, "a")))
    channel.relabel(transport="http", integration="mcp", server_address="127.0.0.1")
    channel.received(dumps(res(1)))
    (attrs,) = otel.attrs("batch.requests")
    assert attrs["pairwatch.transport"] == "http"
    assert attrs["server.address"] == "127.0.0.1"


def test_span_attribute_hook_adds_to_each_request_span(otel, clock):
    seen = []

    def extra(call):
        seen.append(call.key)
        return {"mcp.method.name": call.method} if call.key == 1 else None

    channel = _channel(otel, clock, span_attributes=extra)
    channel.sent(dumps([req(1, "tools/call"), req(2, "ping")]))
    channel.received(dumps([res(1), res(2)]))
    children = {s.name: s for s in otel.spans() if s.parent is not None}
    assert children["tools/call"].attributes["mcp.method.name"] == "tools/call"
    assert "mcp.method.name" not in children["ping"].attributes
    assert seen == [1, 2]


def test_a_failing_span_attribute_hook_costs_nothing_but_an_internal_error(otel, clock):
    def broken(call):
        raise RuntimeError("bug in an integration")

    channel = _channel(otel, clock, span_attributes=broken)
    channel.sent(dumps(req(1, "a")))
    channel.received(dumps(res(1)))
    assert otel.value("pairwatch.internal_errors", pairwatch__error_kind="span_attributes") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 1
    assert [s.name for s in otel.spans() if s.parent is not None] == ["a"]


def test_inbound_requests_are_paired_by_the_clients_answers(otel, clock):
    channel = _channel(otel, clock)
    channel.sent(dumps(req(1, "tools/call")))
    channel.received(dumps(req(1, "sampling/createMessage")))  # same id, other direction
    assert channel.ledger.inbound_pending == 1
    channel.sent(dumps(res(1)))
    assert channel.ledger.inbound_pending == 0
    channel.received(dumps(res(1)))
    assert otel.value("batch.unknown_id_response") == 0
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 1

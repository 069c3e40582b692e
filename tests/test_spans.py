"""One span per batch with one child per request id, read from an in-memory exporter."""

from __future__ import annotations

from jsonrpc_build import dumps, err, req, res
from opentelemetry.semconv._incubating.attributes import jsonrpc_attributes, rpc_attributes
from opentelemetry.trace import SpanKind, StatusCode

import pairwatch
from pairwatch import Options
from pairwatch.otel import names


def test_attribute_names_are_the_current_semantic_conventions():
    assert names.JSONRPC_REQUEST_ID == jsonrpc_attributes.JSONRPC_REQUEST_ID
    assert names.RPC_SYSTEM_NAME == rpc_attributes.RPC_SYSTEM_NAME
    assert names.RPC_RESPONSE_STATUS_CODE == rpc_attributes.RPC_RESPONSE_STATUS_CODE
    assert names.RPC_METHOD == rpc_attributes.RPC_METHOD


def test_batch_span_with_a_child_per_id(otel, clock):
    channel = pairwatch.open_channel(
        bound=True,
        options=Options(
            meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider, clock=clock
        ),
    )
    channel.sent(dumps([req(1, "eth_blockNumber"), req("b", "eth_getBalance"), req(3, "x")]))
    clock.advance(0.2)
    channel.received(dumps([err("b", -32602, "bad params"), res(1)]))
    clock.advance(0.1)
    channel.close("body_end")

    spans = otel.spans()
    roots = [s for s in spans if s.parent is None]
    assert len(roots) == 1
    root = roots[0]
    assert root.name == "jsonrpc batch"
    assert root.kind is SpanKind.CLIENT
    assert root.attributes["pairwatch.diagnosis"] == "responses_missing"
    assert root.attributes["jsonrpc.batch.size"] == 3
    assert root.status.status_code is StatusCode.ERROR

    children = {s.name: s for s in spans if s.parent is not None}
    assert set(children) == {"eth_blockNumber", "eth_getBalance", "x"}
    for child in children.values():
        assert child.parent.span_id == root.context.span_id
        assert child.context.trace_id == root.context.trace_id
    ok = children["eth_blockNumber"]
    assert ok.attributes["jsonrpc.request.id"] == "1"
    assert ok.attributes["pairwatch.outcome"] == "paired"
    assert ok.end_time - ok.start_time == 200_000_000
    failed = children["eth_getBalance"]
    assert failed.attributes["rpc.response.status_code"] == "-32602"
    missing = children["x"]
    assert missing.attributes["pairwatch.outcome"] == "missing"
    assert missing.status.status_code is StatusCode.ERROR
    assert missing.end_time - missing.start_time == 300_000_000


def test_null_id_is_left_out_and_duplicates_marked(otel, clock):
    channel = pairwatch.open_channel(
        bound=True,
        options=Options(
            meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider, clock=clock
        ),
    )
    channel.sent(dumps([req(None, "a"), req(7, "b"), req(7, "c")]))
    channel.received(dumps([res(7), res(7)]))
    channel.close("body_end")
    children = {s.name: s for s in otel.spans() if s.parent is not None}
    assert "jsonrpc.request.id" not in children["a"].attributes
    assert children["c"].attributes["pairwatch.outcome"] == "duplicate"
    assert children["b"].attributes["pairwatch.outcome"] == "paired"


def test_spans_nest_under_the_callers_span(otel, clock):
    tracer = otel.tracer_provider.get_tracer("app")
    channel = pairwatch.open_channel(
        options=Options(
            meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider, clock=clock
        )
    )
    with tracer.start_as_current_span("handler") as handler:
        channel.sent(dumps(req(1, "ping")))
    channel.received(dumps(res(1)))
    (root,) = [s for s in otel.spans() if s.name == "jsonrpc request"]
    assert root.parent.span_id == handler.get_span_context().span_id


def test_spans_can_be_turned_off(otel, clock):
    channel = pairwatch.open_channel(
        options=Options(
            meter_provider=otel.meter_provider,
            tracer_provider=otel.tracer_provider,
            clock=clock,
            spans=False,
        )
    )
    channel.sent(dumps(req(1)))
    channel.received(dumps(res(1)))
    assert otel.spans() == []
    assert otel.value("batch.closed") == 1

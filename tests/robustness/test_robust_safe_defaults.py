"""Safe defaults: no payload leaves the process unless asked; loopback endpoints; bounded
labels; instrumenting never keeps a client alive."""

from __future__ import annotations

import gc
import json
import logging
import weakref
from typing import Any

import httpx
import pytest
import requests
from opentelemetry import trace
from robust_support import CountingMeterProvider, settle
from toy import ToyClient, server

import pairwatch
from pairwatch import api
from pairwatch.chaos import ChaosServer, Fault
from pairwatch.cli import build_parser
from pairwatch.otel import exposition
from pairwatch.otel.capture import TRUNCATED

SECRET = "s3cr3t-7f9a"
HEADERS = {"Content-Type": "application/json"}


def batch_with_secret() -> bytes:
    return json.dumps(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": [SECRET + "-params"]},
            {"jsonrpc": "2.0", "id": 2, "method": "echo", "params": ["x" * 5000]},
            {"jsonrpc": "2.0", "id": 3, "method": "echo", "params": [SECRET]},
        ]
    ).encode()


def everything_recorded(otel: Any, caplog: pytest.LogCaptureFixture) -> str:
    """All text pairwatch exported: span names, attributes, events, statuses, metric
    attributes and log records."""
    parts: list[str] = [r.getMessage() for r in caplog.records]
    for span in otel.spans():
        parts += [span.name, repr(dict(span.attributes or {})), repr(span.status.description)]
        parts += [repr(e.attributes) for e in span.events]
    parts += [repr(attrs) for _name, attrs, _p in otel.collect()]
    return "\n".join(parts)


def post(chaos: ChaosServer, otel: Any, **options: Any) -> bytes:
    chaos.set_faults([Fault("drop", indices=[0])])  # a non-ok diagnosis: a log line too
    client = pairwatch.instrument(
        httpx.Client(timeout=5),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        **options,
    )
    with client:
        return client.post(chaos.url, content=batch_with_secret(), headers=HEADERS).content


def payload_attrs(otel: Any) -> dict[int, dict[str, str]]:
    out: dict[int, dict[str, str]] = {}
    for span in otel.spans():
        attrs = dict(span.attributes or {})
        if "jsonrpc.request.id" in attrs:
            out[int(attrs["jsonrpc.request.id"])] = {
                k: v for k, v in attrs.items() if k.endswith(".payload")
            }
    return out


def test_no_payload_anywhere_by_default(otel, chaos, fresh_log, caplog):
    with caplog.at_level(logging.DEBUG, logger="pairwatch"):
        reply = post(chaos, otel)
    settle()
    assert SECRET in reply.decode()  # the caller got it; pairwatch recorded none of it
    assert len(otel.spans()) == 4  # the batch and its three ids
    assert any("missing" in r.getMessage() for r in caplog.records)
    assert SECRET not in everything_recorded(otel, caplog)
    assert payload_attrs(otel) == {1: {}, 2: {}, 3: {}}


def test_opt_in_capture_applies_size_limit_and_redaction(otel, chaos):
    def redact(message: dict[str, Any]) -> Any:
        if message.get("id") == 3:
            return {**message, "params": "[redacted]", "result": "[redacted]"}
        return message

    post(chaos, otel, capture_payloads=True, max_payload_bytes=200, redact=redact)
    settle()
    got = payload_attrs(otel)
    assert set(got[1]) == {"pairwatch.request.payload"}  # its reply was dropped
    assert json.loads(got[1]["pairwatch.request.payload"])["params"] == [SECRET + "-params"]
    for text in got[2].values():  # 5000 bytes of params and of result, cut to 200
        assert text.endswith(TRUNCATED)
        assert len(text.encode()) == 200 + len(TRUNCATED)
    assert json.loads(got[3]["pairwatch.request.payload"])["params"] == "[redacted]"
    assert json.loads(got[3]["pairwatch.response.payload"])["result"] == "[redacted]"
    assert all(SECRET not in t for t in got[3].values())


def test_a_failing_redact_hook_records_nothing(otel, chaos, fresh_log, caplog):
    def redact(message: Any) -> Any:
        raise ValueError("hook bug")

    with caplog.at_level(logging.INFO, logger="pairwatch"):
        reply = post(chaos, otel, capture_payloads=True, redact=redact)
    settle()
    assert SECRET in reply.decode()
    assert payload_attrs(otel) == {1: {}, 2: {}, 3: {}}  # fail closed
    assert SECRET not in everything_recorded(otel, caplog)
    assert sum("internal error in redact" in r.getMessage() for r in caplog.records) == 1


def test_capture_on_a_stream_channel_forgets_with_the_books(otel):
    channel = pairwatch.open_channel(
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        capture_payloads=True,
        max_pending_ids=8,
    )
    for i in range(100):  # never answered, and unknown ids: nothing may pile up
        channel.sent({"jsonrpc": "2.0", "id": i, "method": "m", "params": [SECRET]})
        channel.received({"jsonrpc": "2.0", "id": f"u{i}", "result": SECRET})
    channel.close("stream_end")
    capture = channel._capture  # white-box: the per-channel store is empty again
    assert capture is not None
    assert capture._requests == {}
    assert capture._responses == {}


def test_endpoints_bind_loopback_by_default():
    _provider, srv = exposition.serve(port=0)
    try:
        assert srv.server_address[0] == "127.0.0.1"
    finally:
        srv.shutdown()
        srv.server_close()
    demo = build_parser().parse_args(["demo"])
    assert demo.metrics_addr == "127.0.0.1"
    assert ChaosServer().host == "127.0.0.1"


def test_method_label_cap_holds_under_a_flood_of_method_names():
    meter = CountingMeterProvider()
    channel = pairwatch.open_channel(
        meter_provider=meter, tracer_provider=trace.NoOpTracerProvider(), method_cap=32
    )
    names = [f"method_{i}" for i in range(10_000)] + ["m" * 100_000]
    for i, name in enumerate(names):
        channel.sent([{"jsonrpc": "2.0", "id": i, "method": name}])
        if i % 2:
            channel.received([{"jsonrpc": "2.0", "id": i, "result": 0}])
    channel.close("stream_end")
    settle()
    paired = meter.label_values("batch.pair_latency:count", "rpc.method")
    missing = meter.label_values("batch.missing_response", "rpc.method")
    assert len(paired | missing) == 33  # 32 names, then _OTHER
    assert "_OTHER" in paired
    assert meter.value("batch.pair_latency:count") == 5_000


@pytest.mark.parametrize("kind", ["httpx", "requests", "generic"])
def test_an_instrumented_client_that_is_dropped_is_collected(otel, kind):
    make = {
        "httpx": lambda: httpx.Client(),
        "requests": requests.Session,
        "generic": lambda: ToyClient(server()),
    }[kind]
    extra = {"send": "call", "receive": "call"} if kind == "generic" else {}
    before = len(api._handles)
    client = pairwatch.instrument(make(), meter_provider=otel.meter_provider, **extra)
    assert pairwatch.is_instrumented(client)
    assert len(api._handles) == before + 1
    gone = weakref.ref(client)
    del client
    gc.collect()
    assert gone() is None
    assert len(api._handles) == before


def test_a_client_without_weak_references_is_still_handled(otel):
    class Slotted:
        __slots__ = ("__dict__",)

        def call(self, body: bytes) -> bytes:
            return ToyClient(server()).call(body)

    client = pairwatch.instrument(Slotted(), send="call", receive="call")
    assert pairwatch.is_instrumented(client)
    pairwatch.uninstrument(client)
    assert not pairwatch.is_instrumented(client)
    assert "call" not in vars(client)

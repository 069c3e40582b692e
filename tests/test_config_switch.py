"""``pairwatch.disable()`` / ``enable()``: while off, every wrapper passes straight through
(one flag check: no other pairwatch function runs) and nothing is counted; on again, counting
resumes.  Shown on the generic wrapper, on a real httpx client against the chaos server, and
on the process-wide instrumentor."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from components import need
from jsonrpc_build import dumps, req
from toy import ToyClient, server

import pairwatch
from pairwatch.chaos import Fault

SRC = str(Path(pairwatch.__file__).resolve().parent)


@pytest.fixture(autouse=True)
def switched_back_on() -> Iterator[None]:
    yield
    pairwatch.enable()


def pairwatch_calls(fn: Callable[[], Any]) -> list[str]:
    """The pairwatch functions that ran (by name) while ``fn`` ran, in call order."""
    seen: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(SRC):
            seen.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


def test_disabled_wrappers_pass_straight_through_and_count_nothing(otel):
    client = pairwatch.instrument(
        ToyClient(server("drop")),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        send="send",
        receive="receive",
    )
    client.send(dumps([req(1), req(2)]))
    client.receive()
    pairwatch.disable()
    assert not pairwatch.is_enabled()
    calls = pairwatch_calls(lambda: client.send(dumps([req(3), req(4)])))
    # The wrapper finds the client's own method and asks the pass-through check, which
    # reads the switch first; nothing of the channel or the books runs.
    assert calls == ["on_instance", "_through_class", "passes_through"]
    assert client.receive() == dumps([{"jsonrpc": "2.0", "id": 3, "result": None}])
    for i in range(5, 9):
        client.send(dumps([req(i), req(i + 100)]))
        client.receive()
    pairwatch.enable()
    enabled_calls = pairwatch_calls(lambda: client.send(dumps([req(20), req(21)])))
    assert len(enabled_calls) > 10  # the check above can fail: enabled, the books run
    client.receive()
    pairwatch.uninstrument(client)  # closes the stream: pending ids count as missing
    # Two batches counted (before and after), each missing its dropped last id; the
    # replies read while disabled were never looked at (no unknown ids).
    assert otel.value("batch.closed") == 2
    assert otel.value("batch.requests") == 4
    assert otel.value("batch.missing_response") == 2
    assert otel.value("batch.unknown_id_response") == 0


def test_a_hand_fed_channel_records_nothing_while_disabled(otel):
    channel = pairwatch.open_channel(
        meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    pairwatch.disable()
    channel.sent(dumps([req(1)]))
    channel.received(dumps({"jsonrpc": "2.0", "id": 99, "result": 0}))
    pairwatch.enable()
    channel.sent(dumps([req(2)]))
    channel.received(dumps({"jsonrpc": "2.0", "id": 2, "result": 0}))
    channel.close()
    assert otel.counters() == {"batch.closed": 1, "batch.requests": 1}


def post(client: Any, url: str, ids: range) -> Any:
    body = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in ids])
    return client.post(url, content=body, headers={"Content-Type": "application/json"})


def test_httpx_client_disabled_then_enabled(otel, chaos):
    httpx = need("httpx", "pip install 'pairwatch[httpx]'")
    srv = chaos([Fault("drop", indices=(0,))] * 6)  # one step per exchange
    client = pairwatch.instrument(
        httpx.Client(), meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    try:
        pairwatch.disable()
        quiet = [post(client, srv.url, range(i * 10, i * 10 + 3)) for i in range(4)]
        assert [len(r.json()) for r in quiet] == [2, 2, 2, 2]  # the client read its replies
        assert otel.counters(zeros=True) == {}
        pairwatch.enable()
        post(client, srv.url, range(100, 103))
        post(client, srv.url, range(200, 203))
    finally:
        client.close()
    assert otel.value("batch.closed") == 2
    assert otel.value("batch.requests") == 6
    assert otel.value("batch.missing_response") == 2


def test_instrumentor_honours_the_switch_and_the_environment(otel, chaos, monkeypatch):
    httpx = need("httpx", "pip install 'pairwatch[httpx]'")
    need("opentelemetry.instrumentation", "pip install 'pairwatch[instrumentation]'")
    from pairwatch.instrumentor import PairwatchInstrumentor

    monkeypatch.setenv("PAIRWATCH_SPANS", "false")
    srv = chaos([Fault("drop", indices=(1,))] * 3)
    inst = PairwatchInstrumentor()
    inst.instrument(meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider)
    try:
        with httpx.Client() as client:
            post(client, srv.url, range(1, 4))
            pairwatch.disable()
            post(client, srv.url, range(4, 7))
            pairwatch.enable()
            post(client, srv.url, range(7, 10))
    finally:
        inst.uninstrument()
    assert otel.value("batch.closed") == 2
    assert otel.value("batch.missing_response") == 2
    assert otel.spans() == []  # PAIRWATCH_SPANS=false reached the instrumentor


def test_instrumentor_wraps_nothing_when_the_environment_disables_it(otel, monkeypatch):
    need("opentelemetry.instrumentation", "pip install 'pairwatch[instrumentation]'")
    from pairwatch.instrumentor import PairwatchInstrumentor

    monkeypatch.setenv("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "pairwatch")
    inst = PairwatchInstrumentor()
    inst.instrument(meter_provider=otel.meter_provider)
    try:
        assert inst.wrapped == []
    finally:
        inst.uninstrument()
    monkeypatch.delenv("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS")
    again = PairwatchInstrumentor()
    again.instrument(meter_provider=otel.meter_provider)
    try:
        assert again.wrapped != []  # the check above can fail
    finally:
        again.uninstrument()

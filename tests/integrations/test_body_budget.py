"""The bytes every HTTP tap buffers, together, have a process-wide budget.

Each body is capped (64 MiB), but hundreds of slow exchanges could each hold one: the
budget (256 MiB by default, :data:`pairwatch.integrations._kit.body.DEFAULT_BODY_BUDGET`) caps
them all.  A body that does not fit stops being buffered and its exchange is not checked:
its requests count in ``batch.unchecked_request`` with reason ``body_budget``, never as
missing; the caller still gets every byte.  Here the budget is
lowered to 100 bytes: one exchange holds 40 bytes of a half-sent body while another
buffered reply of 80 bytes arrives.
"""

from __future__ import annotations

import gc
import json
import os
import threading

import httpx
import pytest
from http_drivers import HOOKS, SCRIPTS

import pairwatch
from pairwatch.channel import open_channel
from pairwatch.integrations._kit.body import DEFAULT_BODY_BUDGET, body_budget
from pairwatch.integrations._kit.stream import Tap

REQUEST = json.dumps(
    [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0", "id": 2, "method": "b"}]
).encode()
REPLY = b'[{"jsonrpc":"2.0","id":1,"result":"A"},{"jsonrpc":"2.0","id":2,"result":"B"}]'


@pytest.fixture
def small_budget(monkeypatch):
    budget = body_budget()
    assert budget.limit == DEFAULT_BODY_BUDGET == 256 * 1024 * 1024
    assert budget.used == 0
    monkeypatch.setattr(budget, "limit", 100)
    yield budget
    assert budget.used == 0  # every charge was released


def test_a_body_past_the_process_budget_is_unchecked(otel, scripted, small_budget):
    go_on = threading.Event()
    SCRIPTS["/half"] = (200, {"Content-Type": "application/json"}, [REPLY[:40], REPLY[40:]], False)

    def hold_second_half(index: int) -> None:
        if index:
            go_on.wait(10)

    HOOKS["/half"] = hold_second_half
    SCRIPTS["/whole"] = (200, {"Content-Type": "application/json"}, [REPLY], False)
    client = pairwatch.instrument(
        httpx.Client(timeout=5),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
    )
    with client, client.stream("POST", scripted + "/half", content=REQUEST) as held:
        chunks = held.iter_raw()
        first = next(chunks)
        assert first == REPLY[:40]
        assert small_budget.used == 40
        other = client.post(scripted + "/whole", content=REQUEST)
        assert other.content == REPLY  # the caller is unaffected
        assert otel.value("batch.unchecked_request", pairwatch__reason="body_budget") == 2
        go_on.set()
        assert first + b"".join(chunks) == REPLY
    assert otel.counters() == {
        "batch.requests": 4,
        "batch.closed": 2,
        "batch.unchecked_request": 2,
    }
    assert otel.value("batch.closed", pairwatch__close_reason="unchecked") == 1
    assert otel.value("batch.closed", pairwatch__close_reason="body_end") == 1
    assert otel.hist("batch.pair_latency")[0] == 2


@pytest.mark.parametrize("status", [202, 307])
def test_a_reply_answered_elsewhere_past_the_budget_is_unchecked(
    otel, scripted, small_budget, status
):
    """A 202 or a redirect whose body does not fit is judged like any other body that does
    not fit, whether the client reads it whole or in chunks."""
    path = f"/elsewhere-too-large-{status}"
    headers = {"Content-Type": "application/json", "Location": "/elsewhere"}
    SCRIPTS[path] = (status, headers, [REPLY + b" " * 40], False)
    client = pairwatch.instrument(
        httpx.Client(timeout=5),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
    )
    with client:
        response = client.post(scripted + path, content=REQUEST)
    assert response.status_code == status
    assert response.content == REPLY + b" " * 40  # the caller is unaffected
    assert otel.counters() == {
        "batch.requests": 2,
        "batch.closed": 1,
        "batch.unchecked_request": 2,
    }
    assert otel.value("batch.unchecked_request", pairwatch__reason="body_budget") == 2


def test_a_tap_dropped_half_read_gives_its_share_back(otel, small_budget):
    channel = open_channel(
        bound=True, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    channel.sent(REQUEST)
    tap = Tap(channel, "application/json")
    tap.chunk(REPLY[:60])
    assert small_budget.used == 60
    del tap
    gc.collect()
    assert small_budget.used == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_a_forked_child_starts_with_the_whole_budget(otel, small_budget):
    channel = open_channel(
        bound=True, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
    )
    channel.sent(REQUEST)
    tap = Tap(channel, "application/json")
    tap.chunk(REPLY[:60])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it has charged, then leave at once
        os.write(write, str(body_budget().used).encode())
        os._exit(0)
    os.close(write)
    assert os.read(read, 32) == b"0"
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0
    assert small_budget.used == 60  # the parent's charge stands
    tap.end()  # 60 of the 80 bytes: not JSON, so both requests close missing
    assert otel.value("batch.missing_response", pairwatch__close_reason="body_end") == 2
    assert otel.value("batch.invalid_response", pairwatch__reason="unparseable") == 1

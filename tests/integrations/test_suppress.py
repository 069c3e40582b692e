"""OpenTelemetry's ``suppress_instrumentation`` context: pairwatch tracks nothing inside it.

Exporters and other instrumentations run their own traffic inside that context so that it is
not observed; contrib instrumentors pass such calls straight through, and so does pairwatch.
Both ways of entering it are covered: the contrib helper (``opentelemetry-instrumentation``,
an optional extra) and the API's context key, which is always there.  Inside, the counters
stay at 0; outside, the same client counts every batch; the caller sees the same bytes.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator

import httpx
import pytest
from components import need
from http_drivers import DRIVERS, bare, instrumenting
from toy import ToyClient, server

import pairwatch
from pairwatch.instrumentor import PairwatchInstrumentor

BATCH = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in range(3)])
INSIDE, OUTSIDE = 3, 2
INSTRUMENT_INSTALL = "pip install 'pairwatch[instrumentation]' (scripts/bootstrap.sh does)"


@contextlib.contextmanager
def by_context_key() -> Iterator[None]:
    from opentelemetry import context

    token = context.attach(context.set_value(context._SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        yield
    finally:
        context.detach(token)


def by_contrib_helper() -> contextlib.AbstractContextManager[None]:
    utils = need("opentelemetry.instrumentation.utils", INSTRUMENT_INSTALL)
    return utils.suppress_instrumentation()  # type: ignore[no-any-return]


HOW: dict[str, Callable[[], contextlib.AbstractContextManager[None]]] = {
    "context_key": by_context_key,
    "contrib_helper": by_contrib_helper,
}


@pytest.mark.parametrize("how", sorted(HOW))
def test_http_clients_track_nothing_inside(otel, chaos_server, driver, how):
    chaos_server.set_faults(None)
    name, run = driver
    plain = run(chaos_server.url, BATCH.encode(), False, bare)
    with HOW[how]():
        inside = [
            run(chaos_server.url, BATCH.encode(), False, instrumenting(otel)) for _ in range(INSIDE)
        ]
    assert plain.error is None
    assert all(seen == plain for seen in inside), name
    assert otel.value("batch.closed") == 0
    assert otel.value("batch.requests") == 0
    for _ in range(OUTSIDE):
        assert run(chaos_server.url, BATCH.encode(), False, instrumenting(otel)) == plain
    assert otel.value("batch.closed") == OUTSIDE
    assert otel.value("batch.requests") == 3 * OUTSIDE


@pytest.mark.parametrize("how", sorted(HOW))
def test_one_client_inside_then_outside(otel, chaos_server, how):
    """The same instrumented client: suppressed calls pass, later ones are counted."""
    chaos_server.set_faults(None)
    client = pairwatch.instrument(httpx.Client(timeout=5), meter_provider=otel.meter_provider)
    with client:
        with HOW[how]():
            for _ in range(INSIDE):
                assert client.post(chaos_server.url, content=BATCH).json()[1]["result"] == [1]
        assert otel.value("batch.closed") == 0
        for _ in range(OUTSIDE):
            assert client.post(chaos_server.url, content=BATCH).json()[1]["result"] == [1]
    assert otel.value("batch.closed") == OUTSIDE
    assert otel.value("batch.requests") == 3 * OUTSIDE
    assert otel.value("batch.missing_response") == 0


@pytest.mark.parametrize("how", sorted(HOW))
def test_generic_integration_tracks_nothing_inside(otel, how):
    toy = pairwatch.instrument(
        ToyClient(server()), send="call", receive="call", meter_provider=otel.meter_provider
    )
    with HOW[how]():
        replies = [json.loads(toy.call(BATCH.encode())) for _ in range(INSIDE)]
    assert [r[2]["result"] for r in replies] == [[2]] * INSIDE
    assert otel.value("batch.closed") == 0
    for _ in range(OUTSIDE):
        toy.call(BATCH.encode())
    assert otel.value("batch.closed") == OUTSIDE
    assert otel.value("batch.requests") == 3 * OUTSIDE
    pairwatch.uninstrument(toy)


@pytest.mark.parametrize("how", sorted(HOW))
def test_the_global_instrumentor_tracks_nothing_inside(otel, chaos_server, how):
    chaos_server.set_faults(None)
    instrumentor = PairwatchInstrumentor()
    instrumentor.instrument(meter_provider=otel.meter_provider)
    try:
        with HOW[how]():
            for run in DRIVERS.values():
                assert run(chaos_server.url, BATCH.encode(), False, bare).error is None
        assert otel.value("batch.closed") == 0
        for run in DRIVERS.values():
            assert run(chaos_server.url, BATCH.encode(), False, bare).error is None
        assert otel.value("batch.closed") == len(DRIVERS)
        assert otel.value("batch.requests") == 3 * len(DRIVERS)
    finally:
        instrumentor.uninstrument()

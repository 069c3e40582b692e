"""Fault isolation: whatever breaks inside pairwatch or OpenTelemetry, the caller sees exactly
what the bare client sees; the failure is counted (when the meter still works) and logged
once per kind however often it happens.

Each scenario breaks one part (the meter, the tracer provider, a span processor, an exporter,
the ledger, the channel itself) and runs the same three exchanges through every HTTP library
against the real chaos server, then once more without pairwatch: a batch with a dropped
reply, a body cut mid-way (the library raises) and a clean batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from http_drivers import bare
from robust_drivers import DRIVERS
from robust_support import (
    Boom,
    BrokenMeterProvider,
    BrokenTracerProvider,
    RaisingProcessor,
    internal_errors_logged,
    raising_exporter_provider,
    settle,
    tracer_with,
)
from toy import ToyClient, server

import pairwatch
from pairwatch.channel import Channel
from pairwatch.chaos import Fault
from pairwatch.integrations._kit.request import Exchange
from pairwatch.pairing.ledger import Ledger

BATCH = json.dumps(
    [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [f"p{i}"]} for i in range(4)]
).encode()
STEPS = [[Fault("drop", indices=[0])], [Fault("cut")], None]
REQUESTS = 12  # three exchanges of four
MISSING = 1 + 4  # the dropped reply, then every reply of the cut body


def _raise(*args: Any, **kwargs: Any) -> None:
    raise Boom("deliberately broken")


def _broken_ledger(*methods: str) -> Callable[[pytest.MonkeyPatch], None]:
    def patch(mp: pytest.MonkeyPatch) -> None:
        for method in methods:
            mp.setattr(Ledger, method, _raise)

    return patch


def _broken_channel(mp: pytest.MonkeyPatch) -> None:
    """The shield itself fails: every channel call an integration makes after opening the
    exchange raises, so only the integration glue stands between pairwatch and the caller."""
    for name in ("received", "received_parsed", "close", "relabel", "watch", "expire"):
        mp.setattr(Channel, name, _raise)


def _unbuildable_channel(mp: pytest.MonkeyPatch) -> None:
    """An HTTP exchange's channel cannot even be built: the exchange goes untracked, and
    the failure must still not reach the caller."""
    mp.setattr(Exchange, "open", _raise)


# name -> (meter provider, tracer provider, monkeypatch, internal_errors by kind or None when
# the meter itself is what is broken, whether the batch.* books still balance exactly)
Scenario = tuple[
    Callable[[Any], Any],
    Callable[[Any], Any],
    Callable[[pytest.MonkeyPatch], None] | None,
    dict[str, int] | None,
    bool,
]
SCENARIOS: dict[str, Scenario] = {
    "every_instrument_raises": (
        lambda o: BrokenMeterProvider({"create_counter", "create_histogram"}, o.meter_provider),
        lambda o: o.tracer_provider,
        None,
        None,
        False,
    ),
    "histograms_raise": (
        lambda o: BrokenMeterProvider({"create_histogram"}, o.meter_provider),
        lambda o: o.tracer_provider,
        None,
        {"telemetry": 3},
        False,
    ),
    "get_meter_raises": (
        lambda o: BrokenMeterProvider({"get_meter"}, o.meter_provider),
        lambda o: o.tracer_provider,
        None,
        None,
        False,
    ),
    "get_tracer_raises": (
        lambda o: o.meter_provider,
        lambda o: BrokenTracerProvider(),
        None,
        {"telemetry_init": 1},
        True,
    ),
    "span_processor_raises": (
        lambda o: o.meter_provider,
        lambda o: tracer_with(RaisingProcessor()),
        None,
        {"telemetry": 3},
        True,
    ),
    "exporter_raises": (  # the SDK's processor catches it: nothing reaches pairwatch
        lambda o: o.meter_provider,
        lambda o: raising_exporter_provider(),
        None,
        {},
        True,
    ),
    "ledger_sent_raises": (
        lambda o: o.meter_provider,
        lambda o: o.tracer_provider,
        _broken_ledger("sent"),
        {"sent": 3},
        False,
    ),
    "ledger_received_raises": (  # the cut body never reaches the end of its body
        lambda o: o.meter_provider,
        lambda o: o.tracer_provider,
        _broken_ledger("received", "replied"),  # a reply read in pieces, or whole
        {"received": 2},
        False,
    ),
    "ledger_close_raises": (
        lambda o: o.meter_provider,
        lambda o: o.tracer_provider,
        _broken_ledger("close", "replied"),  # a reply read whole closes its exchange too
        {"received": 2, "close": 3},
        False,
    ),
    "channel_raises": (
        lambda o: o.meter_provider,
        lambda o: o.tracer_provider,
        _broken_channel,
        None,
        False,
    ),
    "channel_cannot_be_built": (
        lambda o: o.meter_provider,
        lambda o: o.tracer_provider,
        _unbuildable_channel,
        None,
        False,
    ),
}


def _run(chaos, run, instrument) -> list[Any]:
    seen = []
    for step in STEPS:
        chaos.set_faults([step])
        seen.append(run(chaos.url, BATCH, instrument))
    return seen


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("library", sorted(DRIVERS))
def test_http_client_unaffected(otel, chaos, fresh_log, caplog, monkeypatch, library, scenario):
    meter, tracer, patch, internal, exact = SCENARIOS[scenario]
    run = DRIVERS[library]
    expected = _run(chaos, run, bare)
    assert expected[1].error is not None  # the cut body: the library raises
    meter_provider, tracer_provider = meter(otel), tracer(otel)
    if patch is not None:
        patch(monkeypatch)

    def instrument(client: Any) -> Any:
        return pairwatch.instrument(
            client, meter_provider=meter_provider, tracer_provider=tracer_provider
        )

    with caplog.at_level("INFO", logger="pairwatch"):
        got = _run(chaos, run, instrument)
        settle()  # telemetry is recorded off the caller's path: its failures surface here
    monkeypatch.undo()  # the readers below use the real classes
    assert got == expected
    logged = internal_errors_logged(caplog)
    assert all(n == 1 for n in logged.values()), logged
    if internal is not None:
        counted = {
            kind: otel.value("pairwatch.internal_errors", pairwatch__error_kind=kind)
            for kind in {a["pairwatch.error_kind"] for a in otel.attrs("pairwatch.internal_errors")}
        }
        assert counted == internal
        assert set(logged) == set(internal)
    else:
        assert logged  # the meter is broken: the log is the only trace, and it is there
    if exact:
        assert otel.value("batch.requests") == REQUESTS
        assert otel.value("batch.missing_response") == MISSING
        assert otel.value("batch.unknown_id_response") == 0


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_generic_client_unaffected(otel, fresh_log, caplog, monkeypatch, scenario):
    """The generic wrapper (``call`` is both send and receive) under the same breakage."""
    meter, tracer, patch, _internal, _exact = SCENARIOS[scenario]

    def run(instrumented: bool) -> list[Any]:
        client = ToyClient(server("drop"))
        if instrumented:
            pairwatch.instrument(
                client,
                send="call",
                receive="call",
                close="close",
                meter_provider=meter(otel),
                tracer_provider=tracer(otel),
            )
        seen: list[Any] = []
        for body in (BATCH, b"boom", BATCH):
            try:
                seen.append(client.call(body))
            except Exception as exc:
                seen.append((type(exc), str(exc)))
        client.close()
        pairwatch.uninstrument(client) if instrumented else None
        return seen

    expected = run(False)
    if patch is not None:
        patch(monkeypatch)
    with caplog.at_level("INFO", logger="pairwatch"):
        got = run(True)
    assert got == expected
    assert expected[1][0] is ConnectionError
    logged = internal_errors_logged(caplog)
    assert all(n == 1 for n in logged.values()), logged

"""Bounded everywhere: span names, methods, server addresses, label sets, telemetry instances."""

from __future__ import annotations

import functools
import gc
import weakref

from jsonrpc_build import dumps, req, res
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint
from opentelemetry.sdk.trace import TracerProvider

import pairwatch
from pairwatch import Options
from pairwatch.otel import deferred
from pairwatch.otel.labels import Limiter
from pairwatch.otel.names import OTHER_METHOD
from pairwatch.otel.shared import TelemetryCache
from pairwatch.otel.telemetry import Telemetry
from pairwatch.pairing.records import Tally

HOSTILE = 10_000
SERIES_BOUND = 1_400  # stated in docs/metrics.md: 65 label sets x 21 series


def test_span_names_follow_the_method_cap_and_a_length_limit(otel, clock):
    """Before: 1,000 methods with method_cap=32 gave 1,001 span names, the longest 100,002
    characters.  Now the spans name the same 33 methods the metric labels do."""
    methods = [f"method_{i}" for i in range(999)] + ["x" * 100_002]
    options = Options(
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        clock=clock,
        method_cap=32,
    )
    channel = pairwatch.open_channel(bound=True, options=options)
    channel.sent(dumps([req(i, m) for i, m in enumerate(methods)]))
    clock.advance(0.01)
    channel.received(dumps([res(i) for i in range(len(methods))]))
    channel.close("body_end")
    spans = otel.spans()
    assert len(spans) == 1_001
    names = {s.name for s in spans}
    assert len(names) == 34
    assert max(len(n) for n in names) == len("jsonrpc batch") == 13
    kept = {f"method_{i}" for i in range(32)}
    assert names == {"jsonrpc batch", OTHER_METHOD} | kept
    span_methods = {s.attributes["rpc.method"] for s in spans if s.parent is not None}
    assert span_methods == kept | {OTHER_METHOD}
    metric_methods = {a["rpc.method"] for a in otel.attrs("batch.pair_latency")}
    assert metric_methods == span_methods
    assert otel.hist("batch.pair_latency", rpc__method=OTHER_METHOD)[0] == 1_000 - 32


def test_a_long_name_takes_no_slot():
    limit = Limiter(cap=2, max_length=5)
    assert limit("x" * 6) == OTHER_METHOD
    assert limit(None) == OTHER_METHOD
    assert limit(OTHER_METHOD) == OTHER_METHOD
    assert [limit("a"), limit("bcdef"), limit("c"), limit("a")] == ["a", "bcdef", OTHER_METHOD, "a"]
    assert len(limit) == 2


def _series(otel) -> int:
    return len(otel.collect())


def test_hostile_methods_addresses_and_channels_stay_under_the_stated_series(otel, clock):
    options = Options(meter_provider=otel.meter_provider, clock=clock, spans=False)
    for i in range(HOSTILE):
        channel = pairwatch.open_channel(
            bound=True, transport="http", server_address=f"host-{i}.example", options=options
        )
        channel.sent(dumps(req(i, f"method_{i}")))
        channel.received(dumps(res(i)))
        channel.close("body_end")
    points = otel.collect()
    assert len(points) == 1_365 < SERIES_BOUND
    addresses = {a.get("server.address") for _, a, _ in points if a.get("server.address")}
    assert len(addresses) == 65  # 64 kept, then _OTHER
    assert OTHER_METHOD in addresses
    methods = {a["rpc.method"] for a in otel.attrs("batch.pair_latency")}
    assert len(methods) == 33
    # The books still balance: every request is counted, in some bounded series.
    assert otel.value("batch.requests") == HOSTILE
    latencies = [p for n, _, p in points if n == "batch.pair_latency"]
    assert sum(p.count for p in latencies if isinstance(p, HistogramDataPoint)) == HOSTILE
    telemetry = channel.telemetry
    assert len(telemetry.methods) == 32
    assert len(telemetry.addresses) == 64
    assert len(telemetry.label_sets) == 65


def test_hostile_ports_on_one_host_stay_under_the_same_cap(otel, clock):
    """``server.port`` tells servers on one host apart, within the address cap: past 64
    address-and-port pairs a channel keeps its address and goes without a port."""
    options = Options(meter_provider=otel.meter_provider, clock=clock, spans=False)
    for i in range(HOSTILE):
        channel = pairwatch.open_channel(
            bound=True,
            transport="http",
            server_address="127.0.0.1",
            server_port=10_000 + i,
            options=options,
        )
        channel.sent(dumps(req(i, "eth_call")))
        channel.received(dumps(res(i)))
        channel.close("body_end")
    requests = otel.attrs("batch.requests")
    ports = {a.get("server.port") for a in requests}
    assert ports == {*range(10_000, 10_064), None}  # 64 pairs kept, the rest without a port
    assert {a["server.address"] for a in requests} == {"127.0.0.1"}
    assert otel.value("batch.requests") == HOSTILE
    assert len(channel.telemetry.endpoints) == 64


def test_label_sets_are_evicted_past_their_cap(otel):
    telemetry = Telemetry(otel.meter_provider, label_sets_cap=3)
    first = telemetry.labels("http", "a", None)
    for integration in "bcd":
        telemetry.labels("http", integration, None)
    assert len(telemetry.label_sets) == 3
    again = telemetry.labels("http", "a", None)
    assert again is not first
    assert again.base == first.base


def test_telemetry_cache_forgets_instances_with_their_providers():
    cache = TelemetryCache()
    meter_provider = MeterProvider(shutdown_on_exit=False)
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    key = (meter_provider, tracer_provider, 32, True)
    telemetry = cache.get(*key, functools.partial(Telemetry, meter_provider, tracer_provider))
    assert cache.get(*key, functools.partial(Telemetry, None, None)) is telemetry
    assert len(cache) == 1
    gone = weakref.ref(telemetry)
    del telemetry, meter_provider, tracer_provider, key
    gc.collect()
    assert len(cache) == 0
    gc.collect()  # the entry left the cache above; the instruments' own cycles go now
    assert gone() is None  # nothing else (not the deferred queue's drain hook) holds it


def test_telemetry_cache_is_capped_for_providers_it_cannot_watch():
    cache = TelemetryCache(cap=4)
    keep = [object() for _ in range(10)]  # plain objects cannot be weakly referenced
    for provider in keep:
        cache.get(provider, None, 32, False, lambda: Telemetry(None, None))
    assert len(cache) == 4


def _late_tally(lateness: list[float]) -> Tally:
    """A stray tally as the ledger reports late replies: each is still an unknown-id response."""
    tally = Tally()
    for key, seconds in enumerate(lateness):
        tally.unknown += 1
        tally.add_late(key, seconds)
    return tally


def test_late_replies_are_counted_with_their_lateness(otel):
    telemetry = Telemetry(otel.meter_provider)
    labels = telemetry.labels("stdio", "manual", None)
    telemetry.stray(labels, None, _late_tally([0.5, 1.5]))
    telemetry.stray(labels, None, Tally())  # nothing late: no late count, no error
    pairwatch.flush()
    assert otel.value("batch.late_response") == 2
    assert otel.value("batch.unknown_id_response") == 2
    assert otel.hist("batch.response_lateness") == (2, 2.0)
    assert otel.value("pairwatch.internal_errors") == 0


def test_the_drain_queue_holds_a_bounded_number_of_requests(otel, clock):
    """A queued batch keeps its ids, methods and receive times until it is recorded: large
    batches are recorded by the caller once the queue holds more than MAX_REQUESTS of them,
    not only past MAX_ITEMS batches."""
    pairwatch.flush()
    options = Options(meter_provider=otel.meter_provider, clock=clock, spans=False)
    size = 1_000
    per_drain = deferred.MAX_REQUESTS // size + 1  # the batch that crosses the bound drains
    queued = []
    for n in range(2 * per_drain):
        channel = pairwatch.open_channel(bound=True, options=options)
        channel.sent(dumps([req(n * size + i) for i in range(size)]))
        clock.advance(0.01)
        channel.replied(dumps([res(n * size + i) for i in range(size)]))
        queued.append(deferred.pending())
    assert queued == [*range(1, per_drain), 0] * 2
    pairwatch.flush()
    assert otel.value("batch.requests") == 2 * per_drain * size
    assert otel.hist("batch.pair_latency")[0] == 2 * per_drain * size


def test_every_close_reason_of_every_transport_starts_at_zero_within_the_sdk_limit(otel, clock):
    """Each transport's missing-response close reasons are exported at 0 for every method
    (the cap's 32 and ``_OTHER``), batch and single; all transports together stay under the
    SDK's default cardinality limit of 2,000 attribute sets per instrument."""
    from pairwatch.otel import zeros

    options = Options(meter_provider=otel.meter_provider, clock=clock, spans=False)
    transports = [*zeros.MISSING_REASONS, "generic"]
    for transport in transports:
        channel = pairwatch.open_channel(transport=transport, options=options)
        for i in range(40):  # past the method cap: 32 methods, then _OTHER
            channel.sent(dumps(req(f"{transport}-{i}", f"m{i}")))
            channel.received(dumps(res(f"{transport}-{i}")))
            channel.sent(dumps([req(f"{transport}-b{i}", f"m{i}")]))
            channel.received(dumps([res(f"{transport}-b{i}")]))
    missing = otel.attrs("batch.missing_response", zeros=True)
    for transport in transports:
        reasons = zeros.MISSING_REASONS.get(transport, zeros.MISSING_REASONS_DEFAULT)
        found = {
            (a["rpc.method"], a["pairwatch.close_reason"], a["jsonrpc.batch"])
            for a in missing
            if a["pairwatch.transport"] == transport
        }
        assert len(found) == 33 * len(reasons) * 2, transport
        assert {r for _, r, _ in found} == set(reasons)
    per_instrument: dict[str, int] = {}
    for name, _attrs, _point in otel.collect():
        per_instrument[name] = per_instrument.get(name, 0) + 1
    assert max(per_instrument.values()) == len(missing) < 2_000

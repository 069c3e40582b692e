"""Batch round trips over loopback with httpx, requests and aiohttp, bare and instrumented.

Variants, each its own client so that they can be interleaved:

* ``bare``: the library alone;
* ``metrics``: ``instrument(client, spans=False)`` with an SDK meter provider (pull reader);
* ``spans``: metrics plus one span per batch and per id, SDK tracer sampling every trace
  (``ALWAYS_ON``) into a BatchSpanProcessor with an exporter that discards;
* ``sampled``: as ``spans`` with ``ParentBased(TraceIdRatioBased(0.01))``, the sampler a
  production service runs: one batch in a hundred gets spans;
* ``noop``: metrics with ``spans=True`` on the no-op tracer (the default when no SDK tracer
  is configured): what a user who only wants metrics but leaves spans on pays;
* ``minimal`` (httpx and aiohttp): the least any observer that pairs by id pays
  (``_observer.py``);
* ``guarded`` (httpx): pairwatch's own checks and metric recording written as one function
  (``_guarded.py``): the least pairwatch's guarantees cost, however its code is arranged.

Every variant decodes the reply with ``.json()``, as a real client does (the floor pairwatch
is measured against includes the client's own decode of the same body).  The 1-request
batch also reports the fixed cost of one tracked exchange in µs above bare.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from typing import Any

from _common import Results, Row, interleaved, median_us, ratios
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased
from opentelemetry.trace import NoOpTracerProvider

import pairwatch

HEADERS = {"content-type": "application/json"}
TARGETS = {"metrics": 1.10, "spans": 2.0, "sampled": 1.12}
CPU_TARGET = 1.15  # whole-process CPU, instrumented / bare, for metrics
FIXED_COST = 15.0  # µs: one tracked exchange (1-request batch) above bare
# Medians measured for these very cases on the shared 2-core reference VM: targets missed by
# a documented gap gate CI at twice these instead of twice the target.
KNOWN = {"metrics": 1.3, "spans": 3.0, "sampled": 1.3, "noop": 1.3}
CLEANUP: list[Callable[[], object]] = []  # closers for clients that warn when left open
CHECKS: list[Callable[[], object]] = []  # a floor's own check, made once its timings are in


class _Discard(SpanExporter):
    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def body(n: int) -> bytes:
    return json.dumps(
        [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in range(n)]
    ).encode()


def _settings() -> dict[str, dict[str, Any]]:
    tracer = TracerProvider(sampler=ALWAYS_ON)
    tracer.add_span_processor(BatchSpanProcessor(_Discard(), max_queue_size=1 << 16))
    sampled = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.01)))
    sampled.add_span_processor(BatchSpanProcessor(_Discard(), max_queue_size=1 << 16))
    return {
        "bare": {},
        "metrics": {"spans": False},
        "spans": {"spans": True, "tracer_provider": tracer},
        "sampled": {"spans": True, "tracer_provider": sampled},
        "noop": {"spans": True, "tracer_provider": NoOpTracerProvider()},
    }


def _instrumented(client: Any, settings: dict[str, Any]) -> Any:
    if not settings:
        return client
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return pairwatch.instrument(client, meter_provider=meter, **settings)


def _httpx_client(client: Any, settings: dict[str, Any] | str) -> Any:
    """``client`` instrumented with these settings, or under the floor observer named."""
    if settings == "minimal":  # the least a pairing observer does (_observer.py)
        from _observer import minimal_observer

        return minimal_observer(client)
    if settings == "guarded":  # the least pairwatch's own checks cost (_guarded.py)
        from _guarded import Guarded, guarded_observer

        counts = Guarded()
        CHECKS.append(counts.check)
        meter = MeterProvider(metric_readers=[InMemoryMetricReader()])
        options = pairwatch.Options(spans=False, meter_provider=meter)
        return guarded_observer(client, options, counts)
    assert not isinstance(settings, str)
    return _instrumented(client, settings)


def _with_floors() -> dict[str, dict[str, Any] | str]:
    """The settings of every variant, and the two floor observers by name (httpx only)."""
    found: dict[str, dict[str, Any] | str] = dict(_settings())
    found.update(minimal="minimal", guarded="guarded")
    return found


def httpx_variants(url: str, payload: bytes) -> dict[str, Callable[[int], object]]:
    import httpx

    def make(settings: dict[str, Any] | str) -> Callable[[int], object]:
        client = _httpx_client(httpx.Client(), settings)

        def run(n: int) -> None:
            for _ in range(n):
                _ = client.post(url, content=payload, headers=HEADERS).json()

        return run

    return {name: make(s) for name, s in _with_floors().items()}


def requests_variants(url: str, payload: bytes) -> dict[str, Callable[[int], object]]:
    import requests

    def make(settings: dict[str, Any]) -> Callable[[int], object]:
        session = _instrumented(requests.Session(), settings)

        def run(n: int) -> None:
            for _ in range(n):
                _ = session.post(url, data=payload, headers=HEADERS).json()

        return run

    return {name: make(s) for name, s in _settings().items()}


def aiohttp_variants(url: str, payload: bytes) -> dict[str, Callable[[int], object]]:
    import aiohttp

    loop = asyncio.new_event_loop()

    def make(settings: dict[str, Any] | str) -> Callable[[int], object]:
        async def create() -> aiohttp.ClientSession:
            return aiohttp.ClientSession()

        session = loop.run_until_complete(create())
        if settings == "minimal":  # the least a pairing observer does (_observer.py)
            from _observer import minimal_aiohttp_observer

            session = minimal_aiohttp_observer(session)
        else:
            assert not isinstance(settings, str)
            session = _instrumented(session, settings)
        CLEANUP.append(lambda: loop.run_until_complete(session.close()))

        async def go(n: int) -> None:
            for _ in range(n):
                async with session.post(url, data=payload, headers=HEADERS) as resp:
                    await resp.json()

        return lambda n: loop.run_until_complete(go(n))

    settings: dict[str, dict[str, Any] | str] = {**_settings(), "minimal": "minimal"}
    return {name: make(s) for name, s in settings.items()}


def httpx_mock_variants(url: str, payload: bytes) -> dict[str, Callable[[int], object]]:
    """httpx on a mock transport: no socket and no server process, so that an instruction
    count of one exchange is nearly all client and pairwatch (over loopback, where socket
    reads and collections fall moves a count by up to 15% of what pairwatch adds)."""
    import httpx

    ids = [element["id"] for element in json.loads(payload)]
    reply = json.dumps([{"jsonrpc": "2.0", "id": i, "result": [i]} for i in ids]).encode()

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=reply, headers=HEADERS)

    def make(settings: dict[str, Any] | str) -> Callable[[int], object]:
        client = _httpx_client(httpx.Client(transport=httpx.MockTransport(answer)), settings)

        def run(n: int) -> None:
            for _ in range(n):
                _ = client.post(url, content=payload, headers=HEADERS).json()

        return run

    return {name: make(s) for name, s in _with_floors().items()}


LIBRARIES = {
    "httpx": httpx_variants,
    "requests": requests_variants,
    "aiohttp": aiohttp_variants,
    "httpx-mock": httpx_mock_variants,  # the floor rows (_minimal.py) and instruction counts
}


_FLOORS = (
    (
        "minimal",
        "the floor of any observer that decodes both bodies and compares ids "
        "(benchmarks/_observer.py)",
    ),
    (
        "guarded",
        "the floor of pairwatch's own checks and metric recording, written as one function "
        "(benchmarks/_guarded.py)",
    ),
)


def run_http(
    results: Results,
    server: str,
    url: str,
    libraries: Sequence[str],
    sizes: Sequence[int],
    repeats: int,
    budget_s: float,
) -> None:
    """One section per (library, batch size); ``budget_s`` sizes the blocks per repeat."""
    for lib in libraries:
        for size in sizes:
            section = f"{lib} {size}-request batch, {server} server"
            try:
                variants = LIBRARIES[lib](url, body(size))
            except (ImportError, TypeError) as exc:
                results.skip(section, "all", f"{lib} unavailable: {exc}")
                continue
            probe = variants["bare"]
            probe(3)
            import time

            t0 = time.perf_counter()
            probe(5)
            per_call = (time.perf_counter() - t0) / 5
            per_block = max(3, int(budget_s / (repeats * len(variants)) / per_call))
            timings = interleaved(variants, repeats, per_block)
            while CLEANUP:
                CLEANUP.pop()()
            while CHECKS:
                CHECKS.pop()()
            bare = median_us(timings, "bare")
            for name in ("metrics", "spans", "sampled", "noop"):
                note = f"bare {bare:,.0f} µs, {name} {median_us(timings, name):,.0f} µs"
                cpu = sorted(ratios(timings, name, cpu=True))
                note += f"; CPU ratio median {cpu[len(cpu) // 2]:.2f}"
                target = TARGETS.get(name) if size == 100 or name != "spans" else None
                row = Row(section, f"{name}, wall", "x", ratios(timings, name), target, note)
                # A 1-request exchange is short: scheduling noise swings its ratio most.
                row.known = KNOWN[name] if size > 1 else max(KNOWN[name], 2.0)
                results.add(row)
                if name == "metrics":
                    cpu_row = Row(
                        section,
                        "metrics, whole-process CPU",
                        "x",
                        ratios(timings, name, cpu=True),
                        CPU_TARGET,
                        "every thread of the client process, deferred work included",
                    )
                    cpu_row.known = KNOWN[name] if size > 1 else 2.0
                    results.add(cpu_row)
            for floor, what in _FLOORS:
                if floor not in timings:
                    continue
                cpu = sorted(ratios(timings, floor, cpu=True))
                note = (
                    f"bare {bare:,.0f} µs, {floor} {median_us(timings, floor):,.0f} µs; "
                    f"CPU ratio median {cpu[len(cpu) // 2]:.2f}: {what}"
                )
                for unit, cpu_ratio in (("wall", False), ("whole-process CPU", True)):
                    results.add(
                        Row(
                            section,
                            f"{floor} observer, {unit}",
                            "x",
                            ratios(timings, floor, cpu=cpu_ratio),
                            None,
                            note,
                            gated=False,
                        )
                    )
            if size == 1:
                for name, case, target in (
                    ("metrics", "fixed cost of one tracked exchange, metrics", FIXED_COST),
                    ("guarded", "guarded observer, fixed cost above bare", None),
                    ("minimal", "minimal observer, fixed cost above bare", None),
                ):
                    if name not in timings:
                        continue
                    extra = [
                        (v[0] - b[0]) * 1e6
                        for v, b in zip(timings[name], timings["bare"], strict=True)
                    ]
                    results.add(
                        Row(
                            section,
                            case,
                            "µs",
                            extra,
                            target,
                            f"median per-repeat difference, {name} minus bare, same repeat",
                            gated=False,
                        )
                    )

"""Batch round trips over loopback with httpx, requests and aiohttp, bare and instrumented.

Variants, each its own client so that they can be interleaved:

* ``bare``: the library alone;
* ``metrics``: ``instrument(client, spans=False)`` with an SDK meter provider (pull reader);
* ``spans``: metrics plus one span per batch and per id, SDK tracer sampling every trace
  (``ALWAYS_ON``) into a BatchSpanProcessor with an exporter that discards;
* ``noop``: metrics with ``spans=True`` on the no-op tracer (the default when no SDK tracer
  is configured): what a user who only wants metrics but leaves spans on pays.
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
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import NoOpTracerProvider

import pairwatch

HEADERS = {"content-type": "application/json"}
TARGETS = {"metrics": 1.10, "spans": 1.50}
# Medians measured for these very cases on the shared 2-core reference VM (README table):
# targets missed by a documented gap gate CI at twice these instead of twice the target.
KNOWN = {"metrics": 1.8, "spans": 7.5, "noop": 1.8}
CLEANUP: list[Callable[[], object]] = []  # closers for clients that warn when left open


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
    return {
        "bare": {},
        "metrics": {"spans": False},
        "spans": {"spans": True, "tracer_provider": tracer},
        "noop": {"spans": True, "tracer_provider": NoOpTracerProvider()},
    }


def _instrumented(client: Any, settings: dict[str, Any]) -> Any:
    if not settings:
        return client
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return pairwatch.instrument(client, meter_provider=meter, **settings)


def httpx_variants(url: str, payload: bytes) -> dict[str, Callable[[int], object]]:
    import httpx

    def make(settings: dict[str, Any]) -> Callable[[int], object]:
        client = _instrumented(httpx.Client(), settings)

        def run(n: int) -> None:
            for _ in range(n):
                _ = client.post(url, content=payload, headers=HEADERS).content

        return run

    return {name: make(s) for name, s in _settings().items()}


def requests_variants(url: str, payload: bytes) -> dict[str, Callable[[int], object]]:
    import requests

    def make(settings: dict[str, Any]) -> Callable[[int], object]:
        session = _instrumented(requests.Session(), settings)

        def run(n: int) -> None:
            for _ in range(n):
                _ = session.post(url, data=payload, headers=HEADERS).content

        return run

    return {name: make(s) for name, s in _settings().items()}


def aiohttp_variants(url: str, payload: bytes) -> dict[str, Callable[[int], object]]:
    import aiohttp

    loop = asyncio.new_event_loop()

    def make(settings: dict[str, Any]) -> Callable[[int], object]:
        async def create() -> aiohttp.ClientSession:
            return aiohttp.ClientSession()

        session = _instrumented(loop.run_until_complete(create()), settings)
        CLEANUP.append(lambda: loop.run_until_complete(session.close()))

        async def go(n: int) -> None:
            for _ in range(n):
                async with session.post(url, data=payload, headers=HEADERS) as resp:
                    await resp.read()

        return lambda n: loop.run_until_complete(go(n))

    return {name: make(s) for name, s in _settings().items()}


LIBRARIES = {"httpx": httpx_variants, "requests": requests_variants, "aiohttp": aiohttp_variants}


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
            bare = median_us(timings, "bare")
            for name in ("metrics", "spans", "noop"):
                note = f"bare {bare:,.0f} µs, {name} {median_us(timings, name):,.0f} µs"
                cpu = ratios(timings, name, cpu=True)
                cpu.sort()
                note += f"; CPU ratio median {cpu[len(cpu) // 2]:.2f}"
                row = Row(section, name, "x", ratios(timings, name), TARGETS.get(name), note)
                row.known = KNOWN[name] if size == 100 else None
                results.add(row)

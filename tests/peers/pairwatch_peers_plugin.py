"""A pytest plugin run inside the MCP SDK's and web3.py's own test suites (``-p``).

Why it exists: those suites exercise every client path their authors thought of, with
their own assertions on what the client sends and receives.  Run once bare and once with
every client instrumented, they show whether pairwatch changes a client's behaviour (a test
that passes bare fails instrumented) and whether it counts a healthy exchange as a fault.

``PAIRWATCH_PEERS=instrumented`` turns on, process-wide and before any test runs:
the global ``PairwatchInstrumentor`` (httpx/httpx2, requests, aiohttp, and every MCP
``ClientSession`` as it is made) and per-client ``pairwatch.instrument`` on every entered
``mcp.Client`` and every web3 HTTP / websocket provider made.  Telemetry goes to an
in-memory metric reader of the plugin's own (the suites set their own global providers).
``PAIRWATCH_PEERS=bare`` records outcomes only, so both runs report the same way.

Per test, the fault counters that moved (:data:`FAULTS`, and ``batch.closed`` under a
diagnosis other than ``ok``) are written with the test's outcome to the JSON file named by
``PAIRWATCH_PEERS_REPORT``; ``scripts/peers.py`` compares the two runs.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from typing import Any

import pytest

FAULTS = frozenset(
    {
        "batch.duplicate_id",
        "batch.invalid_request",
        "batch.invalid_response",
        "batch.late_response",
        "batch.missing_response",
        "batch.null_id_response",
        "batch.out_of_order",
        "batch.protocol_violation",
        "batch.response_count_mismatch",
        "batch.unknown_id_response",
        "pairwatch.internal_errors",
    }
)

MODE = os.environ.get("PAIRWATCH_PEERS", "bare")


class Books:
    """Reads the fault counters from the plugin's own in-memory reader."""

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider

        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.tracer_provider = TracerProvider()  # spans are made, then dropped

    def totals(self) -> dict[str, int]:
        import pairwatch

        pairwatch.flush()
        totals: dict[str, int] = {}
        data = self.reader.get_metrics_data()
        for rm in data.resource_metrics if data else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    for point in getattr(metric.data, "data_points", ()):
                        value = getattr(point, "value", None)
                        if not isinstance(value, int) or not value:
                            continue
                        key = _key(metric.name, point.attributes)
                        if key is not None:
                            totals[key] = totals.get(key, 0) + value
        return totals


def _key(name: str, attrs: Any) -> str | None:
    """``name[integration/transport(/close reason)]`` for a fault series, else None."""
    where = f"{attrs.get('pairwatch.integration')}/{attrs.get('pairwatch.transport')}"
    if name == "batch.closed":
        diagnosis = attrs.get("pairwatch.diagnosis", "ok")
        return None if diagnosis == "ok" else f"batch.closed[{where}/{diagnosis}]"
    if name not in FAULTS:
        return None
    reason = attrs.get("pairwatch.close_reason")
    return f"{name}[{where}{'' if reason is None else '/' + reason}]"


def _after(cls: type, name: str, hook: Callable[[Any], None], is_async: bool) -> None:
    """Run ``hook(instance)`` after ``cls.name``; a hook failure fails the run loudly."""
    original = cls.__dict__[name]
    if is_async:

        @functools.wraps(original)
        async def wrapper_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            result = await original(self, *args, **kwargs)
            hook(self)
            return result

        setattr(cls, name, wrapper_async)
        return

    @functools.wraps(original)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        hook(self)
        return result

    setattr(cls, name, wrapper)


def instrument_everything(books: Books) -> None:
    import pairwatch
    from pairwatch.instrumentor import PairwatchInstrumentor

    providers = {"meter_provider": books.meter_provider, "tracer_provider": books.tracer_provider}
    PairwatchInstrumentor().instrument(**providers)

    def each(client: Any) -> None:
        # Left instrumented at exit: uninstrumenting would close what is still in flight as
        # "closed"; the session's own end closes its books as a user's program would.
        if not pairwatch.is_instrumented(client):
            pairwatch.instrument(client, **providers)

    try:
        from mcp.client.client import Client
    except ImportError:
        pass
    else:
        _after(Client, "__aenter__", each, is_async=True)
    try:
        from web3.providers.persistent.websocket import WebSocketProvider
        from web3.providers.rpc.async_rpc import AsyncHTTPProvider
        from web3.providers.rpc.rpc import HTTPProvider
    except ImportError:
        return
    for cls in (HTTPProvider, AsyncHTTPProvider, WebSocketProvider):
        if "__init__" in cls.__dict__:
            _after(cls, "__init__", each, is_async=False)


class Recorder:
    def __init__(self, books: Books | None) -> None:
        self.books = books
        self.tests: dict[str, dict[str, Any]] = {}
        self._before: dict[str, int] = {}

    def _entry(self, nodeid: str) -> dict[str, Any]:
        return self.tests.setdefault(nodeid, {"outcome": "passed", "faults": {}})

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        if self.books is not None:
            self._before = self.books.totals()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        if self.books is None:
            return
        after = self.books.totals()
        moved = {k: v - self._before.get(k, 0) for k, v in after.items()}
        moved = {k: v for k, v in moved.items() if v}
        if moved:
            self._entry(nodeid)["faults"] = moved

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self._entry(report.nodeid)
        if report.failed:
            entry["outcome"] = "failed" if report.when == "call" else "error"
        elif report.skipped and entry["outcome"] == "passed":
            entry["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        path = os.environ.get("PAIRWATCH_PEERS_REPORT")
        if path:
            with open(path, "w", encoding="utf-8") as out:
                json.dump({"mode": MODE, "tests": self.tests}, out, indent=1, sort_keys=True)


def pytest_configure(config: pytest.Config) -> None:
    books = None
    if MODE == "instrumented":
        books = Books()
        instrument_everything(books)
    config.pluginmanager.register(Recorder(books), "pairwatch_peers_recorder")

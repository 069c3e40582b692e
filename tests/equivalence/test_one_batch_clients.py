"""Real clients over loopback, their exchange's one batch kept alone or queued: the same
numbers either way.

httpx (``Client`` and ``AsyncClient``), requests and aiohttp.  Each scenario runs over a real
loopback server twice: once as a user runs it, once with the batch queued and indexed from
the start (``ledger.ALONE`` off, the one thing in this file that is not what a user runs).
What the caller got, every exported point, every span and every closed batch handed to a
hook must be identical, at a fake clock so that latencies are too.  Then exact numbers for
the cases users meet most, and a check that a healthy exchange builds no table of ids.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from typing import Any

import aiohttp
import httpx
import pytest
import requests
from batch_fields import batch_fields
from http_drivers import HOOKS, SCRIPTS
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch.pairing import ledger


def _requests(*ids: Any, batch: bool = True) -> bytes:
    elements = [{"jsonrpc": "2.0", "id": i, "method": "eth_call", "params": [i]} for i in ids]
    return json.dumps(elements if batch else elements[0]).encode()


def _results(*ids: Any, batch: bool = True) -> bytes:
    elements = [{"jsonrpc": "2.0", "id": i, "result": "0x7"} for i in ids]
    return json.dumps(elements if batch else elements[0]).encode()


JSON = "application/json"
BATCH = _requests(1, 2, 3)
REPLY = _results(1, 2, 3)
ERROR = json.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}}
).encode()
MIXED = json.dumps(
    [
        {"jsonrpc": "2.0", "id": 1, "result": 1},
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "no"}},
        {"jsonrpc": "2.0", "id": 3, "result": 3},
    ]
).encode()

# name -> (request body, status, headers, reply chunks, cut short, seconds the server thinks)
SCENARIOS: dict[str, tuple[bytes, int, dict[str, str], list[bytes], bool, float]] = {
    "healthy_batch": (BATCH, 200, {}, [REPLY], False, 0.25),
    "healthy_single": (_requests(7, batch=False), 200, {}, [_results(7, batch=False)], False, 0.1),
    "string_ids": (_requests("a", "b"), 200, {}, [_results("a", "b")], False, 0.0),
    "charset_utf8": (BATCH, 200, {"Content-Type": JSON + "; charset=utf-8"}, [REPLY], False, 0),
    "charset_latin1": (BATCH, 200, {"Content-Type": JSON + "; charset=iso-8859-1"}, [REPLY],
                       False, 0.0),
    "gzip": (BATCH, 200, {"Content-Encoding": "gzip"}, [gzip.compress(REPLY)], False, 0.0),
    "slower_than_the_timeout": (BATCH, 200, {}, [REPLY], False, 30.0),  # postponed by the read
    "reordered": (BATCH, 200, {}, [_results(3, 1, 2)], False, 0.0),
    "one_missing": (BATCH, 200, {}, [_results(1, 3)], False, 0.0),
    "unknown_id": (BATCH, 200, {}, [_results(1, 2, 9)], False, 0.0),
    "single_answered_as_batch": (_requests(1, batch=False), 200, {}, [_results(1)], False, 0),
    "error_element": (BATCH, 200, {}, [MIXED], False, 0.0),
    "null_id_error": (BATCH, 400, {}, [ERROR], False, 0.0),
    "not_json": (BATCH, 502, {"Content-Type": "text/html"}, [b"<html>bad</html>"], False, 0.0),
    "empty_body": (BATCH, 200, {}, [], False, 0.0),
    "event_stream": (BATCH, 200, {"Content-Type": "text/event-stream"},
                     [b"data: " + REPLY + b"\n\n"], False, 0.0),
    "accepted_202": (BATCH, 202, {}, [], False, 0.0),
    "redirect_followed": (BATCH, 307, {"Location": "/healthy-send-target"}, [], False, 0.0),
    "cut_short": (BATCH, 200, {}, [REPLY[:10]], True, 0.0),
    "repeated_ids": (_requests(1, 1), 200, {}, [_results(1, 1)], False, 0.0),
    "notification": (b'{"jsonrpc": "2.0", "method": "ping"}', 204, {}, [], False, 0.0),
    "not_jsonrpc": (b'{"query": "{ a }"}', 200, {}, [b'{"data": 1}'], False, 0.0),
}  # fmt: skip

OPTION_SETS = {
    "spans_off": {"spans": False},
    "spans_on": {"spans": True},
    "spans_dropped": {"spans": True, "sampler": ALWAYS_OFF},  # the sampler drops every batch
    "hook": {"spans": True, "hook": True},
}
TIMEOUT = 5.0  # every client's read timeout: the batch's deadline follows it


def _call_httpx(url: str, body: bytes, options: dict[str, Any]) -> Any:
    with httpx.Client(timeout=TIMEOUT, follow_redirects=True) as client:
        pairwatch.instrument(client, **options)
        try:
            r = client.post(url, content=body, headers={"Content-Type": JSON})
            return r.status_code, r.content
        except httpx.HTTPError as exc:
            return type(exc).__name__


def _call_httpx_async(url: str, body: bytes, options: dict[str, Any]) -> Any:
    async def run() -> Any:
        async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=True) as client:
            pairwatch.instrument(client, **options)
            try:
                r = await client.post(url, content=body, headers={"Content-Type": JSON})
                return r.status_code, r.content
            except httpx.HTTPError as exc:
                return type(exc).__name__

    return asyncio.run(run())


def _call_aiohttp(url: str, body: bytes, options: dict[str, Any]) -> Any:
    async def run() -> Any:
        timeout = aiohttp.ClientTimeout(total=TIMEOUT)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            pairwatch.instrument(session, **options)
            try:
                async with session.post(url, data=body, headers={"Content-Type": JSON}) as r:
                    return r.status, await r.read()
            except aiohttp.ClientError as exc:
                return type(exc).__name__

    return asyncio.run(run())


def _call_requests(url: str, body: bytes, options: dict[str, Any]) -> Any:
    with requests.Session() as session:
        pairwatch.instrument(session, **options)
        try:
            r = session.post(url, data=body, headers={"Content-Type": JSON}, timeout=TIMEOUT)
            return r.status_code, r.content
        except requests.RequestException as exc:
            return type(exc).__name__


CLIENTS = {
    "aiohttp": _call_aiohttp,
    "httpx": _call_httpx,
    "httpx_async": _call_httpx_async,
    "requests": _call_requests,
}


def _fields(batch: Any) -> dict[str, Any]:
    names = (
        "size", "keys", "received", "sent_at", "deadline", "closed_at", "close_reason",
        "diagnosis", "paired", "missing", "unknown", "out_of_order",
    )  # fmt: skip
    return batch_fields(batch, names)


def _run(
    url: str, client: str, name: str, option_set: str, alone: bool, monkeypatch: Any
) -> tuple[Any, Otel, list[dict[str, Any]]]:
    body, status, headers, chunks, cut, think = SCENARIOS[name]
    path = f"/healthy-send-{name}"
    SCRIPTS[path] = (status, {"Content-Type": JSON, **headers}, chunks, cut)
    SCRIPTS["/healthy-send-target"] = (200, {"Content-Type": JSON}, [REPLY], False)
    otel, clock = Otel(), FakeClock()
    if think:
        HOOKS[path] = lambda index: clock.advance(think) if index == 0 else None
    monkeypatch.setattr(ledger, "ALONE", alone)
    closed: list[dict[str, Any]] = []
    settings = OPTION_SETS[option_set]
    tracer_provider = otel.tracer_provider
    if "sampler" in settings:
        tracer_provider = TracerProvider(sampler=settings["sampler"])
        tracer_provider.add_span_processor(SimpleSpanProcessor(otel.exporter))
    options = {
        "meter_provider": otel.meter_provider,
        "tracer_provider": tracer_provider,
        "clock": clock,
        "spans": settings["spans"],
    }
    if settings.get("hook"):
        options["on_batch_closed"] = lambda batch: closed.append(_fields(batch))
    seen = CLIENTS[client](url + path, body, options)
    pairwatch.flush()
    return seen, otel, closed


@pytest.mark.parametrize("option_set", sorted(OPTION_SETS))
@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_batch_kept_alone_counts_what_a_queued_one_counts(
    scripted, monkeypatch, client, name, option_set
):
    seen_queued, queued, closed_queued = _run(
        scripted, client, name, option_set, False, monkeypatch
    )
    seen_alone, alone, closed_alone = _run(scripted, client, name, option_set, True, monkeypatch)
    assert seen_alone == seen_queued
    assert alone.points() == queued.points()
    assert alone.span_shapes() == queued.span_shapes()
    assert closed_alone == closed_queued
    if name not in ("notification", "not_jsonrpc", "accepted_202"):  # 202: the reply is to come
        assert queued.value("batch.closed") == 1  # each run tracked its exchange


# name -> exact counters (zeros left out), spans off, for every client
EXACT: dict[str, dict[str, int]] = {
    "healthy_batch": {"batch.requests": 3, "batch.closed": 1},
    "gzip": {"batch.requests": 3, "batch.closed": 1},
    "charset_latin1": {"batch.requests": 3, "batch.closed": 1},
    "slower_than_the_timeout": {"batch.requests": 3, "batch.closed": 1},
    "reordered": {"batch.requests": 3, "batch.closed": 1, "batch.out_of_order": 1},
    "one_missing": {
        "batch.requests": 3, "batch.closed": 1, "batch.missing_response": 1,
        "batch.response_count_mismatch": 1,
    },
    "unknown_id": {
        "batch.requests": 3, "batch.closed": 1, "batch.missing_response": 1,
        "batch.unknown_id_response": 1,
    },
    "null_id_error": {
        "batch.requests": 3, "batch.closed": 1, "batch.missing_response": 3,
        "batch.null_id_response": 1, "batch.response_count_mismatch": 1,
        "batch.protocol_violation": 1,  # a batch answered by one object, not an array
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(EXACT))
@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_exact_numbers(scripted, monkeypatch, client, name):
    seen, otel, _ = _run(scripted, client, name, "spans_off", True, monkeypatch)
    assert otel.counters() == EXACT[name]
    if name == "slower_than_the_timeout":  # a client still waiting is not a missing reply
        assert otel.hist("batch.pair_latency") == (3, 90.0)
    if name == "healthy_batch":
        assert seen == (200, REPLY)
        assert otel.hist("batch.pair_latency") == (3, 0.75)
        assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 1


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_a_healthy_exchange_builds_no_table(scripted, monkeypatch, client):
    """Every client's healthy exchange pairs its reply in one step, with no table of ids
    (which costs what benchmarks/run.py shows); a reordered reply needs one."""
    built: list[object] = []

    class Spy(ledger.PendingTable):
        def __init__(self) -> None:
            built.append(self)
            super().__init__()

    monkeypatch.setattr(ledger, "PendingTable", Spy)
    seen, otel, _ = _run(scripted, client, "healthy_batch", "spans_off", True, monkeypatch)
    assert seen == (200, REPLY)
    assert built == []
    assert otel.counters() == {"batch.requests": 3, "batch.closed": 1}
    _run(scripted, client, "reordered", "spans_off", True, monkeypatch)
    assert len(built) == 1

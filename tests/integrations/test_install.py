"""One-line detection, uninstrument, the global instrumentor and its entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import aiohttp
import httpx
import pytest
import requests
from components import need, require
from http_drivers import DRIVERS, bare, instrumenting

import pairwatch
from pairwatch.instrumentor import PairwatchInstrumentor
from pairwatch.integrations import KNOWN, REGISTRY

BATCH = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in range(3)])
SRC = Path(__file__).resolve().parents[2] / "src"

HTTPX2_INSTALL = "pip install 'pairwatch[httpx2]' (Python >= 3.11; scripts/bootstrap.sh does)"
INSTRUMENT_INSTALL = "pip install 'pairwatch[instrumentation]' (scripts/bootstrap.sh does)"


def test_detection_is_by_type_and_imports_nothing():
    code = textwrap.dedent(
        """
        import sys, pairwatch
        from pairwatch.integrations import REGISTRY
        class Foreign: pass
        assert not any(i.detect(Foreign()) for i in REGISTRY)
        heavy = ("httpx", "httpx2", "requests", "aiohttp")
        assert not [m for m in heavy if m in sys.modules], [m for m in heavy if m in sys.modules]
        assert not [m for m in sys.modules if m.startswith("pairwatch.integrations.")
                    and not m.endswith(("generic", "supported"))]
        print("ok")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
    known = {k.name for k in KNOWN}
    assert [i.name for i in REGISTRY if i.name in known] == [k.name for k in KNOWN]


@pytest.mark.parametrize(
    ("make", "method"),
    [
        (httpx.Client, "send"),
        (httpx.AsyncClient, "send"),
        (requests.Session, "send"),
    ],
)
def test_uninstrument_restores_the_originals(otel, make, method):
    client = make()
    original = getattr(type(client), method)
    instrumenting(otel)(client)
    assert method in vars(client)
    assert pairwatch.is_instrumented(client)
    pairwatch.uninstrument(client)
    assert method not in vars(client)
    assert getattr(client, method).__func__ is original
    assert not pairwatch.is_instrumented(client)


async def test_uninstrument_aiohttp():
    async with aiohttp.ClientSession() as session:
        original = aiohttp.ClientSession._request
        pairwatch.instrument(session)
        assert "_request" in vars(session)
        pairwatch.uninstrument(session)
        assert "_request" not in vars(session)
        assert session._request.__func__ is original


def test_unknown_objects_of_known_libraries_fail_at_setup():
    with pytest.raises(TypeError, match=r"httpx\.Client"):
        pairwatch.instrument(httpx.Request("GET", "http://127.0.0.1/"))
    with pytest.raises(TypeError, match=r"requests\.Session"):
        pairwatch.instrument(requests.Response())


def test_httpx2_and_json_keyword(otel, chaos_server):
    httpx2 = need(
        "httpx2", "pip install 'pairwatch[httpx2]' (Python >= 3.11; scripts/bootstrap.sh does)"
    )
    chaos_server.set_faults(None)
    with instrumenting(otel)(httpx2.Client()) as client:
        reply = client.post(chaos_server.url, json=json.loads(BATCH)).json()
    assert [r["id"] for r in reply] == [0, 1, 2]
    assert otel.value("batch.closed", pairwatch__integration="httpx2") == 1
    assert otel.hist("batch.pair_latency")[0] == 3


async def test_httpx2_async_sse(otel, chaos_server):
    httpx2 = need(
        "httpx2", "pip install 'pairwatch[httpx2]' (Python >= 3.11; scripts/bootstrap.sh does)"
    )
    chaos_server.set_faults(None)
    client = instrumenting(otel)(httpx2.AsyncClient())
    async with client, client.stream("POST", chaos_server.sse_url, content=BATCH) as r:
        body = b"".join([c async for c in r.aiter_bytes()])
    assert body.count(b"data: ") == 3
    assert otel.value("batch.closed", pairwatch__transport="sse") == 1
    assert otel.hist("batch.pair_latency")[0] == 3


def test_httpx_sse_connect_sse(otel, chaos_server):
    httpx_sse = need("httpx_sse", "pip install 'pairwatch[sse]' (scripts/bootstrap.sh does)")
    chaos_server.set_faults(None)
    with (
        instrumenting(otel)(httpx.Client()) as client,
        httpx_sse.connect_sse(
            client, "POST", chaos_server.sse_url, json=json.loads(BATCH)
        ) as source,
    ):
        data = [json.loads(e.data)["id"] for e in source.iter_sse()]
    assert data == [0, 1, 2]
    assert otel.value("batch.closed", pairwatch__close_reason="stream_end") == 1


async def test_aiohttp_json_text_and_sse_lines(otel, chaos_server):
    chaos_server.set_faults(None)
    async with aiohttp.ClientSession() as session:
        instrumenting(otel)(session)
        async with session.post(chaos_server.url, json=json.loads(BATCH)) as r:
            assert [x["id"] for x in await r.json()] == [0, 1, 2]
        async with session.post(chaos_server.url, data=BATCH) as r:
            assert json.loads(await r.text())[0]["id"] == 0
        async with session.post(chaos_server.sse_url, data=BATCH) as r:
            lines = [line async for line in r.content]
    assert sum(1 for line in lines if line.startswith(b"data: ")) == 3
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 3
    assert otel.hist("batch.pair_latency")[0] == 9


def test_requests_iter_lines_and_raw_reads(otel, chaos_server):
    chaos_server.set_faults(None)
    with instrumenting(otel)(requests.Session()) as s:
        with s.post(chaos_server.sse_url, data=BATCH, stream=True) as r:
            lines = list(r.iter_lines())
        with s.post(chaos_server.url, data=BATCH, stream=True) as r:
            raw = r.raw.read()
        assert s.post(chaos_server.url, data=BATCH).json()[2]["id"] == 2
    assert sum(1 for line in lines if line.startswith(b"data: ")) == 3
    assert json.loads(raw)[0]["id"] == 0
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 3
    assert otel.hist("batch.pair_latency")[0] == 9


def test_stream_closed_before_its_end_counts_as_dropped(otel, chaos_server):
    from pairwatch.chaos import Fault

    chaos_server.set_faults([Fault("delay", delays=(0.0, 0.3, 0.3))])
    client = instrumenting(otel)(httpx.Client())
    with client, client.stream("POST", chaos_server.sse_url, content=BATCH) as r:
        next(r.iter_bytes())  # the first event only, then close the response
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 2


@pytest.fixture
def instrumentor(otel):
    inst = PairwatchInstrumentor()
    inst.instrument(meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider)
    yield inst
    if inst.is_instrumented_by_opentelemetry:
        inst.uninstrument()


def test_global_instrumentor_on_and_off(otel, chaos_server, instrumentor):
    chaos_server.set_faults(None)
    originals = {(cls, name) for cls, name in instrumentor.wrapped}
    assert (httpx.Client, "send") in originals
    assert (aiohttp.ClientSession, "_request") in originals
    for run in DRIVERS.values():
        assert run(chaos_server.url, BATCH.encode(), False, bare).error is None
    assert otel.value("batch.closed") == 4
    assert {a["pairwatch.integration"] for a in otel.attrs("batch.closed")} == {
        "httpx",
        "requests",
        "aiohttp",
    }
    instrumentor.uninstrument()
    assert not hasattr(httpx.Client.send, "__wrapped__")
    assert not hasattr(requests.Session.send, "__wrapped__")
    assert not hasattr(aiohttp.ClientSession._request, "__wrapped__")
    for run in DRIVERS.values():
        run(chaos_server.url, BATCH.encode(), False, bare)
    assert otel.value("batch.closed") == 4


def test_instance_and_global_count_once(otel, chaos_server, instrumentor):
    chaos_server.set_faults(None)
    for run in DRIVERS.values():
        run(chaos_server.url, BATCH.encode(), False, instrumenting(otel))
    assert otel.value("batch.closed") == 4
    assert otel.value("batch.requests") == 12


def test_entry_point_loads_the_instrumentor():
    (ep,) = [e for e in entry_points(group="opentelemetry_instrumentor") if e.name == "pairwatch"]
    cls = ep.load()
    assert cls is PairwatchInstrumentor
    assert list(cls().instrumentation_dependencies()) == []


def test_opentelemetry_instrument_cli_picks_it_up(tmp_path, chaos_server):
    cli = Path(sys.executable).parent / "opentelemetry-instrument"
    if not cli.exists():
        require(
            False,
            "opentelemetry-instrument",
            "pip install 'pairwatch[instrumentation]' (scripts/bootstrap.sh does)",
        )
    chaos_server.set_faults(None)
    script = tmp_path / "app.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import httpx
            assert hasattr(httpx.Client.send, "__wrapped__"), "not instrumented"
            print(httpx.post({chaos_server.url!r}, content={BATCH!r}).json()[0]["id"])
            """
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    out = subprocess.run(
        [str(cli), sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "0"

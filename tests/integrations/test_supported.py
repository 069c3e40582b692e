"""Each integration wraps only the library versions it is tested with, and says so once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from components import need

import pairwatch
from pairwatch.integrations import supported

REPO = Path(__file__).resolve().parents[2]


def extras_floor() -> dict[str, str]:
    """Each client library's oldest version as ``pyproject.toml``'s extras require it."""
    text = (REPO / "pyproject.toml").read_text()
    block = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'"([a-z0-9-]+)>=([0-9.]+)', block))


def test_the_ranges_start_where_the_extras_do_and_hold_what_is_installed():
    floors = extras_floor()
    bootstrap = (REPO / "scripts" / "bootstrap.sh").read_text()
    for module, (low, high) in supported.RANGES.items():
        distribution = supported.DISTRIBUTIONS.get(module, module)
        if module == "multilspy":  # its own venv (it pins pygls 1.x), made by bootstrap
            assert f'MULTILSPY_PIN="multilspy=={low}"' in bootstrap
        else:
            assert floors[distribution] == low, module
        assert supported.parse(low) < supported.parse(high), module
    from importlib.metadata import version

    for module in supported.RANGES:
        try:
            installed = version(supported.DISTRIBUTIONS.get(module, module))
        except Exception:
            continue
        assert supported.check(module), f"{module} {installed}: the dev venv is out of range"


def test_version_parsing():
    assert supported.parse("0.28.1") == (0, 28, 1)
    assert supported.parse("2.0rc1") == (2, 0)
    assert supported.parse("13") == (13,)
    assert supported.parse("1.2.3.post4") == (1, 2, 3)


def test_a_library_outside_its_range_is_left_unwrapped_with_one_line(
    otel, caplog, monkeypatch, chaos
):
    httpx = need("httpx", "pip install 'pairwatch[httpx]'")
    monkeypatch.setattr(supported, "version", lambda name: "1.0.0")  # beyond <1
    monkeypatch.setattr(supported, "_said", set())
    server = chaos()
    body = b'[{"jsonrpc": "2.0", "id": 1, "method": "echo"}]'
    headers = {"Content-Type": "application/json"}
    with caplog.at_level("WARNING", logger="pairwatch"):
        for _ in range(2):
            client = httpx.Client()
            original = client.send
            assert pairwatch.instrument(client, meter_provider=otel.meter_provider) is client
            assert client.send == original  # nothing wrapped
            client.post(server.url, content=body, headers=headers)
            pairwatch.uninstrument(client)
    lines = [r.getMessage() for r in caplog.records if "outside the versions" in r.getMessage()]
    assert lines == [
        "pairwatch: httpx 1.0.0 is outside the versions pairwatch supports (>=0.27,<1); its "
        "clients are not instrumented (PAIRWATCH_ANY_VERSION=true instruments them anyway)"
    ]
    assert otel.counters().get("batch.requests", 0) == 0

    monkeypatch.setenv("PAIRWATCH_ANY_VERSION", "true")
    client = pairwatch.instrument(httpx.Client(), meter_provider=otel.meter_provider)
    client.post(server.url, content=body, headers=headers)
    pairwatch.uninstrument(client)
    assert otel.counters()["batch.requests"] == 1


def test_the_instrumentor_skips_a_library_outside_its_range(monkeypatch):
    need("opentelemetry.instrumentation", "pip install 'pairwatch[instrumentation]'")
    need("requests", "pip install 'pairwatch[requests]'")
    from pairwatch.instrumentor import PairwatchInstrumentor

    real = supported.version
    monkeypatch.setattr(
        supported, "version", lambda name: "1.0" if name == "requests" else real(name)
    )
    monkeypatch.setattr(supported, "_said", set())
    instrumentor = PairwatchInstrumentor()
    instrumentor.instrument()
    try:
        modules = {
            getattr(target, "__module__", None) or getattr(target, "__name__", "")
            for target, _method in instrumentor.wrapped
        }
        modules = {name.split(".")[0] for name in modules}
    finally:
        instrumentor.uninstrument()
    assert "requests" not in modules
    assert "httpx" in modules


@pytest.mark.parametrize("module", sorted(supported.RANGES))
def test_each_end_of_a_range_is_inside_and_the_next_major_outside(module, monkeypatch):
    low, high = supported.RANGES[module]
    monkeypatch.setattr(supported, "_said", set())
    for text, inside in ((low, True), (high, False), (high + ".0.1", False)):
        monkeypatch.setattr(supported, "version", lambda name, t=text: t)
        assert supported.check(module) is inside, (module, text)


def test_the_readme_install_table_states_each_range():
    install = (REPO / "README.md").read_text().split("## Install", 1)[1].split("\n## ", 1)[0]
    for module, (low, high) in supported.RANGES.items():
        if module in ("pygls", "pylsp_jsonrpc", "multilspy"):
            continue  # the lsp row names its libraries; docs/lsp.md has their ranges
        assert f"{module} >={low},<{high}" in install, module

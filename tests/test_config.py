"""Settings from the environment: ``PAIRWATCH_*`` for the one-liner, explicit arguments win,
bad values are logged once and ignored, and ``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`` /
``OTEL_SDK_DISABLED`` / ``PAIRWATCH_ENABLED`` are honoured.  Read back as a user would: from
the in-memory metric reader and span exporter."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from jsonrpc_build import dumps, req
from toy import ToyClient, server

import pairwatch
from pairwatch import config

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in [*config.ENV_FIELDS, "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS"]:
        monkeypatch.delenv(name, raising=False)
    config._warned.clear()


def toy(otel, fault=None, **kw):
    return pairwatch.instrument(
        ToyClient(server(fault)),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        send="send",
        receive="receive",
        close="close",
        **kw,
    )


def test_environment_sets_spans_caps_and_method_cap(otel, monkeypatch):
    monkeypatch.setenv("PAIRWATCH_SPANS", "false")
    monkeypatch.setenv("PAIRWATCH_MAX_PENDING_IDS", "2")
    monkeypatch.setenv("PAIRWATCH_METHOD_CAP", "1")
    client = toy(otel)
    client.send(dumps([req(1, "a"), req(2, "b"), req(3, "c")]))
    client.receive()
    client.close()
    assert otel.spans() == []
    # Two ids fit the pending cap; the third is not tracked and closes as evicted.
    assert otel.value("batch.missing_response", pairwatch__close_reason="evicted") == 1
    assert otel.value("batch.unknown_id_response") == 1  # its reply matched nothing
    methods = sorted({a["rpc.method"] for a in otel.attrs("batch.pair_latency", zeros=True)})
    assert methods == ["_OTHER", "a"]


def test_environment_timeout_and_explicit_argument_wins(otel, clock, monkeypatch):
    monkeypatch.setenv("PAIRWATCH_TIMEOUT", "5")
    from_env = toy(otel, "drop", clock=clock)
    explicit = toy(otel, "drop", clock=clock, timeout=30.0)
    for client in (from_env, explicit):
        client.send(dumps([req(1), req(2)]))
        client.receive()
    clock.advance(6)
    for client in (from_env, explicit):
        client.send(dumps([req(3)]))  # the channel expires overdue batches as it is used
        client.receive()
    # Only the client that took its timeout from the environment timed its batch out.
    assert otel.value("batch.missing_response", pairwatch__close_reason="timeout") == 1
    assert otel.value("batch.closed") == 1  # the other batches are still open (drop fault)


def test_explicit_spans_win_over_the_environment(otel, monkeypatch):
    monkeypatch.setenv("PAIRWATCH_SPANS", "0")
    client = toy(otel, spans=True)
    client.send(dumps([req(1), req(2)]))
    client.receive()
    assert len(otel.spans()) == 3  # one per batch, one per request id


def test_a_bad_value_is_logged_once_and_ignored(otel, monkeypatch, caplog):
    monkeypatch.setenv("PAIRWATCH_TIMEOUT", "soon")
    monkeypatch.setenv("PAIRWATCH_SPANS", "maybe")
    monkeypatch.setenv("PAIRWATCH_MAX_OPEN_BATCHES", "-4")
    with caplog.at_level(logging.WARNING, logger="pairwatch"):
        first, second = toy(otel), toy(otel)
    for client in (first, second):
        client.send(dumps([req(1)]))
        client.receive()
    warned = sorted(r.getMessage().split("=")[0] for r in caplog.records)
    assert warned == [
        "pairwatch: ignoring PAIRWATCH_MAX_OPEN_BATCHES",
        "pairwatch: ignoring PAIRWATCH_SPANS",
        "pairwatch: ignoring PAIRWATCH_TIMEOUT",
    ]
    assert len(otel.spans()) == 4  # the default (spans on) stood
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 2


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("2.5", 2.5),
        (" 7 ", 7.0),
        ("0", None),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("", None),
    ],
)
def test_timeout_parsing(text, parsed):
    found = config.from_env({"PAIRWATCH_TIMEOUT": text})
    assert found.get("timeout") == parsed


@pytest.mark.parametrize(
    ("text", "parsed"), [("TRUE", True), ("on", True), ("1", True), ("No", False), ("0", False)]
)
def test_booleans(text, parsed):
    assert config.from_env({"PAIRWATCH_CAPTURE_PAYLOADS": text}) == {"capture_payloads": parsed}


def test_every_env_field_is_an_options_field():
    fields = set(pairwatch.Options.__dataclass_fields__)
    assert {field for field, _ in config.ENV_FIELDS.values()} <= fields


def test_disabled_instrumentations_naming_pairwatch_leaves_the_client_alone(otel, monkeypatch):
    monkeypatch.setenv("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", "requests, pairwatch")
    original = ToyClient.send
    client = toy(otel, "drop")
    assert not pairwatch.is_instrumented(client)
    assert "send" not in vars(client)
    assert ToyClient.send is original
    client.send(dumps([req(1), req(2)]))
    client.receive()
    client.close()
    assert otel.counters(zeros=True) == {}


@pytest.mark.parametrize(
    ("env", "enabled"),
    [
        ({}, True),
        ({"PAIRWATCH_ENABLED": "false"}, False),
        ({"OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_SDK_DISABLED": "true", "PAIRWATCH_ENABLED": "true"}, True),
        ({"PAIRWATCH_ENABLED": "perhaps"}, True),
    ],
)
def test_the_switch_starts_from_the_environment(env, enabled):
    base = {
        k: v for k, v in os.environ.items() if k not in ("PAIRWATCH_ENABLED", "OTEL_SDK_DISABLED")
    }
    out = subprocess.run(
        [sys.executable, "-c", "import pairwatch; print(pairwatch.is_enabled())"],
        env={**base, **env, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == str(enabled)

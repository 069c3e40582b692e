"""Fuzzing through every HTTP integration: a real local server replies with hostile bytes.

For each example, each library posts the same batch twice, bare and instrumented, to a
stdlib server that answers with the fuzzed body.  What the caller sees (bytes, decoded JSON
or exception) must be identical, and the books must balance: every request is paired or
missing, and every received response is paired, unknown-id or null-id exactly once (an
independent oracle in ``fuzz_strategies`` reads the reply by the spec).
"""

from __future__ import annotations

import itertools
import json

import pytest
from fuzz_strategies import SENT_IDS, fuzz_settings, oracle, replies
from http_drivers import SCRIPTS, bare
from hypothesis import given
from otel_support import Otel
from robust_drivers import DRIVERS
from robust_support import settle

import pairwatch

REQUEST = json.dumps(
    [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in SENT_IDS]
).encode()
_paths = itertools.count()

BOOKS = (
    "batch.requests",
    "batch.missing_response",
    "batch.unknown_id_response",
    "batch.null_id_response",
    "pairwatch.internal_errors",
)


def snapshot(otel: Otel) -> dict[str, int]:
    counters = otel.counters()
    got = {name: counters.get(name, 0) for name in BOOKS}
    got["paired"] = otel.hist("batch.pair_latency")[0]
    for reason in ("unparseable", "not_an_object", "not_jsonrpc"):
        got[reason] = otel.value("batch.invalid_response", pairwatch__reason=reason)
    return got


@pytest.mark.parametrize("library", sorted(DRIVERS))
def test_fuzzed_replies_reach_the_caller_unchanged_and_books_balance(replying, library):
    run = DRIVERS[library]
    otel = Otel()  # one provider per test: per-example deltas keep providers few

    def instrument(client):
        return pairwatch.instrument(
            client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
        )

    @fuzz_settings(25)
    @given(replies)
    def check(reply: bytes) -> None:
        path = f"/fuzz/{next(_paths)}"
        SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [reply], False)
        try:
            expected = run(replying + path, REQUEST, bare)
            before = snapshot(otel)
            got = run(replying + path, REQUEST, instrument)
            settle()
            after = snapshot(otel)
        finally:
            del SCRIPTS[path]
        assert got == expected
        d = {k: after[k] - before[k] for k in after}
        assert d["pairwatch.internal_errors"] == 0
        assert d["batch.requests"] == len(SENT_IDS)
        assert d["paired"] + d["batch.missing_response"] == len(SENT_IDS)
        want = oracle(reply, SENT_IDS)
        if want is None:  # not JSON: one invalid reply, every request missing
            assert d["unparseable"] == 1
            assert d["paired"] == d["batch.unknown_id_response"] == 0
        elif "empty" in want:
            assert d["paired"] == d["batch.unknown_id_response"] == 0
        else:
            assert d["paired"] == want["paired"]
            assert d["batch.unknown_id_response"] == want["unknown"]
            assert d["batch.null_id_response"] == want["null"]
            assert d["not_an_object"] + d["not_jsonrpc"] == want["invalid_only"]

    check()

"""The one patcher: uninstrument puts back exactly what was there, and nothing else.

What a user can observe after ``uninstrument`` (or the instrumentor's ``uninstrument``): the
instance's and the class's ``__dict__`` entries are what they were, identical objects; an
attribute someone else replaced in between stays theirs.  The client here is a plain class
whose ``call`` answers JSON-RPC in process, instrumented with the generic integration, so the
counts come from the exported metrics.
"""

from __future__ import annotations

import json
import types

import pairwatch
from pairwatch.integrations._kit.patch import Patches


def batch(*ids: int) -> str:
    return json.dumps([{"jsonrpc": "2.0", "id": i, "method": "m"} for i in ids])


BATCH = batch(0, 1)


class Echo:
    def call(self, body: str) -> list[dict[str, object]]:
        return [{"jsonrpc": "2.0", "id": m["id"], "result": 0} for m in json.loads(body)]


class LoudEcho(Echo):
    """Inherits ``call``: a class-level patch on it must not touch Echo."""


def test_an_own_attribute_is_restored_identically(otel):
    echo = Echo()
    own = types.MethodType(lambda self, body: Echo.call(self, body), echo)
    echo.call = own
    pairwatch.instrument(echo, send="call", receive="call", meter_provider=otel.meter_provider)
    assert vars(echo)["call"] is not own
    echo.call(BATCH)
    assert otel.value("batch.requests") == 2
    pairwatch.uninstrument(echo)
    assert vars(echo)["call"] is own


def test_a_class_patch_after_instrument_is_called_then_pairwatch_resumes(otel):
    """Call-time lookup: a method replaced on the class is what the instance calls."""
    echo = pairwatch.instrument(
        Echo(), send="call", receive="call", meter_provider=otel.meter_provider
    )
    echo.call(BATCH)
    original = Echo.call
    Echo.call = lambda self, body: [{"jsonrpc": "2.0", "id": 0, "result": "patched"}]
    try:
        assert echo.call(BATCH)[0]["result"] == "patched"  # not the install-time method
    finally:
        Echo.call = original
    assert echo.call(batch(2, 3))[1]["id"] == 3  # the class's own method again, still tracked
    assert otel.value("batch.closed") == 2  # the patched call's batch still waits for id 1
    pairwatch.uninstrument(echo)  # closes the stream: id 1 of the patched call never came
    assert otel.value("batch.closed") == 3
    assert otel.value("batch.requests") == 6
    assert otel.value("batch.missing_response") == 1
    assert "call" not in vars(echo)


def test_a_value_someone_put_there_since_stays_theirs(otel):
    echo = pairwatch.instrument(
        Echo(), send="call", receive="call", meter_provider=otel.meter_provider
    )
    theirs = types.MethodType(Echo.call, echo)
    echo.call = theirs
    pairwatch.uninstrument(echo)
    assert vars(echo)["call"] is theirs
    theirs(BATCH)
    assert otel.value("batch.requests") == 0


def test_class_and_module_patches_restore_exactly():
    seen: list[str] = []

    def wrapper(wrapped, instance, args, kwargs):
        seen.append(type(instance).__name__ if instance is not None else "module")
        return wrapped(*args, **kwargs)

    module = types.ModuleType("fake_transport")
    module.parse = lambda line: line.upper()
    original_parse = module.parse
    own_echo_call = vars(Echo)["call"]
    patches = Patches()
    patches.wrap(LoudEcho, "call", wrapper)  # inherited: wrapped on LoudEcho only
    patches.wrap(module, "parse", wrapper)
    patches.replace(module, "parse", lambda parse: lambda line: "tapped " + parse(line))
    assert LoudEcho().call(BATCH)[1]["id"] == 1
    assert Echo().call(BATCH)[1]["id"] == 1
    assert module.parse("x") == "tapped X"
    assert seen == ["LoudEcho", "module"]
    patches.uninstall()
    assert "call" not in vars(LoudEcho)
    assert vars(Echo)["call"] is own_echo_call
    assert module.parse is original_parse
    patches.uninstall()  # a second time changes nothing
    assert module.parse is original_parse

"""aiohttp builds a body tap only when the body needs one: the same numbers either way.

The aiohttp tee shows pairwatch each read of ``response.content``.  For a plain JSON reply
(no encoding left to undo, a Content-Type seen before, not a 202 or a redirect) the tee gets
a stand-in, ``TapOnNeed``, instead of a tap: a body read whole goes straight to the
exchange's books, and the tap (with the bound channel it feeds) is built only for a partial
read, a body cut short, a response released unread, or a sweeper pass that finds the body
held open.

Each scenario runs over a real loopback server, once with the stand-in and once with the tap
built at attach as before; the choice is made by replacing the integration's ``plain_type``
check, the one thing in this file that is not what a user runs.  Every exported point and
every span must be identical, at a fake clock so that latencies are too.  Then exact numbers
for the cases users meet most, and a count of the taps built.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from http_drivers import HOOKS, JSON, SCRIPTS
from otel_support import FakeClock, Otel

import pairwatch
from pairwatch.integrations import aiohttp_client
from pairwatch.integrations._kit import stream as _stream
from pairwatch.integrations._kit import watch as _watch
from pairwatch.runtime.sweeper import SWEEPER


def _requests(*ids: int) -> bytes:
    return json.dumps([{"jsonrpc": "2.0", "id": i, "method": "eth_call"} for i in ids]).encode()


def _results(*ids: int) -> bytes:
    return json.dumps([{"jsonrpc": "2.0", "id": i, "result": "0x7"} for i in ids]).encode()


REQUEST = _requests(1, 2, 3)
REPLY = _results(1, 2, 3)
ERROR = json.dumps(
    {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no"}}
).encode()

Read = Callable[[aiohttp.ClientResponse], Awaitable[Any]]


async def _read(r: aiohttp.ClientResponse) -> Any:
    return await r.read()


async def _json(r: aiohttp.ClientResponse) -> Any:
    return await r.json(content_type=None)


async def _text(r: aiohttp.ClientResponse) -> Any:
    return await r.text()


async def _chunked(r: aiohttp.ClientResponse) -> Any:
    return b"".join([c async for c in r.content.iter_chunked(7)])


async def _exactly_then_rest(r: aiohttp.ClientResponse) -> Any:
    head = await r.content.readexactly(10)
    return head + await r.content.read()


async def _release(r: aiohttp.ClientResponse) -> Any:
    r.release()


async def _close(r: aiohttp.ClientResponse) -> Any:
    r.close()


# name -> (status, reply chunks, how the caller reads, a pause before the body, cut short)
SCENARIOS: dict[str, tuple[int, list[bytes], Read, float, bool]] = {
    "read_whole": (200, [REPLY], _read, 0.0, False),
    "json_whole": (200, [REPLY], _json, 0.0, False),
    "text_whole": (200, [REPLY], _text, 0.0, False),
    "read_in_three_chunks": (200, [REPLY[:9], REPLY[9:30], REPLY[30:]], _read, 0.0, False),
    "iter_chunked": (200, [REPLY[:9], REPLY[9:]], _chunked, 0.0, False),
    "readexactly_then_read": (200, [REPLY], _exactly_then_rest, 0.0, False),
    "reordered": (200, [_results(3, 1, 2)], _read, 0.0, False),
    "one_missing": (200, [_results(1, 3)], _read, 0.0, False),
    "unknown_id": (200, [_results(1, 2, 9)], _read, 0.0, False),
    "error_with_null_id": (400, [ERROR], _read, 0.0, False),
    "not_json": (502, [b"<html>bad gateway</html>"], _read, 0.0, False),
    "empty_body_read": (200, [], _read, 0.0, False),
    "released_unread": (200, [REPLY[:10], REPLY[10:]], _release, 0.3, False),
    "closed_unread": (200, [REPLY[:10], REPLY[10:]], _close, 0.3, False),
    "received_then_released": (200, [REPLY], _release, 0.0, False),
    "cut_short": (200, [REPLY[:10]], _read, 0.0, True),
}

SWEEP_AT = 400.0  # past aiohttp's default read timeout (300 s total), which the batch follows


def _exchange(
    url: str, read: Read, otel: Otel, clock: FakeClock, spans: bool, held: list[Any] | None = None
) -> Any:
    """One POST read with ``read``; ``held`` keeps the response referenced afterwards."""

    async def run() -> Any:
        async with aiohttp.ClientSession() as session:
            pairwatch.instrument(
                session,
                meter_provider=otel.meter_provider,
                tracer_provider=otel.tracer_provider,
                clock=clock,
                spans=spans,
            )
            r = await session.post(url, data=REQUEST, headers=JSON)
            if held is not None:
                held.append(r)
            try:
                return await read(r)
            except aiohttp.ClientError as exc:
                return type(exc).__name__
            finally:
                r.release()

    return asyncio.run(run())


def _tee_on(monkeypatch: Any) -> threading.Event:
    """Set once the client has its headers and has put its tee on the response: the server
    sends the body only after that, so a sweep in between finds the body held open."""
    attached = threading.Event()
    original = aiohttp_client._Aiohttp.attach

    def attach(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        attached.set()

    monkeypatch.setattr(aiohttp_client._Aiohttp, "attach", attach)
    return attached


def _script(path: str, status: int, chunks: list[bytes], pause: float, cut: bool) -> None:
    SCRIPTS[path] = (status, {"Content-Type": "application/json"}, chunks, cut)
    if pause:
        HOOKS[path] = lambda index: time.sleep(pause) if index else None


def _run(
    scripted: str, monkeypatch: Any, name: str, spans: bool, on_need: bool
) -> tuple[Any, Otel]:
    status, chunks, read, pause, cut = SCENARIOS[name]
    path = f"/tap-on-need-{name}"
    _script(path, status, chunks, pause, cut)
    monkeypatch.setattr(aiohttp_client, "plain_type", lambda content_type: on_need)
    otel, clock = Otel(), FakeClock()
    seen = _exchange(scripted + path, read, otel, clock, spans)
    pairwatch.flush()
    return seen, otel


@pytest.mark.parametrize("spans", [False, True], ids=["spans_off", "spans_on"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_tap_built_on_need_counts_what_one_built_at_attach_counts(
    scripted, monkeypatch, name, spans
):
    seen_at_once, at_once = _run(scripted, monkeypatch, name, spans, on_need=False)
    seen_on_need, on_need = _run(scripted, monkeypatch, name, spans, on_need=True)
    assert seen_on_need == seen_at_once
    assert on_need.points() == at_once.points()
    assert on_need.span_shapes() == at_once.span_shapes()
    assert at_once.value("batch.requests") == 3  # each run saw its batch
    assert at_once.value("batch.closed") == 1


@pytest.mark.parametrize("on_need", [False, True], ids=["at_attach", "on_need"])
def test_a_body_held_open_across_a_sweep_times_out_then_pairs_late(scripted, monkeypatch, on_need):
    """The server holds the body back; the sweeper's pass (the test runs it, at a clock
    past the read timeout) finds it held open and expires the batch, building the tap on
    its own thread; the body read afterwards brings three late replies."""
    monkeypatch.setattr(aiohttp_client, "plain_type", lambda content_type: on_need)
    otel, clock = Otel(), FakeClock()
    path = f"/tap-on-need-swept-{on_need}"
    SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [REPLY], False)

    attached = _tee_on(monkeypatch)

    def sweep(index: int) -> None:
        assert attached.wait(10)
        clock.advance(SWEEP_AT)
        SWEEPER.sweep()

    HOOKS[path] = sweep
    assert _exchange(scripted + path, _read, otel, clock, False) == REPLY
    assert otel.counters() == {
        "batch.requests": 3, "batch.closed": 1, "batch.missing_response": 3,
        "batch.response_count_mismatch": 1, "batch.late_response": 3,
        "batch.unknown_id_response": 3,  # a late reply's id is no longer pending
    }  # fmt: skip
    assert otel.value("batch.missing_response", pairwatch__close_reason="timeout") == 3


def test_a_plain_reply_builds_no_tap_and_pairs_exactly(scripted, monkeypatch):
    """Without any replacement: a plain reply read whole builds no tap, even the first of a
    Content-Type this process has not seen; a body read in pieces builds one.  The books
    are exact either way."""
    # Counted by a spy on the tap's constructor: whether a tap is built is what this checks,
    # and nothing a user reads shows it.
    built: list[str] = []
    original = _stream.Tap.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        built.append(args[1] if len(args) > 1 else kwargs.get("content_type"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(_stream.Tap, "__init__", counting)
    content_type = "application/json; charset=x-pairwatch-test"  # new to this process
    SCRIPTS["/tap-on-need-count"] = (200, {"Content-Type": content_type}, [REPLY], False)
    SCRIPTS["/tap-on-need-parts"] = (
        200, {"Content-Type": content_type}, [REPLY[:9], REPLY[9:]], False,
    )  # fmt: skip
    otel, clock = Otel(), FakeClock()
    HOOKS["/tap-on-need-count"] = lambda index: clock.advance(0.25)  # the server's think time
    for _ in range(3):
        seen = _exchange(scripted + "/tap-on-need-count", _json, otel, clock, False)
        assert seen == json.loads(REPLY)
    assert built == []
    watched = len(SWEEPER.channels())
    held: list[Any] = []
    assert _exchange(scripted + "/tap-on-need-parts", _chunked, otel, clock, False, held) == REPLY
    assert built == [content_type]
    # The body ended: the sweeper no longer looks at it, though its response is still held.
    assert len(SWEEPER.channels()) == watched
    assert otel.counters() == {"batch.requests": 12, "batch.closed": 4}
    assert otel.value("batch.closed", pairwatch__close_reason="body_end") == 4
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 4
    assert otel.hist("batch.pair_latency") == (12, 9 * 0.25)


def test_a_sweeper_looking_all_the_time_changes_no_number(scripted, monkeypatch):
    """Contention on the token: a thread asks for the held-open bodies' channels without
    pause (each ask builds the tap of every body not yet read, as the sweeper's pass does)
    while 200 exchanges, 20 at a time, read their replies whole, with the interpreter
    switching threads as often as it can.  Most bodies are then taken by a tap the other
    thread built, the rest by their whole read; each exactly once.  A stress check: the
    interleaving the token exists for (a build and a whole read at the very same step) is
    too narrow for a test to hit on purpose."""
    SCRIPTS["/tap-on-need-race"] = (200, {"Content-Type": "application/json"}, [REPLY], False)
    HOOKS["/tap-on-need-race"] = lambda index: time.sleep(0.002)  # headers, then the body
    otel = Otel()
    stop = threading.Event()
    looks = [0]
    built = [0]  # a spy on the tap's constructor: which side took each body is not exported
    original = _stream.Tap.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        built[0] += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(_stream.Tap, "__init__", counting)

    def sweeper() -> None:
        while not stop.is_set():
            SWEEPER.channels()
            looks[0] += 1

    async def run() -> list[Any]:
        async with aiohttp.ClientSession() as session:
            pairwatch.instrument(
                session, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider
            )
            gate = asyncio.Semaphore(20)

            async def one() -> Any:
                async with (
                    gate,
                    session.post(scripted + "/tap-on-need-race", data=REQUEST, headers=JSON) as r,
                ):
                    return await r.read()

            return await asyncio.gather(*(one() for _ in range(200)))

    thread = threading.Thread(target=sweeper)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
    thread.start()
    try:
        seen = asyncio.run(run())
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert seen == [REPLY] * 200
    assert looks[0] > 10  # the other thread looked while the exchanges ran
    assert built[0] > 0  # and built taps for bodies held open
    assert otel.counters() == {"batch.requests": 600, "batch.closed": 200}
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 200
    assert otel.hist("batch.pair_latency")[0] == 600


def test_a_drop_that_comes_while_its_tap_is_built_is_kept(scripted, monkeypatch):
    """A collection can run a response's callback on the very thread that is building its
    tap (a sweeper pass, for a body held open).  Stood in for here by having the build
    itself report the response gone, once: the exchange must still close as dropped, at
    once, not wait on its own lock and lose the drop."""
    from pairwatch.integrations._kit import tap_on_need as _tap_on_need

    otel, clock = Otel(), FakeClock()
    path = "/tap-on-need-drop-mid-build"
    SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [REPLY], False)
    monkeypatch.setattr(aiohttp_client, "plain_type", lambda content_type: True)
    original = _tap_on_need.Exchange.tap
    dropped_during: list[bool] = []

    def tap_reporting_a_drop(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not dropped_during:  # as the response's callback, mid-build, on this thread
            stand_in = next(
                ref.__callback__.tap for ref in list(_watch.WATCHED.values())
                if isinstance(ref.__callback__.tap, _tap_on_need.TapOnNeed)
            )  # fmt: skip
            stand_in.dropped("stream_dropped")
            dropped_during.append(True)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(_tap_on_need.Exchange, "tap", tap_reporting_a_drop)

    attached = _tee_on(monkeypatch)

    def sweep(index: int) -> None:
        assert attached.wait(10)
        started = time.monotonic()
        SWEEPER.sweep()  # builds the held-open body's tap, on this thread
        assert time.monotonic() - started < 2.0  # did not wait on its own lock

    HOOKS[path] = sweep
    assert _exchange(scripted + path, _read, otel, clock, False) == REPLY
    assert dropped_during == [True]
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 3
    assert otel.value("batch.closed") == 1


@pytest.mark.parametrize("on_need", [False, True], ids=["at_attach", "on_need"])
def test_an_attach_that_fails_closes_its_batch_once(scripted, monkeypatch, on_need):
    """Putting the tee on the response fails (stood in for by the tee class refusing to be
    built, as a changed aiohttp could): the failure is counted once, the caller reads its
    reply unobserved, and the batch closes once, as ``closed``, also after its response is
    collected (a watch left on it would drop the batch a second time)."""
    import gc

    def refuse() -> type:
        raise RuntimeError("no tee")

    monkeypatch.setattr(aiohttp_client, "plain_type", lambda content_type: on_need)
    monkeypatch.setattr(aiohttp_client, "tee_class", refuse)
    otel, clock = Otel(), FakeClock()
    path = f"/tap-on-need-attach-fails-{on_need}"
    SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [REPLY], False)
    assert _exchange(scripted + path, _read, otel, clock, False) == REPLY
    gc.collect()  # the response, and anything still watching it
    pairwatch.flush()
    assert otel.counters() == {
        "batch.requests": 3, "batch.closed": 1, "batch.missing_response": 3,
        "batch.response_count_mismatch": 1, "pairwatch.internal_errors": 1,
    }  # fmt: skip
    assert otel.value("batch.closed", pairwatch__close_reason="closed") == 1
    assert not [ref for ref in _watch.WATCHED.values() if ref() is None]

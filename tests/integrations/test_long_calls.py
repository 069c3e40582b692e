"""Long calls are not missing: an HTTP exchange waits as long as its client does.

pairwatch's own ``timeout`` (30 s by default) used to close a streamed or aiohttp exchange
whose reply took longer, counting it missing while the client still waited and then got
its answer.  The exchange now follows the client's read timeout (httpx ``Timeout.read``,
requests ``timeout=``, aiohttp ``ClientTimeout``), restarted on every chunk, and waits for
the body's end when the client has none.  ``method_timeouts`` gives slow methods their own.

The server pauses between headers and body; instead of sleeping, it moves pairwatch's clock
(``Options.clock``) and runs one pass of the real sweeper, exactly what the sweeper thread
would do at that moment.  The clients' own timeouts run on the real clock and never fire.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from http_drivers import HOOKS, SCRIPTS
from otel_support import FakeClock

import pairwatch
from pairwatch.channel import Options, open_channel
from pairwatch.runtime.sweeper import SWEEPER

REQUEST = json.dumps(
    [{"jsonrpc": "2.0", "id": 1, "method": "a"}, {"jsonrpc": "2.0", "id": 2, "method": "b"}]
).encode()
REPLY = b'[{"jsonrpc":"2.0","id":1,"result":"A"},{"jsonrpc":"2.0","id":2,"result":"B"}]'
EVENTS = (
    b'data: {"jsonrpc":"2.0","id":1,"result":"A"}\n\n'
    b'data: {"jsonrpc":"2.0","id":2,"result":"B"}\n\n'
)
# The drivers' own read timeouts: httpx 5 s, requests 5 s, aiohttp's default total of 300 s.
CLIENT_READ = {"httpx": 5.0, "httpx_async": 5.0, "requests": 5.0, "aiohttp": 300.0}


def watched(sse: bool, name: str) -> bool:
    """Exchanges the sweeper watches: streamed bodies, and every aiohttp response."""
    return sse or name == "aiohttp"


def watched_pending(count: int | None = None) -> bool:
    """A watched exchange is open (with ``count`` requests still pending, if given)."""
    return any(
        c.ledger.open_batches and (count is None or c.ledger.pending_ids == count)  # type: ignore[attr-defined]
        for c in SWEEPER.channels()
    )


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "the client never got there"
        time.sleep(0.005)


def pause(clock: FakeClock, seconds: float, wait_for_watch: bool) -> Callable[[int], None]:
    """Before the body: move pairwatch's clock and run the sweeper once."""

    def hook(index: int) -> None:
        if index:
            return
        if wait_for_watch:  # the client must have the headers (and its tap) first
            wait_until(watched_pending)
        clock.advance(seconds)
        SWEEPER.sweep()

    return hook


def instrumented(otel: Any, clock: FakeClock, **options: Any) -> Callable[[Any], Any]:
    def apply(client: Any) -> Any:
        return pairwatch.instrument(
            client,
            meter_provider=otel.meter_provider,
            tracer_provider=otel.tracer_provider,
            clock=clock,
            timeout=0.2,
            **options,
        )

    return apply


def script(path: str, sse: bool) -> None:
    if sse:
        SCRIPTS[path] = (200, {"Content-Type": "text/event-stream"}, [EVENTS], False)
    else:
        SCRIPTS[path] = (200, {"Content-Type": "application/json"}, [REPLY], False)


@pytest.mark.parametrize("sse", [False, True])
def test_reply_slower_than_pairwatch_timeout_within_the_clients_is_paired(
    otel, scripted, driver, sse, clock
):
    name, run = driver
    path = f"/slow-{name}-{sse}"
    script(path, sse)
    HOOKS[path] = pause(clock, 1.0, watched(sse, name))  # 5x Options.timeout
    seen = run(scripted + path, REQUEST, sse, instrumented(otel, clock))
    assert seen.body == (EVENTS if sse else REPLY)
    assert otel.counters() == {"batch.requests": 2, "batch.closed": 1}
    assert otel.hist("batch.pair_latency")[0] == 2
    assert otel.value("batch.missing_response") == 0


@pytest.mark.parametrize("name", ["httpx", "aiohttp"])
def test_beyond_the_clients_read_timeout_the_books_close(otel, scripted, name, clock):
    """The same pause past the client's own read timeout (on pairwatch's clock only): the
    exchange closes as missing by timeout, as the client would have given up."""
    from http_drivers import DRIVERS

    path = f"/too-slow-{name}"
    script(path, True)
    HOOKS[path] = pause(clock, CLIENT_READ[name] + 1, True)
    seen = DRIVERS[name](scripted + path, REQUEST, True, instrumented(otel, clock))
    assert seen.body == EVENTS  # the real client did not wait that long
    assert otel.value("batch.missing_response", pairwatch__close_reason="timeout") == 2
    assert otel.value("batch.unknown_id_response") == 2  # the replies came after the close
    assert otel.value("batch.closed", pairwatch__diagnosis="responses_missing") == 1


def test_a_client_without_read_timeout_waits_for_the_body_end(otel, scripted, clock):
    path = "/slow-forever"
    script(path, True)
    HOOKS[path] = pause(clock, 3600.0, True)
    client = instrumented(otel, clock)(httpx.Client(timeout=None))
    with client, client.stream("POST", scripted + path, content=REQUEST) as r:
        assert b"".join(r.iter_bytes()) == EVENTS
    assert otel.counters() == {"batch.requests": 2, "batch.closed": 1}
    assert otel.value("batch.closed", pairwatch__close_reason="stream_end") == 1


def test_each_chunk_restarts_the_clients_read_timeout(otel, scripted, clock):
    """Two pauses of 4 s (8 s in all) under httpx's 5 s read timeout: the exchange is never
    idle for longer than the client allows, so nothing is missing."""
    path = "/trickle"
    half = EVENTS.index(b"\n\n") + 2
    SCRIPTS[path] = (
        200,
        {"Content-Type": "text/event-stream"},
        [EVENTS[:half], EVENTS[half:]],
        False,
    )

    def hook(index: int) -> None:
        wait_until(lambda: watched_pending(2 - index))  # the client read what came before
        clock.advance(4.0)
        SWEEPER.sweep()

    HOOKS[path] = hook
    client = instrumented(otel, clock)(httpx.Client(timeout=5))
    with client, client.stream("POST", scripted + path, content=REQUEST) as r:
        assert b"".join(r.iter_bytes()) == EVENTS
    assert otel.counters() == {"batch.requests": 2, "batch.closed": 1}
    assert otel.value("batch.missing_response") == 0
    assert otel.hist("batch.pair_latency") == (2, 4.0 + 8.0)


def test_method_timeouts_on_a_stream_channel(otel, clock):
    """A websocket-like channel: ``eth_getLogs`` may take 120 s, everything else 30 s."""
    channel = open_channel(
        options=Options(
            meter_provider=otel.meter_provider,
            tracer_provider=otel.tracer_provider,
            clock=clock,
            method_timeouts={"eth_getLogs": 120.0},
        )
    )
    channel.sent(b'{"jsonrpc":"2.0","id":1,"method":"eth_getLogs"}')
    channel.sent(b'{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"}')
    clock.advance(60.0)
    channel.expire()
    assert otel.value("batch.missing_response", rpc__method="eth_blockNumber") == 1
    assert otel.value("batch.missing_response", rpc__method="eth_getLogs") == 0
    channel.received(b'{"jsonrpc":"2.0","id":1,"result":[]}')
    assert otel.value("batch.closed", pairwatch__close_reason="complete") == 1
    assert otel.hist("batch.pair_latency") == (1, 60.0)
    assert otel.value("batch.missing_response") == 1

"""Instrumenting before a fork (gunicorn ``--preload``, a ``multiprocessing`` pool): every
child counts its own traffic exactly once, nothing the parent queued or still had open is
counted again in a child, and the parent's books are untouched by its children.

Each child reads its own copy of the in-memory metric reader (a forked child inherits the
parent's SDK state as it was at the fork, which the tests subtract as the baseline) and
sends its numbers back to the parent.
"""

from __future__ import annotations

import json
import multiprocessing
import os
from collections.abc import Iterator
from typing import Any

import pytest
from components import need
from jsonrpc_build import dumps, req
from otel_support import Otel
from toy import ToyClient, server

import pairwatch
from pairwatch.chaos import ChaosServer, Fault
from pairwatch.otel import deferred

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def minus(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    names = set(after) | set(before)
    return {
        n: after.get(n, 0) - before.get(n, 0) for n in names if after.get(n, 0) != before.get(n, 0)
    }


def run_child(child: Any) -> dict[str, Any]:
    """Fork; run ``child()`` in the child and return what it returned (as JSON)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            os.close(read)
            os.write(write, json.dumps(child()).encode())
        except BaseException as exc:  # report, do not run the parent's test further
            os.write(write, json.dumps({"error": repr(exc)}).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out = json.loads(pipe.read() or b"{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return out


def test_a_forked_child_counts_its_own_batches_only(otel):
    stream = pairwatch.instrument(
        ToyClient(server("drop")),
        meter_provider=otel.meter_provider,
        tracer_provider=otel.tracer_provider,
        send="send",
        receive="receive",
        close="close",
    )
    other = pairwatch.instrument(
        ToyClient(server()), meter_provider=otel.meter_provider, send="call", receive="call"
    )
    stream.send(dumps([req(1), req(2)]))  # id 2 is dropped: this batch stays open
    stream.receive()
    other.call(dumps([req(1)]))  # closed, and recorded by the collection below
    baseline = otel.counters()
    assert baseline == {"batch.closed": 1, "batch.requests": 1}
    # Hold the drain lock so the next closed batch stays queued in the parent at fork time
    # (the drain thread would otherwise record it whenever it liked).
    with deferred._lock:
        other.call(dumps([req(7), req(8)]))
        assert deferred.pending() == 1

        def child() -> dict[str, Any]:
            queued = deferred.pending()
            stream.send(dumps([req(10), req(11), req(12)]))  # id 12 dropped
            stream.receive()
            stream.close()  # closes the child's batch; the parent's open one is not its own
            pairwatch.flush()
            return {"queued": queued, "delta": minus(otel.counters(), baseline)}

        out = run_child(child)
    assert out["queued"] == 0
    assert out["delta"] == {
        "batch.closed": 1,
        "batch.requests": 3,
        "batch.missing_response": 1,
        "batch.response_count_mismatch": 1,
    }
    # The parent: its queued batch is recorded once, here; its open batch is still its own.
    pairwatch.flush()
    assert minus(otel.counters(), baseline) == {"batch.closed": 1, "batch.requests": 2}
    stream.close()
    assert minus(otel.counters(), baseline) == {
        "batch.closed": 2,
        "batch.requests": 4,
        "batch.missing_response": 1,
        "batch.response_count_mismatch": 1,
    }


def test_a_batch_of_the_parent_handed_back_in_a_child_counts_nowhere(otel):
    """An integration in the child may still hold a batch the parent opened (an MCP call's
    request, say) and close it; the child's fresh books must not count it, nor let it
    disturb the count of what the child opens itself."""
    channel = pairwatch.open_channel(
        transport="stream", meter_provider=otel.meter_provider, spans=False
    )
    inherited = channel.sent(dumps(req(1)))
    assert inherited is not None
    assert inherited.open
    baseline = otel.counters()

    def child() -> dict[str, Any]:
        channel.close_batch(inherited, "timeout")  # the parent's: not the child's to count
        own = channel.sent(dumps(req(2)))
        assert own is not None
        channel.close_batch(own, "timeout")
        pairwatch.flush()
        return {"open": inherited.open, "delta": minus(otel.counters(), baseline)}

    out = run_child(child)
    assert out["open"] is False  # the child's copy was marked closed, uncounted
    assert out["delta"] == {
        "batch.closed": 1,
        "batch.requests": 1,
        "batch.missing_response": 1,
        "batch.response_count_mismatch": 1,
    }
    assert inherited.open  # the parent's batch is untouched
    channel.close_batch(inherited, "timeout")
    pairwatch.flush()
    assert minus(otel.counters(), baseline) == {
        "batch.closed": 1,
        "batch.requests": 1,
        "batch.missing_response": 1,
        "batch.response_count_mismatch": 1,
    }


_pool_otel: Otel | None = None
_pool_url = ""
BATCHES_PER_CHILD = 5


def _pool_task(n: int) -> dict[str, Any]:
    """One worker's workload: a new httpx client (the class was patched before the fork)."""
    import httpx

    assert _pool_otel is not None
    before = _pool_otel.counters()
    with httpx.Client() as client:
        for b in range(BATCHES_PER_CHILD):
            ids = range(n * 1000 + b * 10, n * 1000 + b * 10 + 3)
            body = [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [i]} for i in ids]
            got = client.post(_pool_url, json=body).json()
            assert len(got) == 2  # the server dropped one reply, as scripted
    pairwatch.flush()
    return {"pid": os.getpid(), "delta": minus(_pool_otel.counters(), before)}


@pytest.fixture
def instrumentor(otel: Otel) -> Iterator[Any]:
    need("opentelemetry.instrumentation", "pip install 'pairwatch[instrumentation]'")
    from pairwatch.instrumentor import PairwatchInstrumentor

    inst = PairwatchInstrumentor()
    inst.instrument(meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider)
    yield inst
    inst.uninstrument()


def test_a_multiprocessing_pool_counts_exactly_per_child(otel, instrumentor):
    global _pool_otel, _pool_url
    httpx = need("httpx", "pip install 'pairwatch[httpx]'")
    children = 4
    script = [Fault("drop", indices=(0,))] * (children * BATCHES_PER_CHILD + 1)
    with ChaosServer(script) as srv:
        _pool_otel, _pool_url = otel, srv.url
        with httpx.Client() as client:  # the parent's own traffic, before the fork
            client.post(
                srv.url, json=[{"jsonrpc": "2.0", "id": i, "method": "echo"} for i in (1, 2)]
            )
        parent_before = otel.counters()
        assert parent_before == {
            "batch.closed": 1,
            "batch.requests": 2,
            "batch.missing_response": 1,
            "batch.response_count_mismatch": 1,
        }
        context = multiprocessing.get_context("fork")
        # One task per worker process (maxtasksperchild=1): each is forked from the parent,
        # from the pool's own handler thread, not from the main thread.
        with context.Pool(processes=2, maxtasksperchild=1) as pool:
            results = pool.map(_pool_task, range(children), chunksize=1)
        assert srv.exchanges == children * BATCHES_PER_CHILD + 1
    assert len({r["pid"] for r in results}) == children
    for result in results:
        assert result["delta"] == {
            "batch.closed": BATCHES_PER_CHILD,
            "batch.requests": 3 * BATCHES_PER_CHILD,
            "batch.missing_response": BATCHES_PER_CHILD,
            "batch.response_count_mismatch": BATCHES_PER_CHILD,
        }
    pairwatch.flush()
    assert otel.counters() == parent_before  # the children's traffic is theirs alone


def test_locks_held_by_another_thread_at_fork_are_not_inherited_held(otel):
    """A thread of the parent sits inside every process-wide pairwatch lock (the id budget,
    the shared telemetry cache, the method and label limiters, the rate-limited log) while
    the main thread forks: the child gets fresh ones, so its first batches, with a new
    method name and a diagnosis to log, do not hang.  (The drain and sweeper locks are
    instead held across fork() by their own hooks, so they are never held by another
    thread at that instant.)"""
    import contextlib
    import signal
    import threading

    from pairwatch.runtime import forks, sweeper

    client = pairwatch.instrument(
        ToyClient(server("drop")), meter_provider=otel.meter_provider, send="call", receive="call"
    )
    client.call(dumps([req(1), req(2)]))
    baseline = otel.counters()
    held = forks.shared_objects()
    assert len(held) >= 6  # cache, log, budget, and a telemetry's three limiters
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with contextlib.ExitStack() as stack:
            for obj in held:
                stack.enter_context(obj._lock)
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10)

        def child() -> dict[str, Any]:
            signal.alarm(20)  # a deadlock ends the child with SIGALRM, failing the test
            client.call(dumps([req(3, "fresh_method"), req(4, "other_method")]))
            client.call(dumps([req(5), req(6)]))
            pairwatch.uninstrument(client)
            pairwatch.flush()
            return {"delta": minus(otel.counters(), baseline)}

        out = run_child(child)
    finally:
        release.set()
        holder.join(10)
    # The parent's open batch (id 2 pending) is not the child's: only its own two batches.
    assert out["delta"] == {
        "batch.closed": 2,
        "batch.requests": 4,
        "batch.missing_response": 2,
        "batch.response_count_mismatch": 2,
    }
    assert sweeper.SWEEPER._thread is not None


class _FileSpans:
    """A span exporter that appends each span's name to a file: survives the child."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        with open(self.path, "a", encoding="utf-8") as out:
            out.writelines(span.name + "\n" for span in spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


_exit_client: Any = None


def _close_a_batch_and_return() -> None:
    _exit_client.call(dumps([req(1), req(2)]))  # queued; nobody flushes it explicitly


def test_a_multiprocessing_child_flushes_its_queue_when_it_exits(tmp_path):
    """``multiprocessing`` ends a child with ``os._exit`` (no ``atexit``); pairwatch flushes
    through multiprocessing's exit finalizers instead, so the child's spans are exported."""
    global _exit_client
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    spans = tmp_path / "spans.txt"
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(_FileSpans(str(spans))))  # type: ignore[arg-type]
    otel = Otel()
    _exit_client = pairwatch.instrument(
        ToyClient(server()),
        meter_provider=otel.meter_provider,
        tracer_provider=tracer_provider,
        send="call",
        receive="call",
    )
    process = multiprocessing.get_context("fork").Process(target=_close_a_batch_and_return)
    process.start()
    process.join(30)
    assert process.exitcode == 0
    names = spans.read_text(encoding="utf-8").splitlines() if spans.exists() else []
    assert len(names) == 3  # the batch's span and one per request id, exported once

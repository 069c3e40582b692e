"""pygls's hooks: installed on the instance and one module attribute, and undone exactly."""

from __future__ import annotations

import asyncio

import pytest
import wrapt
from components import need
from lsp_support import ENV, chaos_command
from otel_support import Otel

import pairwatch

pytestmark = pytest.mark.timeout(60)

pygls_client = need("pygls.client", "pip install -e '.[dev]' (the lsp extra)")
pygls_io = need("pygls.io_", "pip install -e '.[dev]' (the lsp extra)")


async def instrumented_then_undone(otel: Otel) -> tuple[int, int]:
    from pygls.lsp.client import LanguageClient

    from pairwatch.integrations.lsp.pygls_client import _loop

    users = _loop._users  # clients of earlier tests may still be instrumented
    client = LanguageClient("pairwatch-test", "v1")
    pairwatch.instrument(client, meter_provider=otel.meter_provider)
    assert _loop._users == users + 1
    assert isinstance(pygls_client.run_async, wrapt.FunctionWrapper)
    await client.start_io(*chaos_command(), env=ENV)
    writer = client.protocol.writer
    assert type(writer).__name__ == "TeeWriter"
    assert writer.inner is client._server.stdin  # the caller's stream itself is untouched
    assert "set_writer" not in vars(type(writer.inner))
    assert await client.protocol.send_request_async("echo", [1]) == [1]
    pairwatch.uninstrument(client)
    assert _loop._users == users
    if not users:
        assert pygls_client.run_async is pygls_io.run_async  # the original, put back
    assert client.protocol.writer is client._server.stdin
    assert "set_writer" not in vars(client.protocol)
    assert await client.protocol.send_request_async("echo", [2]) == [2]  # not counted
    client.protocol.notify("exit")
    await client.stop()
    return otel.value("batch.requests"), otel.hist("batch.pair_latency")[0]


def test_uninstrument_restores_the_client_and_pygls():
    otel = Otel()
    assert asyncio.run(instrumented_then_undone(otel)) == (1, 1)


async def started_first() -> None:
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("pairwatch-test", "v1")
    await client.start_io(*chaos_command(), env=ENV)
    try:
        with pytest.raises(TypeError, match="before start_io"):
            pairwatch.instrument(client)
        assert not pairwatch.is_instrumented(client)
    finally:
        client.protocol.notify("exit")
        await client.stop()


def test_a_started_client_is_refused_at_set_up():
    asyncio.run(started_first())


def test_python_lsp_jsonrpc_objects_alone_name_the_pair_call():
    streams = need("pylsp_jsonrpc.streams", "pip install -e '.[dev]' (the lsp extra)")
    import io

    reader = streams.JsonRpcStreamReader(io.BytesIO())
    with pytest.raises(TypeError, match="instrument_streams"):
        pairwatch.instrument(reader)


async def over_tcp(otel: Otel) -> None:
    """pygls's start_tcp against the chaos server's LSP mode listening on loopback."""
    import socket

    from pygls.lsp.client import LanguageClient

    from pairwatch.chaos import Engine
    from pairwatch.chaos.lsp_transport import LspServerThread, lsp_backend

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    client = LanguageClient("pairwatch-test", "v1")
    pairwatch.instrument(client, meter_provider=otel.meter_provider)
    accepted = asyncio.get_running_loop().run_in_executor(None, listener.accept)
    await client.start_tcp("127.0.0.1", port)
    conn, _ = await accepted
    server = LspServerThread(Engine(lsp_backend()), conn).start()
    replies = await asyncio.gather(
        *(client.protocol.send_request_async("echo", [n]) for n in range(5))
    )
    assert replies == [[n] for n in range(5)]
    await client.protocol.send_request_async("shutdown")
    client.protocol.notify("exit")
    server.join(5)
    await client.stop()
    listener.close()


def test_pygls_over_tcp_is_labelled_socket_with_the_peer():
    otel = Otel()
    asyncio.run(over_tcp(otel))
    assert otel.counters() == {"batch.requests": 6, "batch.closed": 7}
    assert otel.hist("batch.pair_latency")[0] == 6
    attrs = otel.attrs("batch.requests")[0]
    assert attrs["pairwatch.transport"] == "socket"
    assert attrs["server.address"] == "127.0.0.1"
    assert attrs["pairwatch.integration"] == "pygls"


async def echo_session(explicit: Otel | None) -> None:
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("pairwatch-test", "v1")
    if explicit is not None:
        pairwatch.instrument(client, meter_provider=explicit.meter_provider)
    await client.start_io(*chaos_command(), env=ENV)
    assert await client.protocol.send_request_async("echo", [1]) == [1]
    await client.protocol.send_request_async("shutdown")
    client.protocol.notify("exit")
    await client.stop()


def test_the_global_instrumentor_instruments_each_client_once():
    need("opentelemetry.instrumentation", "pip install 'pairwatch[instrumentation]'")
    from pairwatch.instrumentor import PairwatchInstrumentor

    otel, explicit = Otel(), Otel()
    instrumentor = PairwatchInstrumentor()
    instrumentor.instrument(meter_provider=otel.meter_provider)
    try:
        assert (pygls_client.JsonRPCClient, "__init__") in instrumentor.wrapped
        asyncio.run(echo_session(None))  # instrumented as it was made
        asyncio.run(echo_session(explicit))  # the explicit line takes over: counted once
    finally:
        instrumentor.uninstrument()
    asyncio.run(echo_session(None))  # off: nothing
    assert otel.counters() == {"batch.requests": 2, "batch.closed": 3}
    assert explicit.counters() == {"batch.requests": 2, "batch.closed": 3}

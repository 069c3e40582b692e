"""The generic form of instrument(): any object with named send and receive methods."""

from __future__ import annotations

import warnings

import pytest
from jsonrpc_build import dumps, req
from toy import AsyncToyClient, Encoder, ToyClient, server

import pairwatch


def instrumented(otel, client, **kw):
    return pairwatch.instrument(
        client, meter_provider=otel.meter_provider, tracer_provider=otel.tracer_provider, **kw
    )


def test_counts_through_named_methods(otel):
    client = instrumented(otel, ToyClient(server("reorder")), send="send", receive="receive")
    client.send(dumps([req(1), req(2), req(3)]))
    client.receive()
    client.send(dumps([req(4), req(5)]))
    client.receive()
    assert otel.value("batch.closed", pairwatch__close_reason="complete") == 2
    assert otel.value("batch.out_of_order") == 2
    assert otel.hist("batch.pair_latency")[0] == 5
    assert otel.value("batch.requests", pairwatch__integration="generic") == 5


def test_drop_and_null_close_as_missing_on_close(otel):
    client = instrumented(
        otel, ToyClient(server("null")), send="send", receive="receive", close="close"
    )
    client.send(dumps([req(1), req(2)]))
    client.receive()
    client.close()
    assert otel.value("batch.null_id_response") == 1
    assert otel.value("batch.missing_response", pairwatch__close_reason="closed") == 1
    assert otel.value("batch.closed", pairwatch__diagnosis="server_null_id") == 1


def test_same_method_for_send_and_receive(otel):
    client = instrumented(otel, ToyClient(server("drop")), send="call", receive="call")
    client.call(dumps([req(1), req(2)]))
    pairwatch.uninstrument(client)  # closes the channel: the dropped id is missing
    assert otel.value("batch.missing_response") == 1
    assert otel.hist("batch.pair_latency")[0] == 1


def test_send_by_return_value(otel):
    enc = instrumented(otel, Encoder(), send="encode", receive="decode")
    enc.encode("eth_chainId")
    enc.decode(b'{"jsonrpc": "2.0", "id": 1, "result": "0x1"}')
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 1


async def test_coroutine_methods(otel):
    client = instrumented(otel, AsyncToyClient(server("reorder")), send="asend", receive="areceive")
    await client.asend([req(1), req(2)])
    reply = await client.areceive()
    assert [r["id"] for r in reply] == [2, 1]
    assert otel.value("batch.out_of_order") == 1
    assert otel.value("batch.closed", pairwatch__close_reason="complete") == 1


def test_transparency_same_values_same_exceptions(otel):
    bare = ToyClient(server("reorder"))
    wrapped = instrumented(otel, ToyClient(server("reorder")), send="send", receive="receive")
    body = dumps([req(1, "m", [1]), req(2, "m", [2])])
    assert wrapped.send(body) == bare.send(body)
    assert wrapped.receive() == bare.receive()
    for client in (bare, wrapped):
        with pytest.raises(ConnectionError, match="server went away"):
            client.send(b"boom")
        with pytest.raises(TimeoutError, match="nothing to read"):
            client.receive()
    # The very object the client returns is handed back, not a copy.
    marker = object()
    wrapped.inbox.append(marker)  # type: ignore[arg-type]
    assert wrapped.receive() is marker


def test_uninstrument_restores_the_original_methods(otel):
    client = ToyClient(server())
    original = ToyClient.send
    instrumented(otel, client, send="send", receive="receive")
    assert "send" in vars(client)
    pairwatch.uninstrument(client)
    assert "send" not in vars(client)
    assert "receive" not in vars(client)
    assert client.send.__func__ is original
    assert not pairwatch.is_instrumented(client)


def test_instrument_twice_warns_and_changes_nothing(otel):
    client = instrumented(otel, ToyClient(server()), send="send", receive="receive")
    first = client.send
    with pytest.warns(UserWarning, match="already instrumented"):
        instrumented(otel, client, send="send", receive="receive")
    assert client.send is first
    client.send(dumps(req(1)))
    client.receive()
    assert otel.value("batch.requests") == 1


def test_unknown_objects_fail_at_setup_not_later(otel):
    with pytest.raises(TypeError, match="send="):
        pairwatch.instrument(object())
    with pytest.raises(TypeError, match="no method 'nope'"):
        pairwatch.instrument(ToyClient(server()), send="nope")
    with pytest.raises(TypeError, match="unknown pairwatch option"):
        pairwatch.instrument(ToyClient(server()), send="send", colour="red")


def test_non_jsonrpc_arguments_are_ignored(otel):
    client = instrumented(otel, ToyClient(lambda body: b"pong"), send="send", receive="receive")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        client.send(b"PING")
        assert client.receive() == b"pong"
    assert otel.value("batch.requests") == 0
    # What came back is not JSON: counted once as invalid, never raised.
    assert otel.value("batch.invalid_response", pairwatch__reason="unparseable") == 1


def test_one_direction_alone_is_warned_about_once(otel, caplog, monkeypatch):
    """A reader alone can only count unknown ids, a writer alone only missing replies:
    said once per process and direction, naming the fix; both directions say nothing."""
    from pairwatch.integrations import generic

    monkeypatch.setattr(generic, "_warned", set())
    with caplog.at_level("WARNING", logger="pairwatch"):
        for _ in range(2):
            reader = instrumented(otel, ToyClient(server("ok")), receive="receive")
            pairwatch.uninstrument(reader)
        writer = instrumented(otel, ToyClient(server("ok")), send="send")
        pairwatch.uninstrument(writer)
        both = instrumented(otel, ToyClient(server("ok")), send="send", receive="receive")
        pairwatch.uninstrument(both)
    lines = [r.getMessage() for r in caplog.records if r.name == "pairwatch"]
    assert len(lines) == 2
    assert "receive='receive') without send=" in lines[0]
    assert "batch.unknown_id_response" in lines[0]
    assert "send='send') without receive=" in lines[1]
    assert "batch.missing_response" in lines[1]
    assert all("open_channel" in line for line in lines)

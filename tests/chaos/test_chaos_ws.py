"""Websocket server and relay proxy."""

from __future__ import annotations

import asyncio
import json

import pytest
from chaos_helpers import batch, ids
from components import need

from pairwatch.chaos import ChaosServer, Fault

websockets = need("websockets", "pip install 'pairwatch[websockets]' (scripts/bootstrap.sh does)")
from websockets.asyncio.client import connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402


async def test_ws_server_faults_and_concurrency():
    async with ChaosServer([Fault("reorder")], transport="ws") as srv:
        assert srv.url.startswith("ws://127.0.0.1:")
        async with connect(srv.url) as ws:
            await ws.send(json.dumps(batch(3)))
            assert ids(json.loads(await ws.recv())) == [2, 1, 0]
            await ws.send(
                json.dumps({"jsonrpc": "2.0", "id": "slow", "method": "sleep", "params": [0.2]})
            )
            await ws.send(json.dumps({"jsonrpc": "2.0", "id": "fast", "method": "echo"}))
            first, second = json.loads(await ws.recv()), json.loads(await ws.recv())
            assert (first["id"], second["id"]) == ("fast", "slow")
            await ws.send("[]")
            assert json.loads(await ws.recv())["error"]["code"] == -32600


async def test_ws_cut_drops_the_connection():
    async with ChaosServer(Fault("cut"), transport="ws") as srv, connect(srv.url) as ws:
        await ws.send(json.dumps(batch(2)))
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 5)


async def test_ws_relay_faults_responses_and_passes_the_rest():
    async with (
        ChaosServer(transport="ws") as up,
        ChaosServer(
            [Fault("null_id", indices=(0,)), Fault("reply_to_notifications", mode="error")],
            transport="ws",
            upstream=up.url,
        ) as proxy,
        connect(proxy.url) as ws,
    ):
        await ws.send(json.dumps(batch(2)))
        assert ids(json.loads(await ws.recv())) == [None, 1]
        await ws.send(json.dumps({"jsonrpc": "2.0", "method": "echo"}))
        reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
        assert reply["error"]["code"] == -32600
        assert [i.kind for i in proxy.injected] == ["null_id", "reply_to_notifications"]

"""websockets client connections (sync and asyncio APIs) against the chaos websocket server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import pairwatch
from pairwatch.chaos import Fault
from pairwatch.pairing.repair import MISSING_CODE


def batch(ids, tag="p"):
    return [{"jsonrpc": "2.0", "id": i, "method": "echo", "params": [f"{tag}{i}"]} for i in ids]


def counters(otel):
    return {k: v for k, v in otel.counters().items() if v}


def test_sync_batches_and_singles_share_the_stream(chaos, otel):
    from websockets.sync.client import connect

    srv = chaos(transport="ws")
    ws = pairwatch.instrument(connect(srv.url).__enter__(), meter_provider=otel.meter_provider)
    srv.set_faults([Fault("reorder")])
    ws.send(json.dumps(batch([0, 1, 2])))
    reply = ws.recv(timeout=5)
    assert [r["id"] for r in json.loads(reply)] == [2, 1, 0]  # the client's data, untouched
    ws.send(json.dumps(batch([3])[0]))
    assert json.loads(ws.recv(timeout=5))["result"] == ["p3"]
    ws.close()
    assert counters(otel) == {"batch.closed": 2, "batch.requests": 4, "batch.out_of_order": 1}
    assert otel.value("batch.closed", pairwatch__integration="websockets") == 2
    assert (
        otel.value("batch.requests", pairwatch__transport="websocket", jsonrpc__batch="false") == 1
    )


def test_sync_cross_batch_duplicates_and_iteration(chaos, otel):
    from websockets.sync.client import connect

    srv = chaos(transport="ws")
    with connect(srv.url) as ws:
        pairwatch.instrument(ws, meter_provider=otel.meter_provider)
        ws.send(json.dumps(batch([0, 1])))
        ws.send(json.dumps(batch([1, 2])))  # id 1 is still pending in the first batch
        replies = []
        for message in ws:  # iteration goes through recv
            replies.extend(json.loads(message))
            if len(replies) == 4:
                break
    assert otel.value("batch.duplicate_id", pairwatch__duplicate_scope="cross_batch") == 1
    assert otel.value("batch.missing_response") == 0
    assert otel.value("batch.unknown_id_response") == 0
    assert otel.hist("batch.pair_latency")[0] == 4


def test_sync_drop_counts_missing_at_close_and_fragments(chaos, otel):
    from websockets.sync.client import connect

    srv = chaos(transport="ws")
    ws = pairwatch.instrument(connect(srv.url).__enter__(), meter_provider=otel.meter_provider)
    srv.set_faults([Fault("drop", indices=[1])])
    text = json.dumps(batch([0, 1, 2]))
    ws.send([text[:10], text[10:]])  # one message in two fragments
    parts = list(ws.recv_streaming())
    assert len(json.loads("".join(parts))) == 2
    ws.close()
    assert otel.value("batch.missing_response", pairwatch__close_reason="closed") == 1
    assert otel.value("batch.response_count_mismatch") == 1
    assert otel.value("batch.requests") == 3


def test_sync_stream_end_and_drop_close_reasons(chaos, otel):
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    srv = chaos(transport="ws")
    ws = pairwatch.instrument(connect(srv.url).__enter__(), meter_provider=otel.meter_provider)
    srv.set_faults([Fault("cut")])
    ws.send(json.dumps(batch([0, 1])))
    with pytest.raises(ConnectionClosed):
        ws.recv(timeout=5)
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_dropped") == 2

    srv2 = chaos(transport="ws", handlers={"slow": lambda params: None})
    ws2 = pairwatch.instrument(connect(srv2.url).__enter__(), meter_provider=otel.meter_provider)
    srv2.set_faults([Fault("delay", seconds=5)])
    ws2.send(json.dumps(batch([7])))
    srv2.stop_thread()  # the server goes away normally (close code 1001)
    with pytest.raises(ConnectionClosed):
        ws2.recv(timeout=5)
    assert otel.value("batch.missing_response", pairwatch__close_reason="stream_end") == 1


async def test_asyncio_api_counts_and_stream_end(chaos, otel):
    from websockets.asyncio.client import connect

    srv = chaos(transport="ws")
    ws = pairwatch.instrument(await connect(srv.url), meter_provider=otel.meter_provider)
    srv.set_faults([[Fault("duplicate", indices=[0]), Fault("wrong_id", indices=[2])]])
    await ws.send(json.dumps(batch([0, 1, 2])))
    reply = json.loads(await ws.recv())
    assert len(reply) == 4
    srv.set_faults([Fault("null_id", indices=[0])])
    await ws.send(json.dumps(batch([5, 6])).encode())  # a binary frame
    async for message in ws:
        assert len(json.loads(message)) == 2
        break
    await ws.close()
    assert counters(otel) == {
        "batch.closed": 2,
        "batch.requests": 5,
        "batch.unknown_id_response": 2,  # the duplicate and the wrong id
        "batch.missing_response": 2,  # the wrong id's request and the null id's request
        "batch.null_id_response": 1,
        "batch.response_count_mismatch": 2,
    }


async def test_asyncio_repair_for_a_zip_based_caller(chaos, otel):
    from websockets.asyncio.client import connect

    srv = chaos(transport="ws")
    ws = pairwatch.instrument(
        await connect(srv.url), meter_provider=otel.meter_provider, repair=True
    )
    faults = [Fault("reorder"), Fault("drop", indices=[0]), Fault("duplicate", indices=[0])]
    # reversed [3, 2, 1, 0]; drop 3; duplicate 2; the last (0) gets a wrong id
    srv.set_faults([[*faults, Fault("wrong_id", indices=[-1])]])
    requests = batch([0, 1, 2, 3])
    await ws.send(json.dumps(requests))
    replies = json.loads(await ws.recv())
    for request, reply in zip(requests, replies, strict=True):  # position pairing
        assert reply["id"] == request["id"]
        if "result" in reply:
            assert reply["result"] == request["params"]  # its own value
        else:
            assert reply["error"]["code"] == MISSING_CODE
    assert sum(1 for r in replies if "error" in r) == 2
    await ws.close()
    assert otel.value("batch.repaired", pairwatch__repair_action="filled_missing") == 2
    assert otel.value("batch.repaired", pairwatch__repair_action="removed_unknown") == 1
    assert otel.value("batch.repaired", pairwatch__repair_action="removed_duplicate") == 1
    assert otel.value("batch.repaired", pairwatch__repair_action="reordered") == 1
    assert otel.value("batch.missing_response") == 2  # the pairing counters see the truth


def test_sync_repair_picks_the_batch_each_reply_answers(chaos, otel):
    from websockets.sync.client import connect

    srv = chaos(transport="ws")
    ws = pairwatch.instrument(
        connect(srv.url).__enter__(), meter_provider=otel.meter_provider, repair=True
    )
    srv.set_faults([Fault("delay", seconds=0.3), Fault("reorder")])
    ws.send(json.dumps(batch([0, 1], "a")))
    ws.send(json.dumps(batch([10, 11], "b")))  # answered first, reversed
    first, second = json.loads(ws.recv(timeout=5)), json.loads(ws.recv(timeout=5))
    assert [r["result"] for r in first] == [["b10"], ["b11"]]
    assert [r["result"] for r in second] == [["a0"], ["a1"]]
    ws.close()


async def test_not_a_connection_fails_at_setup():
    from websockets.asyncio.client import connect

    pending = connect("ws://127.0.0.1:9")  # not awaited: not a connection yet
    with pytest.raises(TypeError, match="after await"):
        pairwatch.instrument(pending)


def test_detection_imports_no_library():
    code = (
        "import sys, pairwatch\n"
        "from pairwatch.integrations import REGISTRY\n"
        "assert not any(i.detect(object()) for i in REGISTRY)\n"
        "print(sorted(m for m in ('web3', 'websockets') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

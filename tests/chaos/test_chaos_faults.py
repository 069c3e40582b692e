"""Every fault, on a known batch over HTTP/JSON: the exact reply and the record."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from chaos_helpers import batch, client, ids, raw_exchange

from pairwatch.chaos import Fault, FaultMix, FaultScript, parse_fault
from pairwatch.chaos.faults import WRONG_ID_OFFSET

NOTE = {"jsonrpc": "2.0", "method": "echo", "params": [1]}


def send(srv, payload, **kw):
    return client().post(srv.url, json=payload, timeout=5, **kw)


def test_reorder_modes(chaos):
    srv = chaos(FaultScript([Fault("reorder"), Fault("reorder", mode="rotate")]))
    assert ids(send(srv, batch(4)).json()) == [3, 2, 1, 0]
    assert ids(send(srv, batch(4)).json()) == [1, 2, 3, 0]
    assert ids(send(srv, batch(4)).json()) == [0, 1, 2, 3]  # script exhausted: clean
    assert [(i.exchange, i.kind) for i in srv.injected] == [(0, "reorder"), (1, "reorder")]


def test_reorder_keeps_each_result_with_its_id(chaos):
    srv = chaos(Fault("reorder", mode="shuffle"))
    for _ in range(5):
        reply = send(srv, batch(6)).json()
        assert ids(reply) != list(range(6))
        assert sorted(ids(reply)) == list(range(6))
        assert all(r["result"] == [f"p{r['id']}"] for r in reply)


def test_reorder_single_element_is_not_recorded(chaos):
    srv = chaos(Fault("reorder"))
    assert ids(send(srv, batch(1)).json()) == [0]
    assert srv.injected == []


def test_drop(chaos):
    srv = chaos(
        [
            Fault("drop", indices=(1,)),
            Fault("drop", fraction=0.5),
            Fault("drop", count=10),
            Fault("drop"),
        ]
    )
    assert ids(send(srv, batch(3)).json()) == [0, 2]
    assert len(send(srv, batch(4)).json()) == 2
    assert send(srv, batch(3)).json() == []  # all dropped: a buggy server's empty array
    single = send(srv, batch(1)[0])
    assert (single.status_code, single.content) == (200, b"")
    rec = srv.injected
    assert rec[0].ids == (1,)
    assert len(rec[1].ids) == 2
    assert rec[2].ids == (0, 1, 2)
    assert rec[3].ids == (0,)


def test_duplicate(chaos):
    srv = chaos([Fault("duplicate", indices=(1,))])
    reply = send(srv, batch(3)).json()
    assert ids(reply) == [0, 1, 1, 2]
    assert reply[1] == reply[2]


def test_null_id(chaos):
    srv = chaos([Fault("null_id", indices=(0, 2))])
    reply = send(srv, batch(3)).json()
    assert ids(reply) == [None, 1, None]
    assert reply[0]["result"] == ["p0"]
    assert srv.injected[0].ids == (0, 2)


def test_wrong_id(chaos):
    srv = chaos([Fault("wrong_id", indices=(0, 1))])
    payload = batch(2)
    payload[1]["id"] = "abc"
    assert ids(send(srv, payload).json()) == [WRONG_ID_OFFSET, "abc-wrong"]


def test_id_type(chaos):
    srv = chaos(Fault("id_type", fraction=1.0))
    payload = batch(3)
    payload[1]["id"] = "7"
    payload[2]["id"] = "not-a-number"  # has no other JSON type: left alone
    assert ids(send(srv, payload).json()) == ["0", 7, "not-a-number"]
    assert srv.injected[0].ids == (0, "7")


def test_both_result_error(chaos):
    srv = chaos(Fault("both_result_error", indices=(0, 1)))
    payload = [*batch(1), {"jsonrpc": "2.0", "id": 1, "method": "nope"}]
    reply = send(srv, payload).json()
    assert reply[0]["result"] == ["p0"]
    assert reply[0]["error"]["code"] == -32603
    assert reply[1]["result"] is None
    assert reply[1]["error"]["code"] == -32601


def test_bad_version(chaos):
    srv = chaos(
        [Fault("bad_version", indices=(0,)), Fault("bad_version", indices=(1,), version=None)]
    )
    assert [r.get("jsonrpc") for r in send(srv, batch(2)).json()] == ["1.0", "2.0"]
    reply = send(srv, batch(2)).json()
    assert "jsonrpc" not in reply[1]
    assert reply[0]["jsonrpc"] == "2.0"


def test_single_for_batch(chaos):
    srv = chaos([Fault("single_for_batch"), Fault("single_for_batch", mode="first")])
    reply = send(srv, batch(3)).json()
    assert isinstance(reply, dict)
    assert reply["id"] is None
    assert reply["error"]["code"] == -32600
    assert send(srv, batch(3)).json() == {"jsonrpc": "2.0", "id": 0, "result": ["p0"]}
    assert srv.injected[0].ids == (0, 1, 2)


def test_reply_to_notifications(chaos):
    srv = chaos(
        [
            Fault("reply_to_notifications"),
            Fault("reply_to_notifications", mode="error"),
            Fault("reply_to_notifications"),  # there are responses: nothing to do
        ]
    )
    assert send(srv, [NOTE, NOTE]).content == b"[]"
    reply = send(srv, NOTE).json()
    assert reply["id"] is None
    assert reply["error"]["code"] == -32600
    assert ids(send(srv, batch(2)).json()) == [0, 1]
    assert [i.kind for i in srv.injected] == ["reply_to_notifications"] * 2


def test_delay_holds_the_whole_json_body(chaos):
    srv = chaos([Fault("delay", seconds=0.05), Fault("delay", delays=(0.0, 0.3))])
    t = time.monotonic()
    assert ids(send(srv, batch(3)).json()) == [0, 1, 2]
    assert time.monotonic() - t >= 0.15
    t = time.monotonic()
    send(srv, batch(2))
    assert time.monotonic() - t >= 0.3
    assert srv.injected[1].detail == "delays 0,0.3"


def test_cut_json_body(chaos):
    srv = chaos(Fault("cut"))
    with pytest.raises(httpx.RemoteProtocolError):
        send(srv, batch(3))
    data = raw_exchange(srv.port, json.dumps(batch(3)).encode())
    head, body = data.split(b"\r\n\r\n", 1)
    announced = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    assert len(body) == announced // 2
    assert (
        body
        == json.dumps(
            [{"jsonrpc": "2.0", "id": i, "result": [f"p{i}"]} for i in range(3)],
            separators=(",", ":"),
        ).encode()[: len(body)]
    )


def test_cut_without_reply_closes_silently(chaos):
    srv = chaos(Fault("cut"))
    assert raw_exchange(srv.port, json.dumps(NOTE).encode()) == b""


def test_unparseable(chaos):
    srv = chaos(Fault("unparseable", data=b"<html>oops"))
    r = send(srv, batch(2))
    assert r.content == b"<html>oops"
    assert srv.injected[0].ids == (0, 1)


def test_faults_compose_in_step_order(chaos):
    srv = chaos([[Fault("drop", indices=(0,)), Fault("reorder"), Fault("null_id", indices=(0,))]])
    assert ids(send(srv, batch(4)).json()) == [None, 2, 1]
    assert [i.kind for i in srv.injected] == ["drop", "reorder", "null_id"]
    assert srv.injected[2].ids == (3,)


def test_set_faults_on_running_server(chaos):
    srv = chaos()
    assert ids(send(srv, batch(2)).json()) == [0, 1]
    srv.set_faults(Fault("reorder"))
    assert ids(send(srv, batch(2)).json()) == [1, 0]
    srv.set_faults(None)
    assert ids(send(srv, batch(2)).json()) == [0, 1]
    assert srv.counts == {"reorder": 1}
    assert srv.exchanges == 3
    srv.reset()
    assert (srv.injected, srv.exchanges) == ([], 0)


def test_fault_mix_is_deterministic_per_seed(chaos):
    def run(seed):
        srv = chaos(FaultMix(reorder=0.5, drop=0.3, null_id=0.3, seed=seed))
        replies = [ids(send(srv, batch(4)).json()) for _ in range(20)]
        return replies, [(i.exchange, i.kind, i.ids) for i in srv.injected]

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert first != other
    kinds = {k for _, k, _ in first[1]}
    assert kinds == {"reorder", "drop", "null_id"}


def test_fault_mix_extremes_and_templates(chaos):
    srv = chaos(
        FaultMix({"drop": 1.0, "reorder": 0.0}, templates={"drop": Fault("drop", indices=(0,))})
    )
    for _ in range(3):
        assert ids(send(srv, batch(3)).json()) == [1, 2]
    with pytest.raises(ValueError, match="unknown fault"):
        FaultMix(explode=0.1)
    with pytest.raises(ValueError, match="probability"):
        FaultMix(drop=1.5)


def test_script_cycle_and_iterator():
    cyc = FaultScript([Fault("drop"), None], cycle=True)
    assert [len(cyc.next_step()) for _ in range(5)] == [1, 0, 1, 0, 1]
    gen = FaultScript(Fault("reorder") for _ in range(2))
    assert [len(gen.next_step()) for _ in range(3)] == [1, 1, 0]


def test_parse_fault_and_validation():
    assert parse_fault("drop:count=2") == Fault("drop", count=2)
    assert parse_fault("delay:delays=0.1/0.2") == Fault("delay", delays=(0.1, 0.2))
    assert parse_fault("bad_version:version=missing") == Fault("bad_version", version=None)
    assert parse_fault("null_id:indices=0/-1") == Fault("null_id", indices=(0, -1))
    assert parse_fault("reorder:mode=shuffle").mode == "shuffle"
    bad = {
        "nope": "unknown fault kind",
        "drop:count": "key=value",
        "drop:zzz=1": "unknown fault parameter",
        "reorder:mode=sideways": "not valid for reorder",
        "drop:fraction=2": "fraction",
    }
    for text, message in bad.items():
        with pytest.raises(ValueError, match=message):
            parse_fault(text)

"""The correct answers: what the server replies with no fault injected."""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from chaos_helpers import batch, client, ids, raw_exchange

from pairwatch.chaos import ChaosServer, RpcError


@pytest.fixture
def srv(chaos):
    return chaos()


def post(srv: ChaosServer, payload: object) -> httpx.Response:
    return client().post(srv.url, json=payload, timeout=5)


def test_each_caller_gets_its_own_result(srv):
    reply = post(srv, batch(5)).json()
    assert ids(reply) == [0, 1, 2, 3, 4]
    assert [r["result"] for r in reply] == [[f"p{i}"] for i in range(5)]
    assert all(r["jsonrpc"] == "2.0" for r in reply)


def test_builtin_methods(srv):
    calls = [
        {"jsonrpc": "2.0", "id": "a", "method": "add", "params": [1, 2, 3.5]},
        {"jsonrpc": "2.0", "id": "b", "method": "get_value", "params": ["k"]},
        {"jsonrpc": "2.0", "id": "c", "method": "eth_blockNumber"},
        {"jsonrpc": "2.0", "id": "d", "method": "eth_chainId", "params": []},
        {"jsonrpc": "2.0", "id": "e", "method": "sleep", "params": [0.01]},
        {"jsonrpc": "2.0", "id": "f", "method": "echo", "params": {"x": 1}},
        {
            "jsonrpc": "2.0",
            "id": "g",
            "method": "fail",
            "params": {"code": -32000, "message": "no"},
        },
    ]
    reply = {r["id"]: r for r in post(srv, calls).json()}
    assert reply["a"]["result"] == 6.5
    assert reply["b"]["result"] == "value:k"
    assert reply["c"]["result"] == "0x1b4"
    assert reply["d"]["result"] == "0x539"
    assert reply["e"]["result"] is None
    assert reply["f"]["result"] == {"x": 1}
    assert reply["g"]["error"] == {"code": -32000, "message": "no"}


def test_unknown_method_and_invalid_params(srv):
    reply = post(
        srv,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "nope"},
            {"jsonrpc": "2.0", "id": 2, "method": "add", "params": ["x"]},
        ],
    ).json()
    assert [r["error"]["code"] for r in reply] == [-32601, -32602]
    assert ids(reply) == [1, 2]


def test_parse_error_is_single_object_with_null_id(srv):
    r = client().post(srv.url, content=b'{"jsonrpc": "2.0", "method"', timeout=5)
    assert r.status_code == 200
    assert r.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }


def test_empty_array_is_single_invalid_request(srv):
    r = client().post(srv.url, content=b"[]", timeout=5)
    assert r.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid Request"},
    }


def test_invalid_elements_get_null_id_errors(srv):
    reply = post(srv, [1, {"jsonrpc": "1.0", "id": 5, "method": "echo"}, {"id": 6}]).json()
    assert ids(reply) == [None, None, None]
    assert {r["error"]["code"] for r in reply} == {-32600}
    assert post(srv, 7).json()["error"]["code"] == -32600
    bool_id = {"jsonrpc": "2.0", "id": True, "method": "echo"}
    assert post(srv, bool_id).json()["id"] is None


def test_notifications_get_no_reply(srv):
    note = {"jsonrpc": "2.0", "method": "echo", "params": [1]}
    for payload in (note, [note, note]):
        r = post(srv, payload)
        assert (r.status_code, r.content) == (200, b"")
        assert r.headers["content-length"] == "0"
    mixed = post(srv, [note, *batch(2), note]).json()
    assert ids(mixed) == [0, 1]


def test_null_id_is_a_request_not_a_notification(srv):
    reply = post(srv, {"jsonrpc": "2.0", "id": None, "method": "echo", "params": ["n"]}).json()
    assert reply == {"jsonrpc": "2.0", "id": None, "result": ["n"]}


def test_empty_status_option(chaos):
    srv = chaos(empty_status=204)
    r = client().post(srv.url, json={"jsonrpc": "2.0", "method": "echo"}, timeout=5)
    assert (r.status_code, r.content) == (204, b"")


def test_custom_handlers(chaos):
    def boom(params):
        raise RpcError(-32001, "boom", data=params)

    srv = chaos(handlers={"boom": boom, "double": lambda p: p[0] * 2})
    reply = post(
        srv,
        [
            {"jsonrpc": "2.0", "id": 1, "method": "boom", "params": [1]},
            {"jsonrpc": "2.0", "id": 2, "method": "double", "params": [21]},
        ],
    ).json()
    assert reply[0]["error"] == {"code": -32001, "message": "boom", "data": [1]}
    assert reply[1]["result"] == 42


def test_batch_elements_run_concurrently(srv):
    calls = [{"jsonrpc": "2.0", "id": i, "method": "sleep", "params": [0.2]} for i in range(5)]
    r = post(srv, calls)
    assert r.elapsed.total_seconds() < 0.8
    assert ids(r.json()) == [0, 1, 2, 3, 4]


def test_keep_alive_and_http_errors(srv):
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        f = s.makefile("rb")
        for i in range(3):
            body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "echo"}).encode()
            s.sendall(
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            assert f.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := f.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert json.loads(f.read(length))["id"] == i
    assert client().get(srv.url + "health", timeout=5).text == "ok\n"
    assert client().get(srv.url, timeout=5).status_code == 405


def test_chunked_request_body(srv):
    body = json.dumps(batch(2)).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
        s.sendall(
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            + chunked
        )
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert ids(json.loads(data.split(b"\r\n\r\n", 1)[1])) == [0, 1]


def test_raw_exchange_helper_sees_content_length(srv):
    data = raw_exchange(srv.port, json.dumps(batch(1)).encode())
    head, body = data.split(b"\r\n\r\n", 1)
    assert b"Content-Length: %d" % len(body) in head

"""SSE replies: one event per element, flushed one by one; cut mid-stream."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from chaos_helpers import batch, client, ids

from pairwatch.chaos import ChaosServer, Fault

SSE = {"Accept": "text/event-stream"}


def events(response: httpx.Response) -> list[tuple[float, object]]:
    """(arrival time, decoded data) per event, read as the bytes arrive."""
    t0 = time.monotonic()
    out = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            out.append((time.monotonic() - t0, json.loads(line[6:])))
    return out


def stream(srv, payload, url=None, headers=None):
    return client().stream("POST", url or srv.url, json=payload, headers=headers or SSE)


def test_accept_header_selects_sse(chaos):
    srv = chaos()
    with stream(srv, batch(3)) as r:
        assert r.headers["content-type"] == "text/event-stream"
        assert r.headers["transfer-encoding"] == "chunked"
        got = events(r)
    assert [d for _, d in got] == [
        {"jsonrpc": "2.0", "id": i, "result": [f"p{i}"]} for i in range(3)
    ]
    both = {"Accept": "application/json, text/event-stream"}
    r = client().post(srv.url, json=batch(2), headers=both)
    assert r.headers["content-type"] == "application/json"
    prefer = {"Accept": "application/json;q=0.5, text/event-stream"}
    with stream(srv, batch(2), headers=prefer) as r:
        assert r.headers["content-type"] == "text/event-stream"


def test_sse_path_query_and_array_mode(chaos):
    srv = chaos()
    with stream(srv, batch(2), url=srv.sse_url, headers={}) as r:
        assert len(events(r)) == 2
    with stream(srv, batch(2), url=srv.url + "?sse=array", headers={}) as r:
        (only,) = events(r)
    assert ids(only[1]) == [0, 1]
    array_srv = chaos(sse="always", sse_mode="array")
    with stream(array_srv, batch(3), headers={}) as r:
        assert len(events(r)) == 1
    with stream(array_srv, batch(3), url=array_srv.url + "?sse=0") as r:
        assert r.headers["content-type"] == "application/json"


def test_single_request_is_one_event(chaos):
    srv = chaos()
    with stream(srv, batch(1)[0]) as r:
        assert [d for _, d in events(r)] == [{"jsonrpc": "2.0", "id": 0, "result": ["p0"]}]


def test_per_element_delays_are_observable(chaos):
    # One second apart, so that a loaded machine (an event read 0.2 s late) cannot close
    # the gap; the server cannot send an event sooner than its delay, only later.
    srv = chaos(Fault("delay", delays=(0.0, 1.0, 2.0)))
    with stream(srv, batch(3)) as r:
        got = events(r)
    times = [t for t, _ in got]
    assert times[1] - times[0] >= 0.5
    assert times[2] - times[1] >= 0.5
    assert ids([d for _, d in got]) == [0, 1, 2]


def test_reorder_and_drop_on_events(chaos):
    srv = chaos([[Fault("drop", indices=(1,)), Fault("reorder")]])
    with stream(srv, batch(4)) as r:
        assert ids([d for _, d in events(r)]) == [3, 2, 0]


def test_cut_mid_stream(chaos):
    srv = chaos(Fault("cut", count=2))
    body = bytearray()

    def read_all():
        with stream(srv, batch(4)) as r:
            for chunk in r.iter_bytes():
                body.extend(chunk)

    with pytest.raises(httpx.RemoteProtocolError):
        read_all()
    whole, _, partial = bytes(body).rpartition(b"\n\n")
    data = [json.loads(e[6:]) for e in whole.split(b"\n\n")]
    assert ids(data) == [0, 1]
    third = b'data: {"jsonrpc":"2.0","id":2,"result":["p2"]}'
    assert partial
    assert third.startswith(partial)
    assert len(partial) < len(third)


def test_unparseable_event(chaos):
    srv = chaos(Fault("unparseable", data=b"not json"))
    with stream(srv, batch(2)) as r:
        assert [x for x in r.iter_lines() if x] == ["data: not json"]


def test_no_reply_on_sse_request_is_empty(chaos):
    srv = chaos()
    r = client().post(srv.url, json={"jsonrpc": "2.0", "method": "echo"}, headers=SSE)
    assert (r.status_code, r.content) == (200, b"")


async def test_async_context_manager_form():
    async with ChaosServer(Fault("reorder")) as srv, httpx.AsyncClient() as ac:
        async with ac.stream("POST", srv.sse_url, json=batch(3)) as r:
            got = [
                json.loads(line[6:]) async for line in r.aiter_lines() if line.startswith("data: ")
            ]
        assert ids(got) == [2, 1, 0]
        assert srv.counts["reorder"] == 1

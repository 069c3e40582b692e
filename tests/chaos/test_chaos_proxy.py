"""HTTP proxy mode: a clean upstream behind the faults, and upstream failures."""

from __future__ import annotations

import socket

from chaos_helpers import batch, client, ids

from pairwatch.chaos import Fault


def test_proxy_applies_faults_to_upstream_replies(chaos):
    upstream = chaos()
    proxy = chaos(
        [Fault("reorder"), [Fault("drop", indices=(0,)), Fault("id_type", indices=(0,))]],
        upstream=upstream.url,
    )
    reply = client().post(proxy.url, json=batch(3)).json()
    assert ids(reply) == [2, 1, 0]
    assert all(r["result"] == [f"p{r['id']}"] for r in reply)
    assert ids(client().post(proxy.url, json=batch(3)).json()) == ["1", 2]
    assert upstream.injected == []
    assert [i.kind for i in proxy.injected] == ["reorder", "drop", "id_type"]
    assert upstream.exchanges == proxy.exchanges == 2


def test_proxy_passes_errors_notifications_and_sse(chaos):
    upstream = chaos()
    proxy = chaos(upstream=upstream.url)
    assert client().post(proxy.url, content=b"[]").json()["error"]["code"] == -32600
    r = client().post(proxy.url, json=[{"jsonrpc": "2.0", "method": "echo"}])
    assert (r.status_code, r.content) == (200, b"")
    with client().stream("POST", proxy.sse_url, json=batch(2)) as s:
        assert sum(1 for line in s.iter_lines() if line.startswith("data: ")) == 2


def test_proxy_passes_unparseable_upstream_bytes(chaos):
    upstream = chaos(Fault("unparseable", data=b"garbage!"))
    proxy = chaos(Fault("reorder"), upstream=upstream.url)
    assert client().post(proxy.url, json=batch(2)).content == b"garbage!"
    assert proxy.injected == []  # nothing to reorder in bytes that are not JSON


def test_proxy_reports_unreachable_upstream_as_502(chaos):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    proxy = chaos(upstream=f"http://127.0.0.1:{dead}/")
    r = client().post(proxy.url, json=batch(1))
    assert r.status_code == 502
    assert r.json()["id"] is None

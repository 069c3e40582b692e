"""Servers on one host are told apart by ``server.port``, in every HTTP client, while
``server.address`` stays the host (what the client/server join of the rules reads)."""

from __future__ import annotations

from http_drivers import instrumenting

from pairwatch.chaos import Fault

BATCH = (
    b'[{"jsonrpc": "2.0", "id": 1, "method": "echo"}, {"jsonrpc": "2.0", "id": 2, "method": "e"}]'
)


def test_two_servers_on_one_host_are_two_ports(otel, chaos, driver):
    name, run = driver
    healthy = chaos()
    dropping = chaos([Fault("drop", indices=(0,))])
    run(healthy.url, BATCH, False, instrumenting(otel))
    run(dropping.url, BATCH, False, instrumenting(otel))
    by_port = {a["server.port"]: a["server.address"] for a in otel.attrs("batch.requests")}
    assert by_port == {healthy.port: "127.0.0.1", dropping.port: "127.0.0.1"}, name
    assert otel.value("batch.missing_response", server__port=dropping.port) == 1
    assert otel.value("batch.missing_response", server__port=healthy.port) == 0

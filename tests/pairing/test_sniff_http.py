"""The structural sniff as the HTTP integrations meet it: a real loopback server, httpx."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from components import need
from jsonrpc_build import dumps, req
from otel_support import PAIRING_COUNTERS, Otel

import pairwatch


class _Reply(BaseHTTPRequestHandler):
    """Answers every POST with one JSON-RPC result for id 1, whatever was sent."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"jsonrpc":"2.0","id":1,"result":"ok"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Reply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def _post(url: str, body: bytes) -> Otel:
    httpx = need("httpx", "pip install -e '.[httpx]'")
    otel = Otel()
    client = pairwatch.instrument(
        httpx.Client(timeout=10), meter_provider=otel.meter_provider, spans=False
    )
    with client:
        reply = client.post(url, content=body, headers={"Content-Type": "application/json"})
    assert reply.status_code == 200  # the client's own exchange is untouched either way
    return otel


def test_an_event_naming_jsonrpc_in_a_value_is_not_tracked(url):
    otel = _post(url, b'{"event":"client_ready","transport":"jsonrpc"}')
    got = otel.counters()
    assert {k: got.get(k, 0) for k in (*PAIRING_COUNTERS, "batch.closed")} == dict.fromkeys(
        (*PAIRING_COUNTERS, "batch.closed"), 0
    )


def test_a_request_is_tracked(url):
    otel = _post(url, dumps(req(1)))
    assert otel.value("batch.closed", pairwatch__diagnosis="ok") == 1
    assert otel.value("batch.requests") == 1

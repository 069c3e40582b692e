"""Nothing prints at interpreter exit, whatever was instrumented, dropped or left open.

A client's entry in pairwatch's table goes when the client is collected, through a weakref
callback.  At interpreter exit that callback may run after the interpreter has set the
module's globals to None; it used to print ``Exception ignored in ... forget`` then.  Each
test runs a real interpreter and reads its stderr, which must stay empty.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

SERVER = """
import json, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args):
        pass
    def do_POST(self):
        sent = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        reply = lambda m: {"jsonrpc": "2.0", "id": m["id"], "result": "0x1"}
        body = json.dumps([reply(m) for m in sent] if isinstance(sent, list) else reply(sent))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

server = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
server.daemon_threads = True
threading.Thread(target=server.serve_forever, daemon=True).start()
URL = "http://127.0.0.1:%d/" % server.server_address[1]
BATCH = json.dumps([{"jsonrpc": "2.0", "id": i, "method": "echo"} for i in range(3)])
"""


def run(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_clients_used_dropped_and_kept_exit_silently():
    out = run(
        SERVER
        + """
import asyncio, gc
import aiohttp, httpx, requests
import pairwatch
from web3 import HTTPProvider, Web3

class Pipe:
    def call(self, payload):
        return [{"jsonrpc": "2.0", "id": m["id"], "result": 1} for m in json.loads(payload)]

kept = []
for i in range(4):
    client = pairwatch.instrument(httpx.Client())
    client.post(URL, content=BATCH)
    session = pairwatch.instrument(requests.Session())
    session.post(URL, data=BATCH)
    pipe = pairwatch.instrument(Pipe(), send="call", receive="call")
    pipe.call(BATCH)
    w3 = pairwatch.instrument(Web3(HTTPProvider(URL)))
    assert w3.eth.chain_id == 1  # the server answers every id with 0x1
    if i % 2:
        kept.append((client, session, pipe, w3))  # alive until the interpreter exits
    del client, session, pipe, w3

async def aio():
    async with aiohttp.ClientSession() as s:
        pairwatch.instrument(s)
        async with s.post(URL, data=BATCH) as r:
            await r.read()

asyncio.run(aio())
gc.collect()
print(pairwatch.api.is_instrumented(kept[0][0]), len(pairwatch.api._handles))
"""
    )
    assert out.returncode == 0, out.stderr
    # two kept rounds of four clients are still in the table; the dropped ones are gone
    assert out.stdout.split() == ["True", "8"]
    assert out.stderr == ""


def test_a_client_collected_after_module_teardown_prints_nothing():
    """The state the interpreter leaves a module in at exit: every global set to None
    (underscore names first).  A client collected then must still go quietly."""
    out = run(
        """
import gc
import httpx, requests
import pairwatch
import pairwatch.api as api

class Pipe:
    def write(self, payload):
        return None
    def read(self):
        return None

clients = [
    pairwatch.instrument(Pipe(), send="write", receive="read"),
    pairwatch.instrument(httpx.Client()),
    pairwatch.instrument(requests.Session()),
]
table = api._handles  # still referenced, as a traceback or a test frame may do
names = sorted(n for n in vars(api) if not n.startswith("__"))
for name in sorted(names, key=lambda n: not n.startswith("_")):
    setattr(api, name, None)
del clients
gc.collect()
print(len(table))
"""
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0"]  # every entry went with its client
    assert out.stderr == ""

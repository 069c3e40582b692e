"""PyPI ``jsonrpcserver`` behind a small stdlib HTTP server, as an application would run it.

``jsonrpcserver`` only dispatches text to text; the transport is the application's.  This
one POSTs the body to ``dispatch`` and answers 200 with its text, or 204 when it returns
nothing (notifications only).  Run as a script it prints its port and serves until killed.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jsonrpcserver import Result, Success, dispatch, method


@method
def ping() -> Result:
    return Success("pong")


@method
def add(a: int, b: int) -> Result:
    return Success(a + b)


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        reply = dispatch(body.decode("utf-8", "replace")).encode()
        self.send_response(200 if reply else 204)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:
        pass


def serve() -> tuple[ThreadingHTTPServer, threading.Thread]:
    """Start on a free loopback port in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


if __name__ == "__main__":
    srv, _ = serve()
    print(srv.server_address[1], flush=True)
    threading.Event().wait()
    sys.exit(0)

"""Real servers on 127.0.0.1 for the middleware tests: uvicorn (ASGI) and waitress (WSGI).

Both run in a thread of the test process, so the test reads the server side's metrics and
spans from the same in-memory reader and exporter it gives the middleware.  Startup is
polled (uvicorn's ``started`` flag, a connect to waitress's port), never slept on.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

JSON = "application/json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Any, timeout: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


@contextlib.contextmanager
def uvicorn_server(app: Any) -> Iterator[str]:
    """``app`` under a real uvicorn on a free port; yields its base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), what="uvicorn")
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def waitress_server(app: Any) -> Iterator[str]:
    """``app`` under a real waitress on a free port; yields its base URL."""
    import waitress.server

    server = waitress.server.create_server(app, host="127.0.0.1", port=0, threads=2)
    port = server.effective_port  # type: ignore[union-attr]
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()

    def listening() -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return True
        return False

    try:
        wait_until(listening, what="waitress")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        thread.join(10)


# ------------------------------------------------------------------ the JSON-RPC behaviour
# One set of rules both test apps (Starlette and plain WSGI) answer by, so each reply the
# tests count is one the test chose: a method name picks what the server does wrong.


def answer(element: Any) -> dict[str, Any] | None:
    """The reply to one request element, or None when none is sent."""
    if not isinstance(element, dict) or "method" not in element:
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Invalid"}}
    method, has_id = element["method"], "id" in element
    rid = element.get("id")
    if method == "drop":  # the server never answers this one
        return None
    if method == "chatty":  # answers even when it is a notification
        return {"jsonrpc": "2.0", "id": rid, "result": "chatty"}
    if not has_id:
        return None
    if method == "null_id":
        return {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "lost it"}}
    if method == "no_version":
        return {"id": rid, "result": 1}
    if method == "both":
        return {"jsonrpc": "2.0", "id": rid, "result": 1, "error": {"code": 1, "message": "x"}}
    if method == "bad_error":
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": "oops"}}
    return {"jsonrpc": "2.0", "id": rid, "result": element.get("params")}


def answer_body(body: bytes, *, reverse: bool = False, as_object: bool = False) -> bytes:
    """The whole reply body for a request body ("" when nothing is answered)."""
    try:
        value = json.loads(body)
    except ValueError:
        return json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
        ).encode()
    if isinstance(value, list):
        replies = [r for r in (answer(e) for e in value) if r is not None]
        if reverse:
            replies.reverse()
        if not replies:
            return b""
        return json.dumps(replies[0] if as_object else replies).encode()
    reply = answer(value)
    return b"" if reply is None else json.dumps(reply).encode()


def call(rid: int, method: str = "echo", params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or [rid]}


def note(method: str = "log") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method}


def raw_exchange(base: str, path: str, body: bytes) -> bytes:
    """One POST on a fresh socket, every byte until the server closes, minus the Date header
    (the only line two servers may legitimately differ in)."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {JSON}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        s.sendall(head.encode() + body)
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
    lines = b"".join(chunks).split(b"\r\n")
    return b"\r\n".join(line for line in lines if not line.lower().startswith(b"date:"))

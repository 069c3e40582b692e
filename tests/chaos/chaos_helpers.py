"""Plain helpers shared by the chaos tests (imported by module name)."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import httpx

SRC = Path(__file__).resolve().parents[2] / "src"


def batch(n: int, method: str = "echo") -> list[dict[str, Any]]:
    """n requests with ids 0..n-1, each echoing a param unique to it."""
    return [{"jsonrpc": "2.0", "id": i, "method": method, "params": [f"p{i}"]} for i in range(n)]


def ids(reply: Any) -> list[Any]:
    return [r.get("id") for r in reply] if isinstance(reply, list) else [reply.get("id")]


def subprocess_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    return env


def raw_exchange(port: int, body: bytes, *, extra_headers: str = "") -> bytes:
    """One POST on a fresh socket; returns every byte until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        head = (
            f"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n{extra_headers}\r\n"
        )
        s.sendall(head.encode() + body)
        chunks = []
        while data := s.recv(65536):
            chunks.append(data)
        return b"".join(chunks)


_client: httpx.Client | None = None


def client() -> httpx.Client:
    """One shared client: building an httpx.Client costs ~40 ms (SSL context)."""
    global _client
    if _client is None:
        _client = httpx.Client(timeout=5)
    return _client

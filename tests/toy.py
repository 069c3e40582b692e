"""A toy JSON-RPC client and an in-process server with scripted faults.

In-process on purpose: these tests are about the generic wrapper (which sees only method
calls), not about a transport; real sockets are exercised by the integration tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


def server(fault: str | None = None) -> Callable[[bytes], bytes]:
    def handle(body: bytes) -> bytes:
        batch = json.loads(body)
        single = not isinstance(batch, list)
        items = [batch] if single else batch
        replies = [
            {"jsonrpc": "2.0", "id": e["id"], "result": e.get("params")} for e in items if "id" in e
        ]
        if fault == "reorder":
            replies.reverse()
        elif fault == "drop":
            replies = replies[:-1]
        elif fault == "null" and replies:
            replies[0]["id"] = None
        if single:
            return json.dumps(replies[0]).encode() if replies else b""
        return json.dumps(replies).encode()

    return handle


class ToyClient:
    """Sends on one method, reads on another, like a socket-based client."""

    def __init__(self, handler: Callable[[bytes], bytes]) -> None:
        self.handler = handler
        self.inbox: list[bytes] = []

    def send(self, body: bytes) -> int:
        if body == b"boom":
            raise ConnectionError("server went away")
        self.inbox.append(self.handler(body))
        return len(body)

    def receive(self) -> bytes:
        if not self.inbox:
            raise TimeoutError("nothing to read")
        return self.inbox.pop(0)

    def call(self, body: bytes) -> bytes:
        self.send(body)
        return self.receive()

    def close(self) -> None:
        self.inbox.clear()


class AsyncToyClient(ToyClient):
    async def asend(self, payload: Any) -> None:
        self.inbox.append(self.handler(json.dumps(payload).encode()))

    async def areceive(self) -> Any:
        return json.loads(self.inbox.pop(0))


class Encoder:
    """An encode method that returns the body, the send-by-return-value form."""

    def __init__(self) -> None:
        self.next_id = 0

    def encode(self, method: str) -> bytes:
        self.next_id += 1
        return json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method}).encode()

    def decode(self, raw: bytes) -> Any:
        return json.loads(raw)

"""``pairwatch demo --transport lsp``: a language-server session against the chaos server.

The server is the chaos server's LSP mode (:mod:`pairwatch.chaos.lsp_transport`) on one end
of a socket pair, in this process so that its record can be read; the client is what a
home-grown LSP client is, a few dozen lines on the other end, instrumented with one line
(``pairwatch.instrument_streams``).  Each step sends ``batch_size`` requests at once, each
its own frame, and waits briefly for their replies: a reply the server dropped stays pending
until pairwatch's timeout, as it would in a real client.

What the counters must read comes from the server's side, per exchange, by the stream's
rules (:func:`pairwatch.cli.expected.tally_stream`); the fault kinds are the ones a language
server can commit on single requests (no batches, so no reordering within one).
"""

from __future__ import annotations

import itertools
import json
import random
import socket
import threading
from concurrent.futures import Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import pairwatch
from pairwatch.chaos import Engine, FaultMix
from pairwatch.chaos.faults import Outgoing
from pairwatch.chaos.lsp_transport import LspServerThread, lsp_backend
from pairwatch.cli.expected import CHECKED, tally_stream
from pairwatch.integrations._kit.framing import FrameParser, frame

__all__ = ["KINDS", "LspSession"]

KINDS = ("drop", "duplicate", "null_id", "wrong_id", "delay")
"""Faults of a language server answering single requests."""
METHODS = ("textDocument/hover", "textDocument/definition", "echo")
WAIT = 0.5  # seconds a step waits for its replies


class _Client:
    """A minimal LSP client on a socket: integer ids, replies resolved by id by a reader
    thread, the server's own requests answered."""

    def __init__(self, reader: Any, writer: Any) -> None:
        self.reader_sock, self.writer_sock = reader, writer
        self.ids = itertools.count(1)
        self.waiting: dict[int, Future[Any]] = {}
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, name="lsp-demo-client", daemon=True)
        self.reader.start()

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            self.writer_sock.sendall(frame(json.dumps(message).encode()))

    def request(self, method: str, params: Any = None) -> Future[Any]:
        key = next(self.ids)
        future: Future[Any] = Future()
        self.waiting[key] = future
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": key, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return future

    def _read(self) -> None:
        parser = FrameParser(1 << 24)
        try:
            while chunk := self.reader_sock.recv(65536):
                for body in parser.feed(chunk):
                    self._take(body)
        except OSError:
            pass

    def _take(self, body: object) -> None:
        try:
            message = json.loads(body) if isinstance(body, bytes) else None
        except ValueError:
            return
        if not isinstance(message, dict):
            return
        if "method" in message and "id" in message:  # the server asks: answer it
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            return
        key = message.get("id")
        future = self.waiting.pop(key, None) if isinstance(key, int) else None
        if future is not None:
            future.set_result(message)


class LspSession:
    """The server thread, the instrumented client, the driver and the server's record."""

    def __init__(
        self,
        probabilities: dict[str, float],
        templates: dict[str, Any],
        *,
        seed: int,
        batch_size: int,
        provider: Any,
        timeout: float,
    ) -> None:
        plan = FaultMix(probabilities, seed=seed, templates=templates) if probabilities else None
        self.engine = Engine(lsp_backend(), plan)
        self.expected = {name: 0 for name in CHECKED}
        self._record_lock = threading.Lock()
        answer = self.engine.exchange

        async def recorded(body: bytes) -> Outgoing:
            out = await answer(body)
            counts = tally_stream(json.loads(body), out)
            with self._record_lock:
                for name, value in counts.items():
                    self.expected[name] += value
            return out

        self.engine.exchange = recorded  # type: ignore[method-assign]
        client_end, server_end = socket.socketpair()
        self.server = LspServerThread(self.engine, server_end).start()
        reader, writer = pairwatch.instrument_streams(  # the one line
            client_end, client_end, meter_provider=provider, timeout=timeout
        )
        self.client = _Client(reader, writer)
        self._socket = client_end
        self.rng = random.Random(seed)
        self.batch_size = batch_size
        self.errors = 0
        self.sent = 0
        self.client.request("initialize", {"capabilities": {}}).result(WAIT * 5)
        with self._record_lock:  # the view counts from here; initialize came before it
            self.expected = {name: 0 for name in CHECKED}

    def step(self) -> None:
        """``batch_size`` requests in flight at once, each its own frame."""
        futures = [
            self.client.request(self.rng.choice(METHODS), {"n": self.rng.randrange(1000)})
            for _ in range(self.batch_size)
        ]
        self.sent += 1
        _, unanswered = wait(futures, WAIT)  # one deadline for the step
        self.errors += len(unanswered)  # a dropped or mangled reply: the client never hears

    def close(self) -> None:
        """Shut down in order: ``shutdown``, ``exit``, then the server ends the stream."""
        try:
            self.client.request("shutdown").result(WAIT)
        except FutureTimeout:
            self.errors += 1
        self.client.send({"jsonrpc": "2.0", "method": "exit"})
        with self._record_lock:
            self.expected["batch.closed"] += 1  # exit: handled outside the fault plan
        self.server.join(5)
        self.client.reader.join(5)
        self._socket.close()

    def snapshot(self) -> dict[str, int]:
        with self._record_lock:
            return dict(self.expected)

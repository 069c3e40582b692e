"""Opt-in payload capture: redacted, truncated request and response text on per-id spans.

Off by default, because params and results are the user's data: nothing of a payload goes to
spans, logs or metrics unless ``Options(capture_payloads=True)``.  Then each request and
its response are passed through ``redact`` (which sees the decoded message and returns what
may be recorded, or ``None`` for nothing), serialised, and cut to ``max_payload_bytes``.
A redact hook that raises records nothing for that message: capture fails closed.

Text is kept per channel only while its request is pending and handed to the batch when it
closes, so capture never outlives the books.  What is kept is bounded three ways: at most
``max_entries`` ids, :data:`PER_ID` texts per id (a client reusing one id, or a server
answering it 150,000 times, gets no more), and ``per_payload`` requests of one payload (only
that many child spans can carry them).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Final

from pairwatch.pairing import wire
from pairwatch.pairing.records import Batch
from pairwatch.runtime import guard

TRUNCATED: Final = "...[truncated]"
PER_ID: Final = 4
"""Texts kept per id and direction; a response is kept only while a request text awaits it."""

Redact = Callable[[Any], Any]


def _elements(raw: object) -> list[Any]:
    if isinstance(raw, (bytes, bytearray, memoryview, str)):
        raw, problem = wire.decode(raw)
        if problem is not None:
            return []
    return raw if isinstance(raw, list) else [raw]


class Capture:
    """One channel's pending payload text, keyed by request id."""

    __slots__ = (
        "_limit", "_lock", "_max_entries", "_per_payload", "_redact", "_requests", "_responses",
    )  # fmt: skip

    def __init__(
        self, max_bytes: int, redact: Redact | None, max_entries: int, per_payload: int = 1024
    ) -> None:
        self._limit = max(0, max_bytes)
        self._redact = redact
        self._max_entries = max_entries
        self._per_payload = per_payload
        self._requests: dict[wire.IdKey, list[str | None]] = {}
        self._responses: dict[wire.IdKey, list[str | None]] = {}
        self._lock = threading.Lock()

    def text(self, message: Any) -> str | None:
        """What may be recorded of one message: redacted, serialised, truncated."""
        try:
            value = self._redact(message) if self._redact is not None else message
            if value is None:
                return None
            text = json.dumps(value, ensure_ascii=False, default=str)
        except Exception as exc:  # fail closed: a broken redact hook records nothing
            guard.report("redact", exc, None)
            return None
        data = text.encode("utf-8", "replace")
        if len(data) <= self._limit:
            return text
        return data[: self._limit].decode("utf-8", "ignore") + TRUNCATED

    def sent(self, raw: object) -> None:
        room = self._per_payload
        for element in _elements(raw):
            if isinstance(element, dict) and "method" in element and "id" in element:
                if room <= 0:
                    return
                room -= 1
                self._keep(self._requests, element, check_pending=False)

    def received(self, raw: object) -> None:
        for element in _elements(raw):
            if isinstance(element, dict) and "method" not in element and "id" in element:
                self._keep(self._responses, element, check_pending=True)

    def _keep(self, table: dict[wire.IdKey, list[str | None]], element: Any, *,
              check_pending: bool) -> None:  # fmt: skip
        _state, key = wire.id_key(element["id"])
        if key is None:
            return
        with self._lock:
            if check_pending:
                awaiting = self._requests.get(key)
                if awaiting is None:
                    return  # an unknown id: nothing will ever take it
                cap = len(awaiting)  # one response per request text, no more
            else:
                cap = PER_ID
            texts = table.get(key)
            if texts is None:
                if len(table) >= self._max_entries:
                    return
                texts = table[key] = []
            elif len(texts) >= cap:
                return
            texts.append(self.text(element))

    def attach(self, batch: Batch) -> None:
        """Hand a closing batch the text of its requests and responses, and forget it."""
        found: dict[int, tuple[str | None, str | None]] = {}
        with self._lock:
            for index, key in enumerate(batch.keys):
                if key is None:
                    continue
                request = _take(self._requests, key)
                response = _take(self._responses, key) if batch.received[index] else None
                if request is not None or response is not None:
                    found[index] = (request, response)
        batch.captured = found or None


def _take(table: dict[wire.IdKey, list[str | None]], key: wire.IdKey) -> str | None:
    texts = table.get(key)
    if not texts:
        return None
    text = texts.pop(0)
    if not texts:
        del table[key]
    return text

"""Opt-in payload capture: redacted, truncated request and response text on per-id spans.

Off by default, because params and results are the user's data: nothing of a payload goes to
spans, logs or metrics unless ``Options(capture_payloads=True)``.  Then each request and
its response are passed through ``redact`` (which sees the decoded message and returns what
may be recorded, or ``None`` for nothing), serialised, and cut to ``max_payload_bytes``.
A redact hook that raises records nothing for that message: capture fails closed.

Text is kept per channel only while its request is pending (at most ``max_pending_ids``
entries) and handed to the batch when it closes, so capture never outlives the books.
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

Redact = Callable[[Any], Any]


def _elements(raw: object) -> list[Any]:
    if isinstance(raw, (bytes, bytearray, memoryview, str)):
        raw, problem = wire.decode(raw)
        if problem is not None:
            return []
    return raw if isinstance(raw, list) else [raw]


class Capture:
    """One channel's pending payload text, keyed by request id."""

    __slots__ = ("_limit", "_lock", "_max_entries", "_redact", "_requests", "_responses")

    def __init__(self, max_bytes: int, redact: Redact | None, max_entries: int) -> None:
        self._limit = max(0, max_bytes)
        self._redact = redact
        self._max_entries = max_entries
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
        for element in _elements(raw):
            if isinstance(element, dict) and "method" in element and "id" in element:
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
            if check_pending and key not in self._requests:
                return  # an unknown id: nothing will ever take it
            if key not in table and len(table) >= self._max_entries:
                return
            table.setdefault(key, []).append(self.text(element))

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

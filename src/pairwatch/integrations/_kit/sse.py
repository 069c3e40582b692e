"""An incremental ``text/event-stream`` parser for the HTTP taps.

Why an incremental SSE parser here rather than a library: the caller's own SSE reader (if
any) must keep the bytes; pairwatch parses a copy, chunk by chunk, so that each event's
responses are paired at that event's arrival (latency per event, not per stream).
"""

from __future__ import annotations

import re
from typing import Final

from pairwatch.integrations._kit.body import MAX_BODY

__all__ = ["SseParser"]

_EOL: Final = re.compile(rb"\r\n|\r|\n")
_DISPATCHED_EVENTS: Final = frozenset({b"", b"message"})


class SseParser:
    """Incremental ``text/event-stream`` parser that yields each complete event's data.

    Handles lines split across chunks, CRLF split between two chunks, CR-only and LF-only
    line ends, multi-line ``data`` (joined with ``\\n``), comments and a leading BOM.  Only
    events of the default type or ``message`` are returned: other event types (pings,
    endpoint announcements) are not JSON-RPC traffic.  An event still incomplete when the
    stream ends is discarded, as the SSE specification says.

    Linear in the bytes: each chunk is scanned once, and a line still open at its end is
    kept as pieces, joined once when its end comes (re-scanning what is kept on every chunk
    made one 16 MB line cost minutes).  ``held`` is what the parser keeps (the open line and
    the event's data so far), which the tap charges to the body budget; past
    :data:`~pairwatch.integrations._kit.body.MAX_BODY` in one line or one event it drops
    what it holds and sets ``overflow``.
    """

    __slots__ = (
        "_data", "_data_size", "_event", "_line", "_line_size", "_skip_lf", "_started",
        "overflow",
    )  # fmt: skip

    def __init__(self) -> None:
        self._line: list[bytes] = []  # pieces of the line still open
        self._line_size = 0
        self._data: list[bytes] = []
        self._data_size = 0
        self._event = b""
        self._skip_lf = False
        self._started = False
        self.overflow = False

    @property
    def held(self) -> int:
        """Bytes kept for lines and events not complete yet."""
        return self._line_size + self._data_size

    def feed(self, chunk: bytes) -> list[bytes]:
        """Take the next chunk; return the data of every event it completed, in order."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not self._started:
            head = b"".join(self._line) + chunk if self._line else chunk
            if len(head) < 3 and b"\xef\xbb\xbf".startswith(head):
                self._line, self._line_size = [head], len(head)
                return []
            self._started = True
            self._line, self._line_size = [], 0
            chunk = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
        events: list[bytes] = []
        start = 0
        size = len(chunk)
        for match in _EOL.finditer(chunk):
            end = match.start()
            if self._line:
                self._line.append(chunk[start:end])
                line = b"".join(self._line)
                self._line, self._line_size = [], 0
            else:
                line = chunk[start:end]
            if match.end() == size and chunk[end:] == b"\r":
                self._skip_lf = True  # the LF of a CRLF may open the next chunk
            self._dispatch(line, events)
            start = match.end()
        if start < size:
            rest = chunk[start:]
            self._line_size += len(rest)
            if self._line_size > MAX_BODY:
                self._overflow()
            else:
                self._line.append(rest)
        return events

    def _overflow(self) -> None:
        self.overflow = True
        self._line, self._line_size = [], 0
        self._data, self._data_size = [], 0

    def _dispatch(self, line: bytes, events: list[bytes]) -> None:
        if not line:
            if self._data and self._event in _DISPATCHED_EVENTS:
                data = b"\n".join(self._data)
                if data:  # one empty data line dispatches nothing
                    events.append(data)
            self._data = []
            self._data_size = 0
            self._event = b""
            return
        if line[:1] == b":":
            return  # a comment (keep-alive)
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._data_size += len(value)
            if self._data_size > MAX_BODY:
                self._overflow()
                return
            self._data.append(value)
        elif field == b"event":
            self._event = value

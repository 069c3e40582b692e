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
    """

    __slots__ = ("_buf", "_data", "_data_size", "_event", "_skip_lf", "_started", "overflow")

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[bytes] = []
        self._data_size = 0
        self._event = b""
        self._skip_lf = False
        self._started = False
        self.overflow = False

    def feed(self, chunk: bytes) -> list[bytes]:
        """Take the next chunk; return the data of every event it completed, in order."""
        if not chunk:
            return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        data = self._buf + chunk if self._buf else chunk
        if not self._started:
            if len(data) < 3 and b"\xef\xbb\xbf".startswith(data):
                self._buf = data
                return []
            self._started = True
            if data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]
        events: list[bytes] = []
        start = 0
        for match in _EOL.finditer(data):
            end = match.start()
            if match.group() == b"\r" and match.end() == len(data):
                self._skip_lf = True  # the LF of a CRLF may open the next chunk
            self._line(data[start:end], events)
            start = match.end()
        rest = data[start:]
        if len(rest) > MAX_BODY:
            self.overflow = True
            rest = b""
        self._buf = rest
        return events

    def _line(self, line: bytes, events: list[bytes]) -> None:
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
                self.overflow = True
                self._data = []
                return
            self._data.append(value)
        elif field == b"event":
            self._event = value

"""Raw stdio transcripts (the MCP stdio shape) as pairing steps.

One JSON-RPC message per line, tagged with its direction, optionally preceded by a time::

    > {"jsonrpc": "2.0", "id": 1, "method": "initialize"}
    < {"jsonrpc": "2.0", "id": 1, "result": {}}
    [1712664000.250] --> {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    2024-04-09T12:00:00.300Z <-- {"jsonrpc": "2.0", "id": 2, "result": {}}

``>``, ``->`` or ``-->`` mark what the client sent; ``<``, ``<-`` or ``<--`` what it
received.  Blank lines and lines starting with ``#`` are ignored.  The whole file is one
channel (one pipe); its end closes what is still pending as ``stream_end``.  The message
text is fed as written, so a half-written last line counts as an unparseable reply; a line
that is JSON but not JSON-RPC by structure is skipped and counts nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO, Final

from pairwatch.audit.base import (
    CaptureError,
    Direction,
    Progress,
    ReadStats,
    Step,
    foreign,
    parse_time,
    read_lines,
)

MARKERS: Final[tuple[tuple[str, Direction], ...]] = (
    ("-->", "sent"),
    ("<--", "received"),
    ("->", "sent"),
    ("<-", "received"),
    (">", "sent"),
    ("<", "received"),
)


def read(stream: BinaryIO, path: str, progress: Progress, stats: ReadStats) -> Iterator[Step]:
    stats.unit = "line"
    for number, text in read_lines(stream, path, progress, stats):
        stats.units += 1
        line = text.strip()
        if not line or line.startswith("#"):
            continue
        where = f"line {number}"
        ts, direction, body = split(line)
        if direction is None:
            raise CaptureError(
                path,
                where,
                "not tagged as sent or received: start the line with '> ' or '< ' "
                "(or '-->' / '<--'), optionally after a time",
            )
        if foreign(body):
            stats.skipped["not JSON-RPC"] += 1  # e.g. a JSON log record on the server's stdout
            continue
        if ts is None:
            stats.timed = False
        yield Step(direction, "stdio", ts, body, where, "stdio")


def _marker(text: str) -> tuple[Direction | None, str]:
    for marker, direction in MARKERS:
        if text.startswith(marker):
            return direction, text[len(marker) :].lstrip()
    return None, text


def split(line: str) -> tuple[float | None, Direction | None, str]:
    """Split ``[time] marker message`` into its parts; direction ``None`` if untagged."""
    direction, body = _marker(line)
    if direction is not None:
        return None, direction, body
    head, _, rest = line.partition(" ")
    ts = parse_time(head.strip("[]"))
    if ts is None:
        return None, None, line
    direction, body = _marker(rest.lstrip())
    return ts, direction, body

"""JSON Lines message logs as pairing steps.

One JSON object per line, in the order the messages crossed the wire::

    {"ts": 1712664000.25, "dir": "sent", "channel": "ws-1", "message": {...}}
    {"ts": "2024-04-09T12:00:00.300Z", "dir": "received", "channel": "ws-1", "raw": "[...]"}
    {"ts": 1712664009.0, "dir": "closed", "channel": "ws-1", "reason": "stream_dropped"}

``dir`` (or ``direction``) is required; ``message`` holds the decoded JSON and ``raw`` the
text as it was on the wire (so unparseable replies stay countable).  ``channel`` groups the
lines that share one pending table (default: one channel for the file); ``transport`` labels
it (``http`` and ``sse`` channels are single bound exchanges).  A message that is JSON but
not JSON-RPC by structure (:func:`pairwatch.audit.base.foreign`) is skipped and counts
nothing.  A file is a line stream, so the audit never holds more than one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import BinaryIO, Final

from pairwatch.audit.base import (
    TRANSPORTS,
    CaptureError,
    Direction,
    Progress,
    ReadStats,
    Step,
    foreign,
    parse_time,
    read_lines,
)

DIRECTIONS: Final[dict[str, Direction]] = {
    "sent": "sent",
    "send": "sent",
    "out": "sent",
    "received": "received",
    "receive": "received",
    "recv": "received",
    "in": "received",
    "closed": "closed",
    "close": "closed",
}


def read(stream: BinaryIO, path: str, progress: Progress, stats: ReadStats) -> Iterator[Step]:
    stats.unit = "line"
    for number, text in read_lines(stream, path, progress, stats):
        stats.units += 1
        if not text.strip():
            continue
        step = _line(text, f"line {number}", path, stats)
        if step.direction != "closed" and foreign(step.payload):
            stats.skipped["not JSON-RPC"] += 1
            continue
        yield step


def _line(text: str, where: str, path: str, stats: ReadStats) -> Step:
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CaptureError(path, where, f"not a JSON object ({exc})") from None
    if not isinstance(record, dict):
        raise CaptureError(path, where, "expected a JSON object per line")
    raw_dir = record.get("dir", record.get("direction"))
    direction = DIRECTIONS.get(str(raw_dir).lower()) if raw_dir is not None else None
    if direction is None:
        what = "no direction field" if raw_dir is None else f"unknown direction {raw_dir!r}"
        raise CaptureError(path, where, f'{what}: "dir" must be "sent", "received" or "closed"')
    ts = None
    for key in ("ts", "time", "timestamp"):
        if key in record:
            ts = parse_time(record[key])
            if ts is None:
                raise CaptureError(
                    path, where, f"{key!r} is neither a number of seconds nor an ISO-8601 time"
                )
            break
    else:
        stats.timed = False
    transport = str(record.get("transport", "generic"))
    if transport not in TRANSPORTS:
        raise CaptureError(
            path, where, f"unknown transport {transport!r}; one of {', '.join(sorted(TRANSPORTS))}"
        )
    channel = record.get("channel")
    name = "default" if channel is None else str(channel)
    server = record.get("server")
    payload: object
    if direction == "closed":
        payload = str(record.get("reason", "stream_end"))
    elif "message" in record:
        payload = record["message"]
    elif isinstance(record.get("raw"), str):
        payload = record["raw"]
    else:
        raise CaptureError(path, where, 'a sent or received line needs "message" or "raw"')
    return Step(
        direction,
        name,
        ts,
        payload,
        where,
        transport,
        transport in ("http", "sse"),
        server if isinstance(server, str) else None,
    )

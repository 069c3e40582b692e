"""What every capture reader produces, and the errors it raises.

Readers know one file format and nothing about pairing: they turn a capture into a stream of
:class:`Step` values (sent, received, closed, each on a named channel at a capture time), so
the feeder can drive the same :class:`pairwatch.Channel` the live path uses.  Keeping readers
this dumb is what makes the audit's counters mean exactly what the live counters mean.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, Final, Literal

from pairwatch.pairing import wire

Direction = Literal["sent", "received", "closed"]

TRANSPORTS: Final = frozenset({"http", "sse", "stdio", "websocket", "generic"})


class CaptureError(Exception):
    """A capture that cannot be read: names the file and the line or entry at fault.

    The CLI prints it as one line and exits with status 2; it is never shown as a traceback.
    """

    def __init__(self, path: str, where: str, message: str) -> None:
        self.path = path
        self.where = where
        self.message = message
        super().__init__(f"{path}: {where}: {message}" if where else f"{path}: {message}")


@dataclass(slots=True)
class Step:
    """One event of a capture, in capture order.

    ``channel`` names what responses come back on (a HAR entry, a JSONL channel id, the stdio
    pipe); ``ts`` is the capture's time in seconds (``None`` when the capture has none);
    ``payload`` is what crossed the wire (text, bytes, or decoded JSON) or, for ``closed``,
    the close reason.  ``where`` locates the step in the file for the report and errors.
    """

    direction: Direction
    channel: str
    ts: float | None
    payload: object
    where: str
    transport: str = "generic"
    bound: bool = False
    server: str | None = None


@dataclass
class ReadStats:
    """What a reader saw besides the steps: units read, what it skipped and why, and the
    bodies the capture does not hold (``absent``: by what and why), which make the exchanges
    they belong to unknowable rather than clean."""

    unit: str = "line"
    units: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    absent: Counter[str] = field(default_factory=Counter)
    attached: int = 0  # bodies read from side files rather than from the capture itself
    timed: bool = True


StepReader = Iterator[Step]


def foreign(payload: object) -> bool:
    """Whether a message of a stream capture is JSON that is not JSON-RPC, judged by structure.

    Such a message (an analytics event, a log record a server wrote to its stdout) counts
    nothing: it is skipped, as the live integrations skip a body :func:`wire.sniff` rejects.
    Text that is not JSON at all is *not* foreign: a reply cut mid-way is exactly what the
    pairing must count as unparseable, so it goes through.
    """
    if isinstance(payload, (str, bytes, bytearray)):
        if wire.sniff(payload):
            return False
        try:
            json.loads(payload)
        except (ValueError, RecursionError):
            return False
        return True
    if isinstance(payload, list) and not payload:
        return False  # the empty batch: only its reply can settle it (the ledger holds it)
    return not wire.is_jsonrpc(payload)


def parse_time(value: object) -> float | None:
    """Seconds from a number or an ISO-8601 string (``Z`` allowed); ``None`` if neither."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        f = float(value)
        return f if math.isfinite(f) else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = _dt.datetime.fromisoformat(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment.timestamp()


class Progress:
    """Tracks how far through a file the reader is, for the progress bar.

    Readers call :meth:`advance` with bytes consumed; the bar (if any) polls :attr:`done`.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0

    def advance(self, nbytes: int) -> None:
        self.done += nbytes


MAX_LINE: Final = 64 * 1024 * 1024
"""Bytes of one line of a line capture (JSON Lines, stdio transcripts), the HTTP body cap."""

_SKIP_STEP: Final = 1024 * 1024


def read_lines(
    stream: BinaryIO, path: str, progress: Progress, stats: ReadStats | None = None
) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, text)`` from a binary stream, one line in memory at a time.

    Bytes that are not UTF-8 are a capture error naming the line: binary garbage must not
    turn into a traceback or into silently skipped data.  A line longer than
    :data:`MAX_LINE` is skipped in steps of constant size (a file with no newline at all
    must not be read into memory whole) and counted in ``stats.skipped``.
    """
    number = 0
    while True:
        raw = stream.readline(MAX_LINE + 1)
        if not raw:
            return
        number += 1
        progress.advance(len(raw))
        if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
            del raw
            while True:  # the rest of the line, a step at a time
                rest = stream.readline(_SKIP_STEP)
                progress.advance(len(rest))
                if not rest or rest.endswith(b"\n"):
                    break
            if stats is not None:
                stats.units += 1
                stats.skipped[f"line over {MAX_LINE // (1024 * 1024)} MiB"] += 1
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CaptureError(
                path, f"line {number}", f"not UTF-8 text (byte {exc.start}): binary data?"
            ) from None
        if number == 1:
            text = text.removeprefix("\ufeff")
        yield number, text.rstrip("\r\n")

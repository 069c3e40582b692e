"""HAR exports (browser developer tools, mitmproxy) as pairing steps.

Each HAR entry is one HTTP exchange, so it becomes one *bound* channel: everything in its
response body belongs to the batch in its request body, exactly as the live HTTP integrations
see it.  Times come from the entry: the request counts as sent once the connection was ready
(``startedDateTime`` + blocked + dns + connect) and the response as received when the entry
ended (``startedDateTime`` + ``time``).  HAR has no per-event times, so every event of a
``text/event-stream`` body is taken as received when the stream ended; as in the live HTTP
integration, an event carrying one element of a batch reply counts as part of that reply.

Whether an entry is JSON-RPC is decided by the structure of its decoded request body
(:func:`pairwatch.pairing.wire.sniff`), never by a substring: an analytics beacon
``{"event": "client_ready", "transport": "jsonrpc"}`` is skipped and counts nothing, and so are
pages, images and GETs.

A body the recorder did not keep is *absent*, not empty: Playwright's ``content: "omit"``
leaves ``postData.text`` blank with a non-zero ``bodySize`` and drops ``response.content.text``
while keeping its ``size``; ``content: "attach"`` points at a side file (``_file``), read here
through :mod:`pairwatch.audit.sidefiles`.  Absent bodies are tallied in
:attr:`ReadStats.absent` so the report can say the capture cannot be judged, instead of
"no JSON-RPC traffic found".
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Any, BinaryIO, Final
from urllib.parse import urlsplit

from pairwatch.audit.base import (
    CaptureError,
    Direction,
    Progress,
    ReadStats,
    Step,
    parse_time,
)
from pairwatch.audit.jsonstream import har_entries
from pairwatch.audit.sidefiles import SideFiles
from pairwatch.pairing import wire

OMITTED: Final = "omitted when recorded"
SIDE_FILE_MISSING: Final = "in a side file that is not there"


def read(
    stream: BinaryIO,
    path: str,
    progress: Progress,
    stats: ReadStats,
    side: SideFiles | None = None,
) -> Iterator[Step]:
    """Steps from a HAR; ``side`` finds bodies stored outside it (``_file``)."""
    stats.unit = "entry"
    for index, entry in enumerate(har_entries(stream, path, progress)):
        stats.units += 1
        yield from _entry(entry, index, path, stats, side)


class Body:
    """A body as the entry holds it: the bytes or text, or why it is absent."""

    __slots__ = ("absent", "attached", "data")

    def __init__(
        self, data: bytes | str | None, absent: str | None = None, *, attached: bool = False
    ) -> None:
        self.data = data
        self.absent = absent
        self.attached = attached


def _body(
    holder: dict[str, Any],
    path: str,
    where: str,
    what: str,
    side: SideFiles | None,
    size: object,
) -> Body:
    """Read one body; ``size`` is what the recorder says it measured on the wire."""
    text = holder.get("text")
    if text is not None and not isinstance(text, str):
        raise CaptureError(path, where, f"{what}.text is not a string")
    if text:
        if str(holder.get("encoding", "")).lower() == "base64":
            try:
                return Body(base64.b64decode(text, validate=True))
            except (binascii.Error, ValueError):
                raise CaptureError(path, where, f"{what}.text is not valid base64") from None
        return Body(text)
    name = holder.get("_file")
    if isinstance(name, str) and name:
        data = side.read(name) if side is not None else None
        return Body(data, attached=True) if data is not None else Body(None, SIDE_FILE_MISSING)
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        return Body(None, OMITTED)  # bytes crossed the wire, the capture kept none of them
    return Body(text)


def _ms(value: object) -> float:
    """A HAR timing in milliseconds; ``-1`` and junk mean "does not apply"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return 0.0


def _header(message: dict[str, Any], name: str) -> str:
    headers = message.get("headers")
    if isinstance(headers, list):
        for h in headers:
            if isinstance(h, dict) and str(h.get("name", "")).lower() == name:
                return str(h.get("value", ""))
    return ""


def _entry(
    entry: object, index: int, path: str, stats: ReadStats, side: SideFiles | None
) -> Iterator[Step]:
    where = f"entry {index} (log.entries[{index}])"
    if not isinstance(entry, dict):
        raise CaptureError(path, where, "not a JSON object")
    request = entry.get("request")
    if not isinstance(request, dict):
        raise CaptureError(path, where, "has no request object")
    response = entry.get("response")
    if not isinstance(response, dict):
        raise CaptureError(path, where, "has no response object (an incomplete export?)")
    post = request.get("postData")
    # No postData at all while bodySize counts bytes: the exporter dropped the whole member.
    post = post if isinstance(post, dict) else {}
    asked = _body(post, path, where, "request.postData", side, request.get("bodySize"))
    if asked.absent is not None:
        stats.absent[f"request body {asked.absent}"] += 1  # JSON-RPC or not: unknowable
        return
    sent = asked.data
    stats.attached += asked.attached
    if sent is None or not wire.sniff(sent):
        stats.skipped["not JSON-RPC"] += 1
        return
    content = response.get("content")
    content = content if isinstance(content, dict) else {}
    status = response.get("status")
    dropped = status == 0 or "_error" in entry or "_error" in response
    answer = _body(content, path, where, "response.content", side, content.get("size"))
    if answer.absent is not None and not dropped:
        stats.absent[f"response body {answer.absent}"] += 1  # its outcome is unknowable
        return
    received = answer.data
    stats.attached += answer.attached

    started = parse_time(entry.get("startedDateTime"))
    timings = entry.get("timings")
    timings = timings if isinstance(timings, dict) else {}
    ready = sum(_ms(timings.get(k)) for k in ("blocked", "dns", "connect"))
    total = entry.get("time")
    if not isinstance(total, (int, float)) or isinstance(total, bool) or total < 0:
        total = ready + sum(_ms(timings.get(k)) for k in ("send", "wait", "receive"))
    if started is None:
        stats.timed = False
        sent_at = ended = None
    else:
        sent_at = started + ready / 1000.0
        ended = started + max(float(total), ready) / 1000.0

    mime = str(content.get("mimeType") or _header(response, "content-type")).lower()
    sse = mime.startswith("text/event-stream")
    url = str(request.get("url", ""))
    method = str(request.get("method", ""))
    label = f"{where} {method} {url[:80]}".rstrip()
    channel, transport = f"entry {index}", "sse" if sse else "http"
    server = urlsplit(url).hostname or None

    def step(direction: Direction, ts: float | None, payload: object) -> Step:
        return Step(direction, channel, ts, payload, label, transport, True, server)

    yield step("sent", sent_at, sent)
    if received is not None and received.strip():
        if not sse:
            yield step("received", ended, received)
        else:
            batch_sent = sent.lstrip()[:1] in ("[", b"[")
            for event in sse_events(received):
                yield step("received", ended, _event_payload(event, batch_sent))
    yield step(
        "closed", ended, "stream_dropped" if dropped else ("stream_end" if sse else "body_end")
    )


def _event_payload(event: str, batch_sent: bool) -> wire.Payload:
    """One SSE event as the live HTTP integration reads it: a batch may be answered one
    element per event (MCP's streamable HTTP does), so a single object answering a batch
    is an element of the batch reply, not a single reply to a batch."""
    payload = wire.parse(event)
    if batch_sent and not payload.is_batch and payload.unparseable is None:
        payload = wire.Payload(True, payload.messages)
    return payload


def sse_events(body: bytes | str) -> list[str]:
    """The data of each complete ``message`` event of a server-sent-events body.

    Follows the WHATWG event-stream rules: ``data`` lines join with newlines, a blank line
    dispatches, ``:`` starts a comment; an event cut off before its blank line is dropped, as
    a browser would.  Other event types (an MCP ``endpoint`` event) carry no responses.
    """
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    events: list[str] = []
    data: list[str] = []
    kind = ""
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if data and kind in ("", "message"):
                events.append("\n".join(data))
            data, kind = [], ""
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            kind = value
    return events

"""An incremental ``Content-Length`` frame parser: the base protocol of LSP (and DAP).

Why one parser, shared: every LSP integration (pygls, python-lsp-jsonrpc, any byte stream
pair), the chaos server's LSP mode and the demo read frames through this class, so a frame
is split the same way everywhere.  It imports only the standard library (the chaos server
uses it without pairwatch's books); the budget it charges is handed in.  The chaos server
parses what real clients (pygls, python-lsp-jsonrpc) write, and the integrations parse what
real servers (pyright, pylsp) write, so a fault here shows as a failed session, not as
agreeing books.

What real peers do, tolerated: header names in any case, extra headers (``Content-Type``),
a frame split over many chunks or many frames in one chunk, stray blank lines between frames.

Bounded and linear against a hostile peer: a header block longer than ``max_header`` breaks
the stream (``broken``; nothing after it can be framed); a body longer than ``max_body`` is
skipped by counting, never held (reported as ``"body_cap"`` as soon as its header is read,
so a frame that never ends is reported too); every byte held for an incomplete header or
body is charged to ``budget`` before it is held (a refusal skips the rest of that frame,
reported as ``"body_budget"``).  Each byte is looked at a bounded number of times.
"""

from __future__ import annotations

from typing import Final, Protocol

__all__ = ["MAX_HEADER", "TERMINATOR", "Charge", "FrameParser", "frame"]

TERMINATOR: Final = b"\r\n\r\n"
MAX_HEADER: Final = 8192
"""Bytes of one header block; LSP's is one or two short lines."""
_MAX_DIGITS: Final = 18  # a Content-Length with more digits is past any cap
_LARGE: Final = 1 << 20  # a body read whole below this size is not worth a budget look-up


class Charge(Protocol):
    """What the parser charges held bytes to (:class:`pairwatch.pairing.limits.Budget`)."""

    def take_all(self, n: int) -> bool: ...

    def fits(self, n: int) -> bool: ...

    def release(self, n: int) -> None: ...


Frame = bytes | str
"""A parsed frame's body, or the reason the frame now being read is skipped unread
(``"body_cap"``, ``"body_budget"``)."""


def frame(body: bytes, content_type: bool = False) -> bytes:
    """One frame as a writer puts it on the wire (the chaos server and tests write this)."""
    extra = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n" if content_type else b""
    return b"Content-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


class FrameParser:
    """Feed bytes in order with :meth:`feed`; get back every frame they completed.

    ``held`` is what the parser keeps (charged to ``budget``), ``broken`` the reason the
    stream could no longer be framed (``header_too_long``, ``no_content_length``,
    ``bad_content_length``), after which :meth:`feed` returns nothing.
    """

    __slots__ = (
        "_body", "_budget", "_head", "_need", "_skipped", "_skipping", "broken", "held",
        "max_body", "max_header",
    )  # fmt: skip

    def __init__(
        self, max_body: int, budget: Charge | None = None, max_header: int = MAX_HEADER
    ) -> None:
        self.max_body = max_body
        self.max_header = max_header
        self._budget = budget
        self._head = bytearray()  # an incomplete header block
        self._need = -1  # body bytes still due; -1 while reading a header block
        self._skipping = False  # the current body is counted, not held
        self._skipped: str | None = None  # why, once, for the caller
        self._body: list[bytes] = []
        self.held = 0
        self.broken: str | None = None

    def feed(self, data: bytes) -> list[Frame]:
        """Take the next chunk; return the frames it completed, in order."""
        out: list[Frame] = []
        if self.broken is not None:
            return out
        pos, size = 0, len(data)
        while pos < size:
            if self._need < 0:
                pos = self._header(data, pos, size)
                if self.broken is not None:
                    self._drop()
                    return out
                if self._need == 0:
                    self._need = -1
                    out.append(b"")
                self._report(out)
                continue
            take = min(self._need, size - pos)
            if not self._skipping:
                if not self._body and take == self._need and self._fits(take):
                    out.append(data[pos : pos + take])  # whole in this chunk: not held
                    self._need = -1
                    pos += take
                    continue
                if not self._skipping and self._charge(take):
                    self._body.append(data[pos : pos + take])
                self._report(out)
            pos += take
            self._need -= take
            if self._need == 0:
                self._need = -1
                if self._skipping:
                    self._skipping = False
                else:
                    out.append(b"".join(self._body))
                    self._drop()
        return out

    def _report(self, out: list[Frame]) -> None:
        if self._skipped is not None:
            out.append(self._skipped)
            self._skipped = None

    def _header(self, data: bytes, pos: int, size: int) -> int:
        """Read header bytes from ``pos``; return where reading stopped."""
        head = self._head
        if not head:
            while data.startswith(b"\r\n", pos):  # blank lines between frames
                pos += 2
            if pos >= size:
                return pos
            end = data.find(TERMINATOR, pos, pos + self.max_header + 4)
            if end >= 0:
                self._start(data[pos:end])
                return end + 4
            rest = size - pos
            if rest >= self.max_header + 4:
                self.broken = "header_too_long"
                return size
            if not self._charge(rest):
                self.broken = "header_budget"
                return size
            head += data[pos:]
            return size
        before = len(head)
        room = self.max_header + 4 - before
        piece = data[pos : pos + room]
        if not self._charge(len(piece)):
            self.broken = "header_budget"
            return size
        head += piece
        end = head.find(TERMINATOR, max(0, before - 3))
        if end < 0:
            if len(head) >= self.max_header + 4:
                self.broken = "header_too_long"
                return size
            return pos + len(piece)
        used = end + 4 - before
        block = bytes(head[:end])
        self._drop()
        self._start(block)
        return pos + used

    def _start(self, block: bytes) -> None:
        """A complete header block: the body that follows is due."""
        length = -1
        for line in block.split(b"\r\n"):
            name, colon, value = line.partition(b":")
            if not colon or name.strip().lower() != b"content-length":
                continue
            value = value.strip()
            if not value.isdigit() or len(value) > _MAX_DIGITS:
                self.broken = "bad_content_length"
                return
            found = int(value)
            if length >= 0 and found != length:
                self.broken = "bad_content_length"
                return
            length = found
        if length < 0:
            if block.strip():
                self.broken = "no_content_length"
            return  # only blank lines: nothing was framed
        self._need = length
        if length > self.max_body:
            self._skipping, self._skipped = True, "body_cap"

    def _fits(self, n: int) -> bool:
        """Whether a body read whole (copied out, never held) fits the budget now: a large
        one that does not is skipped as ``"body_budget"``, like one held in pieces."""
        budget = self._budget
        if n < _LARGE or budget is None:
            return True
        if budget.fits(n):
            return True
        self._skipping, self._skipped = True, "body_budget"
        return False

    def _charge(self, n: int) -> bool:
        """Charge ``n`` more held bytes; on a refusal the current body is skipped."""
        budget = self._budget
        if budget is not None and not budget.take_all(n):
            if self._need > 0:
                self._drop()
                self._skipping, self._skipped = True, "body_budget"
            return False
        self.held += n
        return True

    def _drop(self) -> None:
        """Let go of everything held, and of its charge."""
        self._head.clear()
        self._body = []
        held, self.held = self.held, 0
        if held and self._budget is not None:
            self._budget.release(held)

    def close(self) -> None:
        """The stream ended: release what an incomplete frame held."""
        self._drop()

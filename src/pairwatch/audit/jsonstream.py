"""Walk the top level of a huge JSON document without loading it.

The standard library has no streaming JSON parser, and a HAR export of a long incident can be
a gigabyte.  Only the structure around ``log.entries`` needs walking; every entry is small
enough to decode whole.  So this module scans the few structural characters itself and
hands each value to :meth:`json.JSONDecoder.raw_decode` over a sliding text buffer that grows
only while one value does not fit, then drops what was consumed.  Memory is bounded by the
largest single entry, not by the file.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, BinaryIO, Final

from pairwatch.audit.base import CaptureError, Progress

CHUNK: Final = 1 << 20
MAX_VALUE: Final = 256 << 20  # characters; one HAR entry larger than this is refused
_WS: Final = " \t\r\n"
# raw_decode reports a token cut at the buffer's end (``tru``, ``12e``) as an error a few
# characters before the end; errors this far from the end are real syntax errors.
_TAIL_MARGIN: Final = 64


class JsonStream:
    """A sliding window over a UTF-8 JSON byte stream, with just enough scanning to walk it."""

    def __init__(self, stream: BinaryIO, path: str, progress: Progress) -> None:
        self._stream = stream
        self.path = path
        self._progress = progress
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = json.JSONDecoder()
        self.buf = ""
        self.pos = 0
        self.offset = 0  # characters dropped from the front of buf
        self.eof = False
        self._first = True

    @property
    def where(self) -> str:
        return f"character {self.offset + self.pos}"

    def _fill(self, at_least: int = CHUNK) -> bool:
        if self.eof:
            return False
        if self.pos:
            self.offset += self.pos
            self.buf = self.buf[self.pos :]
            self.pos = 0
        raw = self._stream.read(max(CHUNK, at_least))
        self._progress.advance(len(raw))
        try:
            text = self._decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise CaptureError(
                self.path, self.where, f"not UTF-8 text (byte {exc.start} of a chunk): binary?"
            ) from None
        if self._first and text:
            text = text.removeprefix("\ufeff")
            self._first = False
        if not raw:
            self.eof = True
        self.buf += text
        return bool(raw)

    def peek(self) -> str:
        """The next non-blank character, without consuming it; ``""`` at the end."""
        while True:
            buf, n = self.buf, len(self.buf)
            pos = self.pos
            while pos < n and buf[pos] in _WS:
                pos += 1
            self.pos = pos
            if pos < n:
                return buf[pos]
            if not self._fill():
                return ""

    def expect(self, chars: str, where: str, what: str) -> str:
        c = self.peek()
        if not c or c not in chars:
            found = repr(c) if c else "the end of the file"
            raise CaptureError(self.path, where, f"expected {what}, found {found}")
        self.pos += 1
        return c

    def value(self, where: str) -> Any:
        """Decode the next JSON value whole, reading more of the file while it is cut off."""
        self.peek()
        while True:
            try:
                obj, end = self._json.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                real = exc.pos < len(self.buf) - _TAIL_MARGIN and not exc.msg.startswith(
                    "Unterminated string"
                )
                if real or self.eof:
                    at = self.offset + exc.pos
                    kind = "invalid JSON" if real else "truncated JSON (the file ends inside it)"
                    raise CaptureError(
                        self.path,
                        where,
                        f"{kind}: {exc.msg.removesuffix(' at')} at character {at}",
                    ) from None
                self._grow(where)
                continue
            except RecursionError:
                raise CaptureError(self.path, where, "JSON nested too deeply") from None
            if end >= len(self.buf) and not self.eof:
                self._grow(where)  # a number may continue in the next chunk
                continue
            self.pos = end
            return obj

    def _grow(self, where: str) -> None:
        pending = len(self.buf) - self.pos
        if pending > MAX_VALUE:
            raise CaptureError(self.path, where, f"one value exceeds {MAX_VALUE >> 20} MiB")
        self._fill(pending)  # doubles the window: decoding retries stay linear overall


def walk_object(js: JsonStream, where: str) -> Iterator[str]:
    """Yield each key of the object at the cursor, leaving the cursor on its value."""
    js.expect("{", where, "a JSON object")
    if js.peek() == "}":
        js.pos += 1
        return
    while True:
        key = js.value(where)
        if not isinstance(key, str):
            raise CaptureError(js.path, where, "expected an object key")
        js.expect(":", where, "':'")
        yield key
        if js.expect(",}", where, "',' or '}'") == "}":
            return


def walk_array(js: JsonStream, where: str, name: str) -> Iterator[Any]:
    """Yield each element of the array at the cursor, decoded one at a time.

    Errors name the element as HAR readers count entries: ``entry 4 (log.entries[4])``.
    """
    js.expect("[", where, f"{name} to be an array")
    if js.peek() == "]":
        js.pos += 1
        return
    index = 0
    while True:
        label = f"entry {index} ({name}[{index}])"
        yield js.value(label)
        index += 1
        if js.expect(",]", label, "',' or ']' after it") == "]":
            return


def har_entries(stream: BinaryIO, path: str, progress: Progress) -> Iterator[Any]:
    """Yield the elements of ``log.entries`` one by one; every other member is skipped."""
    js = JsonStream(stream, path, progress)
    if js.peek() != "{":
        found = repr(js.peek()) if js.peek() else "an empty file"
        raise CaptureError(
            path, "character 0", f"not a HAR file: expected a JSON object, found {found}"
        )
    found_entries = False
    for key in walk_object(js, "the top-level object"):
        if key != "log":
            js.value(f"member {key!r}")
            continue
        for log_key in walk_object(js, "log"):
            if log_key != "entries":
                js.value(f"log.{log_key}")
                continue
            found_entries = True
            yield from walk_array(js, "log.entries", "log.entries")
    if js.peek():
        raise CaptureError(path, js.where, "unexpected data after the HAR object")
    if not found_entries:
        raise CaptureError(path, "log", "not a HAR file: no log.entries array")

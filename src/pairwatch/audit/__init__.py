"""Offline audit: the live path's counters and diagnoses, computed from captured traffic.

When an incident already happened there is a capture, not a running client.  This package
reads HAR exports, JSON Lines message logs and stdio transcripts as streams (constant memory
on a gigabyte file), feeds them through the same channels, ledger and telemetry as the live
path (:mod:`pairwatch.audit.feed`), and reports on the result (:mod:`pairwatch.audit.report`).

    from pairwatch.audit import audit_file
    books = audit_file("capture.har")
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import BinaryIO, Final, cast

from pairwatch.audit import har, jsonl, sidefiles, stdio
from pairwatch.audit.base import CaptureError, Progress, ReadStats, Step
from pairwatch.audit.feed import BatchDetail, FileAudit, audit_steps

__all__ = ["FORMATS", "BatchDetail", "CaptureError", "FileAudit", "audit_file", "detect_format"]

Reader = Callable[[BinaryIO, str, Progress, ReadStats], Iterator[Step]]

FORMATS: Final[dict[str, Reader]] = {"har": har.read, "jsonl": jsonl.read, "stdio": stdio.read}
_EXTENSIONS: Final = {".har": "har", ".zip": "har", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def detect_format(path: str, head: bytes) -> str:
    """Pick a reader from the file name, else from the first bytes of the file."""
    ext = os.path.splitext(path)[1].lower()
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    if head.startswith(sidefiles.ZIP_MAGIC):
        return "har"  # a HAR archive (Playwright's .zip), whatever its name
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    first_line = text.split(b"\n", 1)[0]
    if text.startswith(b"{"):
        if b'"dir"' in first_line or b'"direction"' in first_line:
            return "jsonl"
        if b'"log"' in text:
            return "har"
    if text[:1] in (b">", b"<", b"-", b"[", b"#") or text[:1].isdigit():
        return "stdio"
    raise CaptureError(
        path, "", "cannot tell the capture format; name it with --format har|jsonl|stdio"
    )


def audit_file(
    path: str,
    fmt: str | None = None,
    *,
    timeout: float = 30.0,
    keep_worst: int = 5,
    progress: Progress | None = None,
) -> FileAudit:
    """Audit one capture file; raise :class:`CaptureError` if it cannot be read.

    A HAR's side files (``_file``) are read from its directory; a ``.zip`` is read as a HAR
    archive, its one ``.har`` member the capture and the other members its side files.
    """
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed below, after the generator is done
    except OSError as exc:
        raise CaptureError(path, "", exc.strerror or str(exc)) from None
    with stream:
        size = os.fstat(stream.fileno()).st_size
        if progress is None:
            progress = Progress(size)
        progress.total = size
        head = stream.peek(4096)[:4096]
        if fmt is None:
            fmt = detect_format(path, head)
        if fmt not in FORMATS:
            raise CaptureError(path, "", f"unknown format {fmt!r}")
        stats = ReadStats()
        if fmt != "har":
            steps = FORMATS[fmt](stream, path, progress, stats)
            return audit_steps(path, fmt, steps, stats, timeout=timeout, keep_worst=keep_worst)
        if not head.startswith(sidefiles.ZIP_MAGIC):
            side = sidefiles.Directory(os.path.dirname(os.path.abspath(path)))
            steps = har.read(stream, path, progress, stats, side)
            return audit_steps(path, fmt, steps, stats, timeout=timeout, keep_worst=keep_worst)
        archive, member = sidefiles.open_archive(path, stream)
        with archive, archive.open(member) as inner:
            progress.total = member.file_size  # the reader counts uncompressed bytes
            reader = cast(BinaryIO, inner)  # a ZipExtFile reads like any binary stream
            steps = har.read(reader, path, progress, stats, sidefiles.Archive(archive))
            return audit_steps(path, fmt, steps, stats, timeout=timeout, keep_worst=keep_worst)

"""Bodies a HAR keeps outside itself, and HAR archives (``.zip``).

Recorders that do not embed bodies point at them instead: Playwright's ``content: "attach"``
writes each body to a file named by its hash and leaves ``"_file": "<sha1>.json"`` in the
entry's ``postData`` or ``response.content``, either beside the ``.har`` or, when the HAR path
ends in ``.zip``, as members of one archive holding ``har.har`` too.  A reader that ignored
``_file`` would see no bodies and report no JSON-RPC traffic, which is wrong in a way nobody
notices; so the HAR reader asks a :class:`SideFiles` for every ``_file`` it meets.

A name from the capture is never trusted as a path: only a bare file name (no directory part,
no ``..``) is looked up, so a crafted HAR cannot make the audit read ``/etc/passwd``.
"""

from __future__ import annotations

import os
import zipfile
from typing import BinaryIO, Final, Protocol

from pairwatch.audit.base import CaptureError

MAX_SIDE_FILE: Final = 256 << 20  # bytes; one body larger than this counts as unreadable
ZIP_MAGIC: Final = b"PK\x03\x04"


class SideFiles(Protocol):
    """Where a HAR's attached bodies live."""

    def read(self, name: str) -> bytes | None:
        """The body stored under ``name``; ``None`` when it is not there or not readable."""
        ...


def safe_name(name: str) -> bool:
    """Whether ``name`` is a bare file name, safe to look up beside the capture."""
    return (
        bool(name)
        and name not in (".", "..")
        and "/" not in name
        and "\\" not in name
        and "\x00" not in name
    )


class Directory:
    """Side files in the directory that holds the ``.har`` (Playwright's layout)."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def read(self, name: str) -> bytes | None:
        if not safe_name(name):
            return None
        try:
            with open(os.path.join(self.folder, name), "rb") as f:
                data = f.read(MAX_SIDE_FILE + 1)
        except OSError:
            return None
        return data if len(data) <= MAX_SIDE_FILE else None


class Archive:
    """Side files as members of the ``.zip`` that also holds the HAR."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive

    def read(self, name: str) -> bytes | None:
        if not safe_name(name):
            return None
        try:
            info = self.archive.getinfo(name)
        except KeyError:
            return None
        if info.file_size > MAX_SIDE_FILE:
            return None
        try:
            return self.archive.read(info)
        except (OSError, zipfile.BadZipFile, RuntimeError, ValueError):
            return None  # a damaged or encrypted member: the body is as good as absent


def open_archive(path: str, stream: BinaryIO) -> tuple[zipfile.ZipFile, zipfile.ZipInfo]:
    """Open a HAR archive and find its one ``.har`` member (Playwright names it ``har.har``)."""
    try:
        archive = zipfile.ZipFile(stream)
    except (zipfile.BadZipFile, OSError) as exc:
        raise CaptureError(path, "", f"not a readable zip archive ({exc})") from None
    hars = [i for i in archive.infolist() if i.filename.lower().endswith(".har")]
    if len(hars) != 1:
        archive.close()
        found = ", ".join(i.filename for i in hars) if hars else "none"
        raise CaptureError(path, "", f"a HAR archive holds exactly one .har member; found {found}")
    return archive, hars[0]

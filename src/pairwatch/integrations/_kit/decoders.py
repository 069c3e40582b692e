"""Content decoders for pairwatch's copy of a response body: bounded, and pairwatch's own.

A body that still carries its ``Content-Encoding`` when the tap sees it (httpx's raw byte
stream, a urllib3 ``read(decode_content=False)``, aiohttp with ``auto_decompress=False``)
is decoded on a private decoder, never the caller's.  Two rules decide how:

* **Which** encodings are decoded follows the client library exactly: httpx asks for ``br``
  as soon as ``brotli`` is installed and for ``zstd`` with ``zstandard``; a pairwatch that
  knew only gzip and deflate counted every such healthy reply as all responses missing.  An
  encoding the library does not decode is not decoded here either: the caller then holds
  undecoded bytes, and so does pairwatch.
* **How** is pairwatch's own: every decoder here produces at most ``max_length`` bytes per
  call and keeps the rest of its input for the next call, so the tap charges the budget for
  the output *before* it exists.  A 1 MB gzip body that inflates to 1 GiB costs one step,
  not a gigabyte.  The libraries' own decoders cannot promise that on every version.

An encoding the library decodes but no bounded decoder is installed for here (``br`` with a
``brotli`` older than 1.2, ``zstd`` without ``backports.zstd`` before Python 3.14) is
:data:`UNBOUNDED`: the tap leaves that exchange unchecked rather than decode it unbounded.
"""

from __future__ import annotations

import importlib
import sys
import zlib
from collections.abc import Callable
from typing import Any, Final, Protocol

__all__ = [
    "UNBOUNDED",
    "UNSUPPORTED",
    "Decoder",
    "for_aiohttp",
    "for_httpx",
    "for_urllib3",
    "stdlib",
]


class Decoder(Protocol):
    """Incremental, bounded decoding of one body.

    ``decode(data, max_length)`` takes the next chunk and returns at most ``max_length``
    decoded bytes; what more the input holds comes from later calls with ``b""`` (an empty
    result then means: send more input).  ``flush()`` returns what is left at the end.
    """

    def decode(self, data: bytes, max_length: int) -> bytes: ...

    def flush(self) -> bytes: ...


class _Marker:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


UNSUPPORTED: Final = _Marker("UNSUPPORTED")
"""The body carries an encoding the library does not decode: the caller reads it raw."""

UNBOUNDED: Final = _Marker("UNBOUNDED")
"""The library decodes this encoding, but no bounded decoder for it is installed here."""

Chosen = Decoder | None | _Marker
"""A decoder, None for an identity body, :data:`UNSUPPORTED` or :data:`UNBOUNDED`."""


class _Zlib:
    """gzip or deflate with zlib's ``max_length``.  ``members``: go on after the end of a
    gzip member, as urllib3 does (httpx and aiohttp stop at the first)."""

    __slots__ = ("_members", "_obj", "_raw_retry", "_tail", "_wbits")

    def __init__(self, wbits: int, *, raw_retry: bool = False, members: bool = False) -> None:
        self._wbits = wbits
        self._obj = zlib.decompressobj(wbits)
        self._tail = b""
        self._raw_retry = raw_retry  # deflate: a server may send raw deflate, no zlib header
        self._members = members

    def decode(self, data: bytes, max_length: int) -> bytes:
        if self._tail:
            data = self._tail + data if data else self._tail
        if not data:
            return b""
        try:
            out = self._obj.decompress(data, max_length)
        except zlib.error:
            if not self._raw_retry:
                raise
            self._raw_retry = False
            self._obj = zlib.decompressobj(-zlib.MAX_WBITS)
            out = self._obj.decompress(data, max_length)
        self._raw_retry = False
        self._tail = self._obj.unconsumed_tail
        if self._obj.eof and self._members:
            rest = self._obj.unused_data
            if rest:
                self._obj = zlib.decompressobj(self._wbits)
                self._tail = rest
                if len(out) < max_length:
                    out += self.decode(b"", max_length - len(out))
        return out

    def flush(self) -> bytes:
        return b"" if self._tail else self._obj.flush()


class _Brotli:
    """brotli's ``output_buffer_limit`` (brotli 1.2+, or brotlicffi with the same API).

    The limit is where brotli stops growing its buffer, which it doubles: it may return up
    to twice the limit.  So half of ``max_length`` is asked for, and anything past
    ``max_length`` is kept for the next call.  Input that comes while brotli still has
    output to give waits here (brotli takes none until it has given it all).
    """

    __slots__ = ("_input", "_obj", "_out")

    def __init__(self, obj: Any) -> None:
        self._obj = obj
        self._input = b""
        self._out = b""

    def decode(self, data: bytes, max_length: int) -> bytes:
        if data:
            self._input = self._input + data if self._input else data
        if not self._out:
            feed = b""
            if self._input and self._obj.can_accept_more_data():
                feed, self._input = self._input, b""
            # Also with no input: brotli may hold output it has not given yet.
            self._out = self._obj.process(feed, output_buffer_limit=max(1, max_length // 2))
        out = self._out
        if len(out) <= max_length:
            self._out = b""
            return out
        self._out = out[max_length:]
        return out[:max_length]

    def flush(self) -> bytes:
        return b""


class _Zstd:
    """zstd with ``compression.zstd`` (``backports.zstd`` before Python 3.14) and its
    ``max_length``; frames follow one another, as every client library reads them.  The
    decompressor keeps input it has not decoded yet: more output comes with ``b""``."""

    __slots__ = ("_make", "_obj")

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make = make
        self._obj = make()

    def decode(self, data: bytes, max_length: int) -> bytes:
        parts: list[bytes] = []
        size = 0
        while size < max_length:
            obj = self._obj
            if obj.eof:  # a frame ended: what follows it starts the next one
                data = obj.unused_data + data
                if not data:
                    break
                obj = self._obj = self._make()
            elif not data and obj.needs_input:
                break
            part = obj.decompress(data, max_length - size)
            data = b""
            if part:
                parts.append(part)
                size += len(part)
            elif obj.needs_input:
                break
        return b"".join(parts)

    def flush(self) -> bytes:
        return b""


def _brotli_module() -> Any:
    for name in ("brotli", "brotlicffi"):
        try:
            module = importlib.import_module(name)
            module.Decompressor().process(b"", output_buffer_limit=1)
            return module
        except ImportError:
            continue
        except Exception:  # present, without the bounded API
            continue
    return None


def _zstd_class() -> Any:
    name = "compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd"
    try:
        return importlib.import_module(name).ZstdDecompressor
    except (ImportError, AttributeError):
        return None


_BROTLI: Any = None
_ZSTD: Any = None
_LOOKED = False


def _bounded(name: str, members: bool) -> Decoder | _Marker | None:
    """Pairwatch's bounded decoder for one encoding name; None for a name it never decodes."""
    global _BROTLI, _ZSTD, _LOOKED
    if name in ("gzip", "x-gzip"):
        return _Zlib(16 + zlib.MAX_WBITS, members=members)
    if name == "deflate":
        return _Zlib(zlib.MAX_WBITS, raw_retry=True)
    if name not in ("br", "zstd"):
        return None
    if not _LOOKED:
        _BROTLI, _ZSTD, _LOOKED = _brotli_module(), _zstd_class(), True
    if name == "br":
        return UNBOUNDED if _BROTLI is None else _Brotli(_BROTLI.Decompressor())
    return UNBOUNDED if _ZSTD is None else _Zstd(_ZSTD)


class _Chain:
    """Several encodings, applied in header order, so decoded in reverse order.  Each stage
    is bounded by the same ``max_length``; what a stage holds back stays in that stage."""

    __slots__ = ("_children",)

    def __init__(self, children: list[Decoder]) -> None:
        self._children = children[::-1]

    def decode(self, data: bytes, max_length: int) -> bytes:
        for child in self._children:
            data = child.decode(data, max_length)
        return data

    def flush(self) -> bytes:
        data = b""
        for child in self._children:
            data = child.decode(data, sys.maxsize) + child.flush() if data else child.flush()
        return data


def _names(encoding: str | None) -> list[str]:
    if not encoding:
        return []
    return [e for e in (p.strip().lower() for p in encoding.split(",")) if e != "identity"]


def _assemble(encoding: str | None, decodes: Callable[[str], bool], skip: bool,
              members: bool = False) -> Chosen:  # fmt: skip
    """One bounded decoder per listed encoding the library ``decodes``; ``skip``: leave the
    others out as the library does (httpx), else the whole body is read raw (urllib3,
    aiohttp hand such bytes over undecoded or raise)."""
    children: list[Decoder] = []
    for name in _names(encoding):
        child = _bounded(name, members) if decodes(name) else None
        if child is None:
            if skip:
                continue
            return UNSUPPORTED
        if isinstance(child, _Marker):
            return child
        children.append(child)
    if not children:
        return None
    return children[0] if len(children) == 1 else _Chain(children)


def stdlib(encoding: str | None) -> Chosen:
    """gzip and deflate only: for a body whose library is not known."""
    return _assemble(encoding, lambda name: name in ("gzip", "x-gzip", "deflate"), skip=False)


def for_httpx(lib_name: str, encoding: str | None) -> Chosen:
    """httpx (or httpx2) decodes each listed encoding it supports and skips the others."""
    if not encoding:
        return None  # most bodies: nothing to look up
    try:
        table: dict[str, Any] = importlib.import_module(lib_name + "._decoders").SUPPORTED_DECODERS
    except (ImportError, AttributeError):
        return stdlib(encoding)
    return _assemble(encoding, lambda name: table.get(name) is not None, skip=True)


def for_urllib3(encoding: str | None) -> Chosen:
    """urllib3 decodes the encodings in ``CONTENT_DECODERS`` (gzip members one after the
    other); a body with none of them is handed over as it came."""
    if not encoding:
        return None
    try:
        known = frozenset(importlib.import_module("urllib3.response").HTTPResponse.CONTENT_DECODERS)
    except (ImportError, AttributeError):
        return stdlib(encoding)
    names = _names(encoding)
    if not names:
        return None
    if not any(name in known for name in names):
        return UNSUPPORTED  # urllib3 hands these bytes over as they came
    return _assemble(encoding, known.__contains__, skip=True, members=True)


def for_aiohttp(encoding: str | None) -> Chosen:
    """aiohttp decodes gzip and deflate, and br and zstd when its optional packages are in."""
    if not encoding:
        return None  # most bodies: nothing to look up
    try:
        utils = importlib.import_module("aiohttp.compression_utils")
    except ImportError:
        return stdlib(encoding)
    has = {
        "gzip": True, "x-gzip": True, "deflate": True,
        "br": bool(getattr(utils, "HAS_BROTLI", False)),
        "zstd": bool(getattr(utils, "HAS_ZSTD", False)),
    }  # fmt: skip
    return _assemble(encoding, lambda name: has.get(name, False), skip=False)

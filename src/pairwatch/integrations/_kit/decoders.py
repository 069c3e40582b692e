"""Content decoders for pairwatch's copy of a response body: the client library's own.

A body that still carries its ``Content-Encoding`` when the tap sees it (httpx's raw byte
stream, a urllib3 ``read(decode_content=False)``, aiohttp with ``auto_decompress=False``)
is decoded on a private decoder, never the caller's.  Which encodings are decoded, and how,
must match the client library exactly: httpx asks for ``br`` as soon as ``brotli`` is
installed and for ``zstd`` with ``zstandard``; a pairwatch that knew only gzip and deflate
counted every such healthy reply as all responses missing.  So each library's own decoder
classes are used (``httpx._decoders``, urllib3's ``_get_decoder``, aiohttp's
``compression_utils``), and an encoding the library does not decode is not decoded here
either: the caller then holds undecoded bytes, and so does pairwatch.

Those are private modules of the libraries; when one moves, the standard library's zlib
(gzip, deflate) takes over rather than failing the exchange.
"""

from __future__ import annotations

import importlib
import zlib
from collections.abc import Callable
from typing import Any, Final, Protocol

__all__ = ["UNSUPPORTED", "Decoder", "for_aiohttp", "for_httpx", "for_urllib3", "stdlib"]


class Decoder(Protocol):
    """Incremental decoding of one body: chunks in, decoded bytes out, the rest at the end."""

    def decode(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


class _Unsupported:
    """The body carries an encoding the library cannot decode: nothing to read."""

    def __repr__(self) -> str:
        return "UNSUPPORTED"


UNSUPPORTED: Final = _Unsupported()

Chosen = Decoder | None | _Unsupported
"""A decoder, None for an identity body, or :data:`UNSUPPORTED`."""


class _Adapter:
    """Any object with a decompress-like and a flush method, as a :class:`Decoder`."""

    __slots__ = ("_decode", "_flush")

    def __init__(self, decode: Callable[[bytes], bytes], flush: Callable[[], bytes]) -> None:
        self._decode = decode
        self._flush = flush

    def decode(self, data: bytes) -> bytes:
        return self._decode(data)

    def flush(self) -> bytes:
        return self._flush()


class _Chain:
    """Several encodings, applied in header order, so decoded in reverse order."""

    __slots__ = ("_children",)

    def __init__(self, children: list[Decoder]) -> None:
        self._children = children[::-1]

    def decode(self, data: bytes) -> bytes:
        for child in self._children:
            data = child.decode(data)
        return data

    def flush(self) -> bytes:
        data = b""
        for child in self._children:
            data = child.decode(data) + child.flush() if data else child.flush()
        return data


def _names(encoding: str | None) -> list[str]:
    if not encoding:
        return []
    return [e for e in (p.strip().lower() for p in encoding.split(",")) if e != "identity"]


def _zlib(name: str) -> Decoder | None:
    if name in ("gzip", "x-gzip"):
        obj = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif name == "deflate":
        obj = zlib.decompressobj()
    else:
        return None
    return _Adapter(obj.decompress, obj.flush)


def _assemble(encoding: str | None, make: Callable[[str], Decoder | None], skip: bool) -> Chosen:
    """One decoder per listed encoding; ``skip``: leave unknown ones out as the library
    does (httpx), else the whole body is unreadable (urllib3, aiohttp raise)."""
    children: list[Decoder] = []
    for name in _names(encoding):
        child = make(name)
        if child is None:
            if skip:
                continue
            return UNSUPPORTED
        children.append(child)
    if not children:
        return None
    return children[0] if len(children) == 1 else _Chain(children)


def stdlib(encoding: str | None) -> Chosen:
    """gzip and deflate from zlib: the fallback when a library's decoders cannot be found."""
    return _assemble(encoding, _zlib, skip=False)


def for_httpx(lib_name: str, encoding: str | None) -> Chosen:
    """httpx (or httpx2) decodes each listed encoding it supports and skips the others."""
    if not encoding:
        return None  # most bodies: nothing to look up
    try:
        table: dict[str, Any] = importlib.import_module(lib_name + "._decoders").SUPPORTED_DECODERS
    except (ImportError, AttributeError):
        return stdlib(encoding)

    def make(name: str) -> Decoder | None:
        cls = table.get(name)
        return None if cls is None else cls()

    return _assemble(encoding, make, skip=True)


def for_urllib3(encoding: str | None) -> Chosen:
    """urllib3 decodes the encodings in ``CONTENT_DECODERS``; others stay undecoded."""
    if not encoding:
        return None
    try:
        response = importlib.import_module("urllib3.response")
        known: list[str] = list(response.HTTPResponse.CONTENT_DECODERS)
        get_decoder = response._get_decoder
    except (ImportError, AttributeError):
        return stdlib(encoding)
    names = _names(encoding)
    if not names:
        return None
    if not any(name in known for name in names):
        return UNSUPPORTED  # urllib3 hands these bytes over as they came
    wanted = ",".join(name for name in names if name in known)
    obj = get_decoder(wanted)
    return _Adapter(obj.decompress, obj.flush)


def for_aiohttp(encoding: str | None) -> Chosen:
    """aiohttp's own decompressors (``auto_decompress=False`` leaves decoding to the caller)."""
    if not encoding:
        return None  # most bodies: nothing to look up
    try:
        utils = importlib.import_module("aiohttp.compression_utils")
    except ImportError:
        return stdlib(encoding)

    def make(name: str) -> Decoder | None:
        try:
            if name == "br" and getattr(utils, "HAS_BROTLI", False):
                obj = utils.BrotliDecompressor()
            elif name == "zstd" and getattr(utils, "HAS_ZSTD", False):
                obj = utils.ZSTDDecompressor()
            elif name in ("gzip", "x-gzip", "deflate"):
                obj = utils.ZLibDecompressor(encoding=name)
            else:
                return None
            return _Adapter(obj.decompress_sync, obj.flush)
        except (AttributeError, TypeError):  # another aiohttp version's API
            return _zlib(name)

    return _assemble(encoding, make, skip=False)

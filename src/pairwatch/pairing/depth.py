"""Refuse bodies nested too deep for the C decoders, whatever the recursion limit is.

Why: both decoders pairwatch uses (``json``'s C scanner and msgspec) descend into nested
arrays and objects on the C stack and stop only at the interpreter's recursion limit.  With
the default limit (1000) that is safe.  But applications raise it: importing web3 sets it to
100000 (py_ecc does), and a body of 100000 ``[`` then overflows the C stack and kills the
process with a segmentation fault, an exception nobody can catch.  A client that would have
refused the body would instead be crashed by its observer.

So when the limit is above the default, a body that *could* be deeper than
:data:`MAX_DEPTH` (it holds more opening brackets than that) is measured first, with a few
whole-buffer passes in C (no per-character Python loop), and one deeper than the cap is
``too_deep`` without being decoded.  Under the default limit nothing is measured: the
decoders' own limit protects them, and healthy traffic pays nothing.
"""

from __future__ import annotations

import re
import sys
from typing import Final

__all__ = ["MAX_DEPTH", "SAFE_RECURSION_LIMIT", "too_deep"]

MAX_DEPTH: Final = 1000
"""Nesting levels pairwatch decodes when the recursion limit has been raised: Python's default
limit, so a raised limit changes nothing below it (JSON-RPC messages are a handful of levels
deep), while the C stack, which overflows somewhere between 20,000 and 40,000 levels on an
8 MiB stack, keeps a wide margin."""

SAFE_RECURSION_LIMIT: Final = MAX_DEPTH
"""At or under this limit the C decoders stop themselves in time: nothing is measured."""

_KEEP: Final = b'[]{}"'
_DROP: Final = bytes(b for b in range(256) if b not in _KEEP)
_STRING: Final = re.compile(rb'"[^"]*"')
_SQUARE: Final = bytes.maketrans(b"{}", b"[]")


def too_deep(raw: bytes | bytearray | memoryview | str) -> bool:
    """Whether decoding ``raw`` could descend more than :data:`MAX_DEPTH` levels.

    Free under the default recursion limit (one ``sys`` call).  Under a raised one, a body
    is reduced to its brackets in C first; only one with more openers than the cap is
    measured further.
    """
    if sys.getrecursionlimit() <= SAFE_RECURSION_LIMIT:
        return False
    if isinstance(raw, str):
        if raw.count("[") + raw.count("{") <= MAX_DEPTH:
            return False
        data = raw.encode("utf-8", "surrogatepass")
    else:
        data = raw if isinstance(raw, bytes) else bytes(raw)
    data = _unescaped(data)
    brackets = data.translate(_SQUARE, _DROP)
    if len(brackets) - brackets.count(b'"') <= MAX_DEPTH:
        return False  # fewer brackets than the cap: cannot be deeper
    return _measure(data, brackets) > MAX_DEPTH


def _depth_bound(data: bytes) -> int:
    """An upper bound of the nesting a decoder would reach, never below the real one.

    Strings are cut out first (their brackets are text).  Escaped backslashes and quotes go
    first, so every quote left opens or closes a string.  Then the body is reduced to its
    brackets and quotes (one ``translate``), and the strings without brackets, now ``""``,
    are dropped in one pass: when no quote is left, every string was bracket-free and
    dropped with its own closing quote (the scan is left to right from an opening quote).
    Otherwise a string holds brackets (rare) and strings are cut from the body itself.

    Each pass of ``replace("[]", "")`` then removes the innermost level, so the number of
    passes is the depth of what is balanced.  Whatever cannot be reduced (an unbalanced or
    malformed body) counts its remaining openers as further levels, which is as deep as a
    decoder could go before it finds the error.
    """
    data = _unescaped(data)
    return _measure(data, data.translate(_SQUARE, _DROP))


def _unescaped(data: bytes) -> bytes:
    if data.find(b"\\") >= 0:  # not ``in``, which tries an int first (see wire.parse_plain)
        return data.replace(b"\\\\", b"").replace(b'\\"', b"")
    return data


def _measure(data: bytes, brackets: bytes) -> int:
    """:func:`_depth_bound` of an unescaped body, given its brackets and quotes."""
    brackets = brackets.replace(b'""', b"")
    if brackets.find(b'"') >= 0:
        text = _STRING.sub(b"", data)
        unterminated = text.find(b'"')  # the rest is inside a string the body never ends
        if unterminated >= 0:
            text = text[:unterminated]
        brackets = text.translate(_SQUARE, _DROP)
    depth = 0
    while brackets.find(b"[]") >= 0:
        brackets = brackets.replace(b"[]", b"")
        depth += 1
        if depth > MAX_DEPTH:
            return depth
    return depth + brackets.count(b"[")

"""Decode what crosses the wire into classified elements, without ever raising.

Integrations hand this module raw bytes, a decoded ``str``, or objects their library already
parsed; it decodes (msgspec's typed decoder when installed, the stdlib otherwise) and hands
every element to the one set of rules in :mod:`pairwatch.pairing.elements`, whose names it
re-exports so that callers need one import.

Nothing here imports pairwatch outside :mod:`pairwatch.pairing`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from pairwatch.pairing.elements import (
    ABSENT,
    CALL_KINDS,
    MAX_ID_CHARS,
    RESPONSE_KINDS,
    UNPARSEABLE_EMPTY,
    IdKey,
    IdState,
    Kind,
    LongId,
    Message,
    Payload,
    Plain,
    classify,
    classify_element,
    classify_members,
    id_key,
    is_discouraged_id,
    valid_error,
)

__all__ = [
    "ABSENT",
    "CALL_KINDS",
    "MAX_ID_CHARS",
    "RESPONSE_KINDS",
    "UNPARSEABLE_EMPTY",
    "IdKey",
    "IdState",
    "Kind",
    "LongId",
    "Message",
    "Payload",
    "Plain",
    "classify",
    "classify_element",
    "classify_members",
    "decode",
    "id_key",
    "is_discouraged_id",
    "parse",
    "parse_stdlib",
    "sniff",
    "valid_error",
]


def decode(raw: bytes | bytearray | memoryview | str) -> tuple[Any, str | None]:
    """Decode JSON text; return ``(value, None)`` or ``(None, reason)``.

    A UTF-8 byte-order mark is tolerated because some servers emit one; anything else that
    ``json`` refuses (including NaN-free strictness is left to ``json``'s defaults) is
    reported, never raised.
    """
    try:
        if isinstance(raw, (memoryview, bytearray)):
            raw = bytes(raw)
        if isinstance(raw, bytes):
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            text = raw.decode("utf-8")
        else:
            text = raw[1:] if raw.startswith("\ufeff") else raw
        if not text.strip():
            return None, "empty"
        try:
            return json.loads(text), None
        except ValueError as exc:
            if "integer string conversion" not in str(exc):
                raise
            # Valid JSON with an integer of more than sys.get_int_max_str_digits() digits:
            # such a number is never a usable id, so it decodes as a float (inf) instead of
            # failing the whole body (msgspec skips it in results, and refuses it as an id).
            return json.loads(text, parse_int=_lenient_int), None
    except RecursionError:
        return None, "too_deep"
    except UnicodeDecodeError:
        return None, "not_utf8"
    except ValueError:
        return None, "not_json"
    except Exception:  # defensive: a decoder must never raise into a client
        return None, "undecodable"


def parse(payload: object, hint: str | None = None) -> Payload:
    """Classify any payload an integration may hold: bytes, str, or decoded JSON.

    Bytes and text go through msgspec when it is installed (:mod:`pairwatch.pairing._fast`,
    same results, about 4x cheaper), else, or when it declines, through ``json``.  ``hint``
    (:attr:`Kind.REQUEST` for what a client sends, :attr:`Kind.RESULT` for what it reads)
    lets the fast path first try the one shape a healthy payload of that direction has.
    """
    if _fast is not None and (type(payload) is bytes or type(payload) is str):
        parsed = _fast(payload, hint)
        if parsed is not None:
            return parsed
    return parse_stdlib(payload)


def parse_stdlib(payload: object) -> Payload:
    """:func:`parse` with the standard library's ``json`` only (the reference path)."""
    if isinstance(payload, (bytes, bytearray, memoryview, str)):
        value, problem = decode(payload)
        if problem is not None:
            return Payload(False, (), problem)
        payload = value
    try:
        return classify(payload)
    except RecursionError:
        return Payload(False, (), "too_deep")


def _lenient_int(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


_OPENERS: Final = frozenset(b"{[")
_WHITESPACE: Final = b" \t\r\n"


def sniff(raw: bytes | bytearray | memoryview | str | None) -> bool:
    """Cheaply guess whether a body could be JSON-RPC, before paying for a parse.

    Looks only at the first non-blank character and for the ``jsonrpc`` member name, so
    other traffic (HTML, form posts, binary uploads) passes at near-zero cost.
    """
    if not raw:
        return False
    if isinstance(raw, str):
        head = raw.lstrip("\ufeff \t\r\n")[:1]
        return head in ("{", "[") and "jsonrpc" in raw
    data = bytes(raw) if not isinstance(raw, bytes) else raw
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    head_bytes = data.lstrip(_WHITESPACE)[:1]
    return bool(head_bytes) and head_bytes[0] in _OPENERS and b"jsonrpc" in data


_fast: Callable[[bytes | str, str | None], Payload | None] | None
try:  # the optional speed-up
    from pairwatch.pairing._fast import parse_bytes as _fast
except ImportError:  # msgspec not installed: the stdlib path only
    _fast = None

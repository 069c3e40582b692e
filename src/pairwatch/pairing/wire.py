"""Decode what crosses the wire into classified elements, without ever raising.

Integrations hand this module raw bytes, a decoded ``str``, or objects their library already
parsed; it decodes (msgspec's typed decoder, with the stdlib as the reference) and hands
every element to the one set of rules in :mod:`pairwatch.pairing.elements`, whose names it
re-exports so that callers need one import.

Nothing here imports pairwatch outside :mod:`pairwatch.pairing`.
"""

from __future__ import annotations

import json
from typing import Any, Final

from pairwatch.pairing.depth import MAX_DEPTH, too_deep
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
    "is_jsonrpc",
    "is_spec_empty_reply",
    "parse",
    "parse_plain",
    "parse_stdlib",
    "shows_jsonrpc",
    "sniff",
    "structure_stdlib",
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
        if too_deep(raw):  # before the C decoder can overflow the C stack (see depth.py)
            return None, "too_deep"
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

    Bytes and text go through msgspec (:mod:`pairwatch.pairing._fast`, same results,
    cheaper), and through ``json`` when it declines.  ``hint``
    (:attr:`Kind.REQUEST` for what a client sends, :attr:`Kind.RESULT` for what it reads)
    lets the fast path first try the one shape a healthy payload of that direction has.
    """
    if type(payload) is bytes or type(payload) is str:
        # A body of no more characters than the cap cannot nest deeper: no call for it.
        if len(payload) > MAX_DEPTH and too_deep(payload):
            return Payload(False, (), "too_deep")
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


_WHITESPACE: Final = " \t\r\n"


def sniff(raw: bytes | bytearray | memoryview | str | None) -> bool:
    """Whether a body is JSON-RPC, judged by its structure (the HTTP integrations ask per body).

    A body is JSON-RPC when its JSON value is an object with a ``jsonrpc`` member, an array
    holding at least one such object (a batch may carry invalid elements), or ``[]`` (the
    empty batch, which only its reply can settle: see :mod:`pairwatch.pairing.ledger`).
    ``{"event": "client_ready", "transport": "jsonrpc"}`` is not: the word is a value there.

    Cheap for the bodies that are not: one substring search rejects everything without the
    word ``jsonrpc`` (HTML, form posts, uploads, most REST bodies) before any decoding.
    """
    if not raw:
        return False
    if not isinstance(raw, str):
        data = bytes(raw) if not isinstance(raw, bytes) else raw
        if b"jsonrpc" not in data:  # before any decoding: the common case
            return len(data) < 64 and _empty_array(data.decode("utf-8", "replace"))
    elif "jsonrpc" not in raw:
        return len(raw) < 64 and _empty_array(raw)
    text = _text(raw)
    return text is not None and _structure(text)


def is_jsonrpc(raw: object) -> bool:
    """:func:`sniff` without the ``[]`` allowance: does this reply prove JSON-RPC is spoken?

    Also takes an already decoded value, as integrations may hold one.
    """
    if isinstance(raw, dict):
        return "jsonrpc" in raw
    if isinstance(raw, list):
        return any(isinstance(e, dict) and "jsonrpc" in e for e in raw)
    if not isinstance(raw, (bytes, bytearray, memoryview, str)) or not raw:
        return False
    text = _text(raw)
    return text is not None and "jsonrpc" in text and _structure(text)


def _text(raw: bytes | bytearray | memoryview | str) -> str | None:
    """The body as text when it could be JSON (opens with ``{`` or ``[``), else None."""
    if isinstance(raw, str):
        text = raw
    else:
        data = bytes(raw) if not isinstance(raw, bytes) else raw
        head = data[:4].lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
        if head and head not in (b"{", b"["):
            return None  # a binary upload is never decoded
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    text = text.lstrip("\ufeff" + _WHITESPACE)
    return text if text[:1] in ("{", "[") else None


def _empty_array(text: str) -> bool:
    text = text.lstrip("\ufeff" + _WHITESPACE)
    return text.startswith("[") and text[1:].strip(_WHITESPACE) == "]"


def _structure(text: str) -> bool:
    if too_deep(text):
        return False
    return _probe(text)


def structure_stdlib(text: str) -> bool:
    """What :func:`sniff` decides of a text that could be JSON, with the standard library's
    ``json`` only (the reference the msgspec probe is tested against)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return is_jsonrpc(value) if isinstance(value, (dict, list)) else False


def shows_jsonrpc(payload: Payload) -> bool:
    """From classified elements alone: does a reply look like JSON-RPC?  (For callers that
    no longer hold the raw body; an element with a JSON-RPC member shape counts.)"""
    if payload.unparseable is not None:
        return False
    return any(
        m.kind is not Kind.INVALID and m.problem != "no_result_or_error" for m in payload.messages
    )


def is_spec_empty_reply(payload: Payload) -> bool:
    """The one reply the spec allows to ``[]``: a single error object whose id is null."""
    if payload.is_batch or payload.unparseable is not None or payload.size != 1:
        return False
    message = payload.messages[0]
    return message.kind is Kind.ERROR and message.id_state is IdState.NULL


# msgspec's typed decoders (imported last: they build on the names above).
# parse_plain: :func:`parse` for a body of the plain shape (every element a well-formed
# request, or result, as the hint says), else None, having decoded it once; a body of that
# shape is JSON-RPC by construction, so an integration need not :func:`sniff` it first.
from pairwatch.pairing._fast import has_jsonrpc_member as _probe  # noqa: E402
from pairwatch.pairing._fast import parse_bytes as _fast  # noqa: E402
from pairwatch.pairing._fast import plain as parse_plain  # noqa: E402

"""A response body as the client reads it (its charset), and the bytes every tap may hold.

Charset: one Latin-1 byte inside one string result must not fail a strict UTF-8 decode of
the whole body (every response in it would count as missing) while ``requests``'
``.json()`` returns them all.  A body is decoded as the client would: with the charset the
``Content-Type`` declares, else as JSON text (UTF-8, or UTF-16/32 recognised by their
leading bytes, as ``json.loads`` does), and a byte that is not valid there becomes U+FFFD
instead of failing the body.  The strict UTF-8 attempt comes first: plain bodies pay
nothing extra.

Budget: each body is capped (``MAX_BODY``), but a process with hundreds of slow exchanges
could still buffer hundreds of such bodies.  :func:`body_budget` caps the bytes everything
pairwatch holds for itself takes together (client taps, event-stream parsers, middleware
request bodies), charged before the bytes exist; an exchange that does not fit is left
unchecked (``batch.unchecked_request``, never missing: the caller is unaffected).
"""

from __future__ import annotations

import codecs
import json
import os
from typing import Final

from pairwatch.pairing import wire
from pairwatch.pairing.limits import Budget

__all__ = [
    "DEFAULT_BODY_BUDGET",
    "MAX_BODY",
    "UTF8",
    "body_budget",
    "charset_of",
    "parse_body",
]

MAX_BODY: Final = 64 * 1024 * 1024
"""Bytes of one JSON body (or one SSE event) pairwatch will buffer; beyond it, it stops."""

DEFAULT_BODY_BUDGET: Final = 256 * 1024 * 1024
"""Bytes buffered by every HTTP tap of the process together: 256 MiB."""

UTF8: Final = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})
"""Charsets whose bodies are parsed as the bytes they are (JSON text is UTF-8)."""


def charset_of(content_type: str | None) -> str | None:
    """The ``charset`` parameter of a Content-Type, normalised to a Python codec name, or
    None when absent or unknown to Python (the body is then read as JSON text)."""
    if not content_type or ";" not in content_type:  # "application/json": no parameters
        return None
    for param in str(content_type).split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            value = value.strip().strip("\"'").lower()
            try:
                return codecs.lookup(value).name if value else None
            except LookupError:
                return None
    return None


def parse_body(body: bytes, charset: str | None) -> tuple[wire.Payload, bytes | str]:
    """Classify a received body decoded as its client reads it; also return what was parsed
    (bytes when they decoded as they are, else the text)."""
    if charset is not None and charset not in UTF8:
        text = body.decode(charset, "replace")
        return wire.parse(text, wire.Kind.RESULT), text
    payload = wire.parse(body, wire.Kind.RESULT)
    if payload.unparseable != "not_utf8":
        return payload, body
    try:
        detected = json.detect_encoding(body)
    except Exception:
        detected = "utf-8"
    text = body.decode(charset or detected, "replace")
    return wire.parse(text, wire.Kind.RESULT), text


_budget = Budget(DEFAULT_BODY_BUDGET)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_budget.reset)


def body_budget() -> Budget:
    """The budget every HTTP tap shares (tests lower its ``limit``)."""
    return _budget

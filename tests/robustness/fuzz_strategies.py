"""Hypothesis strategies for hostile payloads, and an independent oracle for their books.

``replies()`` mixes arbitrary bytes with near-JSON-RPC text bent in the ways real servers
and proxies bend it: truncated, deeply nested, huge numbers, NaN and Infinity, invalid
UTF-8, a byte-order mark, odd whitespace, duplicate keys.  ``oracle()`` reads a reply the way
the JSON-RPC spec does, without pairwatch's code, and says how many of its elements should
end up paired, unknown-id, null-id, or invalid-only.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

EXAMPLES = int(os.environ.get("PAIRWATCH_FUZZ_EXAMPLES", "0"))


def fuzz_settings(default: int) -> settings:
    """CI runs ``default`` examples; ``PAIRWATCH_FUZZ_EXAMPLES`` sets a long run."""
    return settings(
        max_examples=EXAMPLES or default,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )


SENT_IDS: list[Any] = [0, 1, "x", 3]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = st.one_of(
    st.sampled_from([*SENT_IDS, 1.0, "0", "1", True, False, None, 99, "y", [], {}]),
    st.floats(allow_nan=True, allow_infinity=True),
    json_values,
)
errors = st.one_of(
    st.fixed_dictionaries({"code": st.integers(-33000, 0), "message": st.text(max_size=10)}),
    json_values,
)
_MEMBERS = {
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0, None]),
    "id": ids,
    "result": json_values,
    "error": errors,
    "method": st.one_of(st.text(max_size=8), json_values),
    "params": json_values,
}
elements = st.one_of(
    st.fixed_dictionaries(
        {"jsonrpc": st.just("2.0"), "id": ids}, optional={"result": json_values, "error": errors}
    ),
    st.fixed_dictionaries({}, optional=_MEMBERS),
    json_values,
)
documents = st.one_of(st.lists(elements, max_size=8), elements)


@st.composite
def texts(draw: st.DrawFn) -> bytes:
    """A JSON document, serialised oddly and then perhaps damaged."""
    doc = draw(documents)
    text = json.dumps(doc, allow_nan=True, indent=draw(st.sampled_from([None, 0, 2])))
    if draw(st.booleans()):  # a duplicate key: the last one wins for json, not for all
        text = text.replace('{"', '{"id": 7, "', 1)
    space = draw(st.sampled_from(["", " ", "\t\r\n", "\n\n", "\u00a0", "\x0b"]))
    data = (space + text + space).encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    damage = draw(st.sampled_from(["none", "truncate", "bad_utf8", "huge_number"]))
    if damage == "truncate" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif damage == "bad_utf8":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + data[at:]
    elif damage == "huge_number":
        data = data.replace(b"0", b"1" + b"0" * draw(st.sampled_from([400, 5000])), 1)
    return data


nesting = st.builds(
    lambda depth, cut: (b"[" * depth + b"]" * depth)[: None if cut else 2 * depth],
    st.sampled_from([10, 999, 5000, 100_000]),
    st.booleans(),
)
replies = st.one_of(texts(), st.binary(max_size=120), nesting)


# --------------------------------------------------------------------------- oracle
def _key(value: Any) -> tuple[str, Any] | None:
    """JSON identity: 1 and 1.0 are one id, "1" another, booleans and the rest none."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return ("n", value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return ("n", int(value) if value.is_integer() else value)
    if isinstance(value, str):
        return ("s", value)
    return None


def _int_or_float(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)


def oracle(reply: bytes, sent: list[Any]) -> dict[str, int] | None:
    """Expected counts for one reply to one batch, or None when it is not JSON at all.

    ``responses``: response-shaped elements (an object without ``method`` carrying ``result``,
    ``error``, ``id`` or ``jsonrpc``); each is exactly one of paired, unknown or null.
    ``invalid_only``: elements that are not JSON-RPC at all.
    """
    data = reply[3:] if reply.startswith(b"\xef\xbb\xbf") else reply
    try:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            # Read as the client would: JSON text (UTF-8, or UTF-16/32 by its first bytes),
            # a byte invalid there read as U+FFFD rather than failing the whole body.
            text = data.decode(json.detect_encoding(data), "replace")
        if not text.strip():
            return {"empty": 1}
        # An integer longer than Python's digit limit is still JSON (pairwatch reads it as a
        # float, never a usable id): int() refusing it must not make the body "not JSON".
        value = json.loads(text, parse_int=_int_or_float)
    except (ValueError, RecursionError):
        return None
    items = value if isinstance(value, list) else [value]
    pending = [_key(i) for i in sent]
    counts = {"responses": 0, "paired": 0, "unknown": 0, "null": 0, "invalid_only": 0}
    for item in items:
        if not isinstance(item, dict):
            counts["invalid_only"] += 1
            continue
        if "method" in item:
            continue  # a call from the server: never a response
        if not any(k in item for k in ("result", "error", "id", "jsonrpc")):
            counts["invalid_only"] += 1
            continue
        counts["responses"] += 1
        if item.get("id") is None:
            counts["null"] += 1
            continue
        key = _key(item["id"])
        if key is not None and key in pending:
            pending.remove(key)
            counts["paired"] += 1
        else:
            counts["unknown"] += 1
    return counts

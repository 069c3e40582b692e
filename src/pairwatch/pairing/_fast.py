"""The msgspec decoder: :mod:`pairwatch.pairing.wire`'s classification without building values.

``json.loads`` builds every value of a body (every result, every params array) only for
pairwatch to read four members per element.  msgspec decodes each element straight into a
struct of those members (``result`` kept as an undecoded span, the rest skipped); a payload
of the plain shape (every element a well-formed request, or result) is validated in C by
one typed decode (:func:`plain`).

The same results, or none: :func:`parse_bytes` returns ``None`` whenever it cannot be sure
(msgspec refuses the body, the body is not valid UTF-8, ...) and
:func:`pairwatch.pairing.wire.parse` then takes the standard library's path, the reference.
``tests/equivalence/test_wire_decoders.py`` runs the same cases and random JSON both ways.
One difference is left on purpose: a body nested within a few levels of the interpreter's
recursion limit may decode here and be ``too_deep`` there, whose limit varies with the
caller's stack depth anyway.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec

from pairwatch.pairing.depth import MAX_DEPTH, too_deep
from pairwatch.pairing.elements import (
    ABSENT,
    MAX_ID_CHARS,
    Kind,
    Message,
    Payload,
    Plain,
    classify_members,
)

__all__ = ["has_jsonrpc_member", "parse_bytes", "plain"]

_UNSET: Any = msgspec.UNSET


class _Element(msgspec.Struct, gc=False):
    """The members pairing looks at; every other member is skipped unread."""

    jsonrpc: Any = _UNSET
    id: Any = _UNSET
    method: Any = _UNSET
    result: msgspec.Raw = _UNSET
    error: Any = _UNSET


_decoder: msgspec.json.Decoder[list[_Element] | _Element] = msgspec.json.Decoder(
    list[_Element] | _Element
)


_ShortId = int | Annotated[str, msgspec.Meta(max_length=MAX_ID_CHARS)]


class _PlainRequest(msgspec.Struct, gc=False):
    """A well-formed request: anything else fails validation and takes the general path."""

    jsonrpc: Literal["2.0"]
    id: _ShortId
    method: str


class _PlainResult(msgspec.Struct, gc=False):
    """A well-formed result (no error, no method); anything else fails validation."""

    jsonrpc: Literal["2.0"]
    id: _ShortId
    result: msgspec.Raw
    error: msgspec.UnsetType = msgspec.UNSET
    method: msgspec.UnsetType = msgspec.UNSET


_plain_requests: msgspec.json.Decoder[list[_PlainRequest] | _PlainRequest] = msgspec.json.Decoder(
    list[_PlainRequest] | _PlainRequest
)
_plain_results: msgspec.json.Decoder[list[_PlainResult] | _PlainResult] = msgspec.json.Decoder(
    list[_PlainResult] | _PlainResult
)


_NAMES: dict[str, str] = {}
_NAMES_CAP = 1024
_SINGLES: dict[str, list[str]] = {}


def _shared(methods: list[str]) -> list[str]:
    """The same method names as one string object each, not one copy per request.

    A pending request keeps its method name until it is answered: decoded afresh per body,
    each pending id would hold its own copy.  The table is bounded (a client inventing names
    cannot grow it): past the cap it starts over.
    """
    if len(_NAMES) > _NAMES_CAP:
        _NAMES.clear()
    first = methods[0]
    name = _NAMES.setdefault(first, first)
    if methods.count(first) == len(methods):  # one method for the whole batch: common
        return [name] * len(methods)
    return list(map(_NAMES.setdefault, methods, methods))


def _single(method: str) -> list[str]:
    """The methods list of a one-request payload: one shared list per name.

    A single request is most of what a stream channel holds pending, and a list of its own
    would cost each one more than its name.  Nothing writes to a batch's methods once it is
    sent (every batch gets its list from the payload, read-only from then on).
    """
    found = _SINGLES.get(method)
    if found is None:
        if len(_SINGLES) > _NAMES_CAP or len(_NAMES) > _NAMES_CAP:
            _SINGLES.clear()
            _NAMES.clear()
        name = _NAMES.setdefault(method, method)
        found = _SINGLES[name] = [name]
    return found


def plain(raw: object, hint: str, measured: bool = False) -> Payload | None:
    """The whole payload as columns when ``raw`` is JSON-RPC whose every element has the
    plain shape of ``hint``'s direction, else None
    (:func:`pairwatch.pairing.wire.parse_plain`).

    A body without the word ``jsonrpc`` is never decoded (a substring search), nor one that
    could nest too deep, nor one that is not ASCII (left to :func:`parse_bytes`' checks).
    ``measured``: the caller (:func:`parse_bytes`) has measured the depth already, and a
    body without ``jsonrpc`` fails the typed decode anyway, so neither check is paid twice.

    msgspec validates each element in C (version, id type and length, method or result,
    no error), so a plain body costs one decode and, for a batch, one or two list
    comprehensions.  The :class:`Payload` is built without its ``__init__``: this runs on
    every body of every exchange.
    """
    if not measured:
        if type(raw) is bytes:
            # find, not ``in``: bytes' ``in`` tries the operand as an int first and formats
            # a TypeError it then drops.
            if raw.find(b"jsonrpc") < 0:
                return None
        elif type(raw) is not str or "jsonrpc" not in raw:
            return None
        if len(raw) > MAX_DEPTH and too_deep(raw):
            return None
    data: Any = raw  # bytes or str from here on (the checks above, or the caller's)
    if not data.isascii():
        return None
    try:
        if hint is _REQUEST:
            requests = _plain_requests.decode(data)
            if isinstance(requests, list):
                is_batch = True
                if len(requests) == 1:  # no comprehension (a function call) for one element
                    one = requests[0]
                    keys: Any = (one.id,)
                    methods = _SINGLES.get(one.method) or _single(one.method)
                elif requests:
                    keys = [e.id for e in requests]
                    methods = _shared([e.method for e in requests])
                else:
                    return None
            else:
                is_batch, keys = False, (requests.id,)
                methods = _SINGLES.get(requests.method) or _single(requests.method)
            columns = _columns(Plain, (_REQUEST, keys, methods))
        else:
            results = _plain_results.decode(data)
            if isinstance(results, list):
                is_batch = True
                if len(results) == 1:
                    keys = (results[0].id,)
                elif results:
                    keys = [e.id for e in results]
                else:
                    return None
            else:
                is_batch, keys = False, (results.id,)
            columns = _columns(Plain, (_RESULT, keys, None))
    except Exception:  # not the plain shape: the general path classifies it
        return None
    payload: Payload = _blank(Payload)  # what Payload(is_batch, None, None, columns) holds
    payload.is_batch = is_batch
    payload._messages = None
    payload.unparseable = None
    payload.plain = columns
    payload.size = len(keys)
    return payload


_columns = tuple.__new__
"""How :func:`plain` builds a :class:`Plain`: the NamedTuple's own ``__new__`` is a Python
function, one more call per body for the same tuple."""
_blank = object.__new__
_REQUEST: Final = Kind.REQUEST
_RESULT: Final = Kind.RESULT


def parse_bytes(raw: bytes | str, hint: str | None = None) -> Payload | None:
    """Classify a JSON body, or return None to let the stdlib path decide."""
    if hint is not None:
        found = plain(raw, hint, True)
        if found is not None:
            return found
    if not raw.isascii():
        if isinstance(raw, str):
            return None  # rare: let the stdlib path handle surrogates and BOMs
        try:
            raw.decode("utf-8")  # json refuses invalid UTF-8 anywhere; msgspec only in strings
        except UnicodeDecodeError:
            return None
    try:
        value = _decoder.decode(raw)
    except Exception:  # malformed, not objects, out of range, too deep: the stdlib decides
        return None
    if isinstance(value, list):
        return Payload(True, tuple(map(_classify, value)))
    return Payload(False, (_classify(value),))


def _classify(e: _Element) -> Message:
    """:func:`pairwatch.pairing.wire.classify_element` for a decoded struct: the same rules."""
    return classify_members(
        _absent(e.id),
        _absent(e.jsonrpc),
        _absent(e.method),
        e.result is not _UNSET,
        _absent(e.error),
    )


def _absent(value: Any) -> Any:
    return ABSENT if value is _UNSET else value


_members: msgspec.json.Decoder[dict[str, msgspec.Raw] | list[msgspec.Raw]] = msgspec.json.Decoder(
    dict[str, msgspec.Raw] | list[msgspec.Raw]
)
_object: msgspec.json.Decoder[dict[str, msgspec.Raw]] = msgspec.json.Decoder(dict[str, msgspec.Raw])


def has_jsonrpc_member(text: str) -> bool:
    """An object with a ``jsonrpc`` member, or an array holding one, judged without building
    any value: members stay undecoded ``Raw`` spans, and an array stops at its first match."""
    try:
        value = _members.decode(text)
    except Exception:  # not JSON, or neither an object nor an array
        return False
    if isinstance(value, dict):
        return "jsonrpc" in value
    for element in value:
        raw = bytes(element)
        if raw[:1] != b"{":
            continue
        try:
            if "jsonrpc" in _object.decode(raw):
                return True
        except Exception:
            continue
    return False

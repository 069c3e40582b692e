"""The JSON-RPC 2.0 element model and its classification rules: pure, no I/O, no decoding.

Integrations hand :mod:`pairwatch.pairing.wire` whatever their client library holds at the
moment a message crosses the wire; whichever decoder reads it (the stdlib one there, the
msgspec one in :mod:`pairwatch.pairing._fast`), every element ends up here, in
:func:`classify_members`, so the rules are written once and both decoders obey them.

Why id keys are plain Python values: JSON identity wants ``1`` and ``1.0`` to be one id and
``"1"`` to be another, which is precisely how ``int``, ``float`` and ``str`` hash and compare.
The one trap is ``bool`` (``True == 1``), so booleans, objects, arrays, NaN and infinities are
refused as ids before they reach a dict.

Messages are named tuples: a parse creates one per element, and tuple construction is several
times cheaper than a frozen dataclass on this path.

Nothing here imports the rest of pairwatch.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Final, NamedTuple

MAX_ID_CHARS: Final = 256
"""String ids longer than this are kept as a :class:`LongId` digest, not as text."""


class LongId:
    """A string id too long to keep in a pending table: its length and a 128-bit digest.

    A server or client may send megabyte ids; a pending table holding them as text would
    keep megabytes per request.  Two long ids are equal exactly when their texts are (up to
    a 2**-128 digest collision), and never equal to a ``str``, ``int`` or ``float`` key, so
    JSON identity holds and pairing stays exact while each key costs a small fixed size.
    """

    __slots__ = ("digest", "head", "length")

    def __init__(self, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")  # json.loads may yield lone surrogates
        self.digest = hashlib.blake2b(data, digest_size=16).digest()
        self.length = len(text)
        self.head = text[:32]

    def __eq__(self, other: object) -> bool:
        return type(other) is LongId and other.digest == self.digest and other.length == self.length

    def __hash__(self) -> int:
        return hash(self.digest)

    def __str__(self) -> str:
        return f"{self.head}...[{self.length} chars, blake2b:{self.digest.hex()}]"

    __repr__ = __str__


IdKey = int | float | str | LongId
"""A hashable id that follows JSON identity (``1 == 1.0``, ``"1" != 1``)."""


class Kind:
    """What an element of a payload is, judged by its members alone.

    Plain string constants, not an Enum: membership tests run for every element, and an
    Enum's hash is computed in Python while a str's is cached in C.
    """

    REQUEST: Final = "request"  # method + id: a call that expects a response
    NOTIFICATION: Final = "notification"  # method, no id: no response expected
    RESULT: Final = "result"  # a response carrying result
    ERROR: Final = "error"  # a response carrying error
    RESPONSE_INVALID: Final = "response_invalid"  # response-shaped, neither/both result, error
    INVALID: Final = "invalid"  # not an object, or nothing JSON-RPC about it


RESPONSE_KINDS: Final = frozenset({Kind.RESULT, Kind.ERROR, Kind.RESPONSE_INVALID})
CALL_KINDS: Final = frozenset({Kind.REQUEST, Kind.NOTIFICATION})


class IdState:
    """How an element's id member looks; decides pairing before the key is consulted."""

    ABSENT: Final = "absent"
    NULL: Final = "null"
    VALID: Final = "valid"
    BAD_TYPE: Final = "bad_type"  # bool, object, array, NaN/Infinity: never pairs


class Message(NamedTuple):
    """One element of a payload, reduced to what pairing needs.

    ``problem`` names the first rule the element breaks (``None`` when it is well formed); it
    is the label of ``batch.invalid_response`` and never contains payload data.
    """

    kind: str
    id_state: str
    key: IdKey | None
    method: str | None
    problem: str | None
    error_code: int | None = None

    @property
    def is_response(self) -> bool:
        return self.kind in RESPONSE_KINDS


class Plain(NamedTuple):
    """A payload whose every element is a well-formed request, or a well-formed result.

    That is nearly every payload a healthy client sends or reads, and the ledger can then
    pair it with a few C-level list and dict operations instead of a loop per element.
    ``kind`` is :attr:`Kind.REQUEST` or :attr:`Kind.RESULT`; ``keys`` are valid id keys
    (ints or short strings), a 1-tuple for one element (smaller than a list, and the ledger
    keeps these keys for every pending single request); ``methods`` run beside them
    for requests.
    """

    kind: str
    keys: list[IdKey] | tuple[IdKey]
    methods: list[str] | None

    def messages(self) -> tuple[Message, ...]:
        """The same messages :func:`classify` gives for such elements."""
        if self.methods is not None:
            return tuple(
                Message(self.kind, IdState.VALID, key, method, None)
                for key, method in zip(self.keys, self.methods, strict=True)
            )
        return tuple(Message(self.kind, IdState.VALID, key, None, None) for key in self.keys)


class Payload:
    """A whole payload: one JSON value that was either an array (a batch) or a single element.

    ``unparseable`` is set when the payload is not JSON at all (then ``messages`` is empty);
    ``empty_batch`` marks ``[]``, which the spec calls invalid but servers still send.
    ``plain`` is set when every element is a well-formed request or result; ``messages`` is
    then built only if someone asks for it.  ``size`` is the number of elements.
    :func:`pairwatch.pairing._fast.plain` builds the plain kind without ``__init__`` (it
    sets the five slots itself): keep the two in step.
    """

    __slots__ = ("_messages", "is_batch", "plain", "size", "unparseable")

    def __init__(
        self,
        is_batch: bool,
        messages: tuple[Message, ...] | None = (),
        unparseable: str | None = None,
        plain: Plain | None = None,
    ) -> None:
        self.is_batch = is_batch
        self._messages = messages if messages is not None or plain is None else None
        self.unparseable = unparseable
        self.plain = plain
        if self._messages is None and plain is not None:
            self.size = len(plain.keys)
        else:
            self.size = len(messages or ())

    @property
    def messages(self) -> tuple[Message, ...]:
        found = self._messages
        if found is None:
            assert self.plain is not None
            found = self._messages = self.plain.messages()
        return found

    @property
    def empty_batch(self) -> bool:
        return self.is_batch and not self.size and self.unparseable is None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Payload):
            return NotImplemented
        return (self.is_batch, self.messages, self.unparseable) == (
            other.is_batch,
            other.messages,
            other.unparseable,
        )

    def __hash__(self) -> int:
        return hash((self.is_batch, self.messages, self.unparseable))

    def __repr__(self) -> str:
        return (
            f"Payload(is_batch={self.is_batch!r}, messages={self.messages!r}, "
            f"unparseable={self.unparseable!r})"
        )


UNPARSEABLE_EMPTY: Final = Payload(is_batch=False, messages=(), unparseable="empty")


def id_key(value: object) -> tuple[str, IdKey | None]:
    """Return the id's state and, for a usable id, its key.

    Floats that are whole numbers become ints so that ``1.0`` and ``1`` hash alike even when a
    float is too large for the default equality shortcut; other floats stay floats.
    """
    if value is None:
        return IdState.NULL, None
    t = type(value)
    if t is int:
        return IdState.VALID, value  # type: ignore[return-value]
    if t is str:
        text: str = value  # type: ignore[assignment]
        return IdState.VALID, text if len(text) <= MAX_ID_CHARS else LongId(text)
    if t is float:
        f: float = value  # type: ignore[assignment]
        if math.isfinite(f):
            return IdState.VALID, int(f) if f.is_integer() else f
        return IdState.BAD_TYPE, None
    if isinstance(value, str):  # str subclasses: compare by value
        return id_key(str(value))
    if isinstance(value, int) and not isinstance(value, bool):
        return IdState.VALID, int(value)
    return IdState.BAD_TYPE, None


def is_discouraged_id(key: IdKey | None, state: str) -> bool:
    """Null and fractional ids are legal in requests but the spec discourages them."""
    return state is IdState.NULL or type(key) is float


def valid_error(error: object) -> tuple[str | None, int | None]:
    if not isinstance(error, dict):
        return "error_not_object", None
    code = error.get("code")
    if type(code) is not int:
        return "error_code_not_integer", None
    if not isinstance(error.get("message"), str):
        return "error_message_not_string", code
    return None, code


ABSENT: Final[Any] = object()
"""Marks a member that is not in the element (``null`` is a value, not an absence)."""


def classify_members(
    raw_id: object, version: object, method: object, has_result: bool, error: object
) -> Message:
    """The classification rules, on an element's members (``ABSENT`` where missing).

    The one place the rules live: the stdlib path passes a dict's members, the msgspec path
    a struct's, so both classify alike by construction.
    """
    if raw_id is not ABSENT:
        state, key = id_key(raw_id)
    else:
        state, key = IdState.ABSENT, None
    version_ok = version == "2.0"
    if method is not ABSENT:
        problem = None if version_ok else "bad_version"
        if not isinstance(method, str):
            problem = "method_not_string"
            method = None
        if state is IdState.ABSENT:
            return Message(Kind.NOTIFICATION, state, None, method, problem)
        if state is IdState.BAD_TYPE:
            problem = problem or "bad_id_type"
        return Message(Kind.REQUEST, state, key, method, problem)
    has_error = error is not ABSENT
    if has_result and has_error:
        return Message(Kind.RESPONSE_INVALID, state, key, None, "both_result_and_error")
    if has_error:
        problem, code = valid_error(error)
        if problem is None and not version_ok:
            problem = "bad_version"
        if problem is None and state is IdState.BAD_TYPE:
            problem = "bad_id_type"
        if problem is None and state is IdState.ABSENT:
            problem = "id_absent"
        return Message(Kind.ERROR, state, key, None, problem, code)
    if has_result:
        problem = None
        if not version_ok:
            problem = "bad_version"
        elif state is IdState.BAD_TYPE:
            problem = "bad_id_type"
        elif state is IdState.ABSENT:
            problem = "id_absent"
        return Message(Kind.RESULT, state, key, None, problem)
    if raw_id is not ABSENT or version is not ABSENT:
        return Message(Kind.RESPONSE_INVALID, state, key, None, "no_result_or_error")
    return Message(Kind.INVALID, state, key, None, "not_jsonrpc")


def classify_element(element: object) -> Message:
    """Classify one decoded element.  Never raises, whatever the element is."""
    if not isinstance(element, dict):
        return Message(Kind.INVALID, IdState.ABSENT, None, None, "not_an_object")
    get = element.get
    return classify_members(
        get("id", ABSENT),
        get("jsonrpc", ABSENT),
        get("method", ABSENT),
        "result" in element,
        get("error", ABSENT),
    )


def classify(decoded: object) -> Payload:
    """Classify an already decoded JSON value (a dict, a list, or anything else)."""
    if isinstance(decoded, list):
        return Payload(True, tuple(classify_element(e) for e in decoded))
    return Payload(False, (classify_element(decoded),))

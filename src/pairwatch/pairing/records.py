"""The records the ledger keeps and hands to its sinks.

Plain slotted classes rather than dataclasses with defaults so that a pending id costs a few
dozen bytes: the ledger may hold tens of thousands of them for a slow server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Generic, TypeVar, overload

from pairwatch.pairing.wire import IdKey

_NONE: Final = (None,)


Ended = tuple[str, float, str]
"""How a batch closed: ``(reason, at, diagnosis)``.  :class:`Batch` reads it by name
(``close_reason``, ``closed_at``, ``diagnosis``); readers that need all three unpack it.  A
plain tuple, not a NamedTuple: one waits in the drain queue for every closed batch, and the
collector stops tracking a plain tuple of strings and floats, never a subclass's."""

NOT_ENDED: Final[Ended] = ("", 0.0, "")
"""What :attr:`Batch.ended` reads as while open, for readers that unpack it whole."""
_T = TypeVar("_T")


def all_distinct(keys: Sequence[IdKey | None]) -> bool:
    """Whether no id appears twice among ``keys``."""
    return len(keys) == 1 or len(set(keys)) == len(keys)


class Call:
    """A read-only view of one request of a closed (or open) batch.

    The ledger keeps a batch's requests as parallel lists, which is several times cheaper
    than one object per request on the hot path; spans, the audit report and tests read
    these views, built on demand by :attr:`Batch.calls`.
    """

    __slots__ = (
        "batch",
        "duplicate",
        "error_code",
        "index",
        "invalid",
        "key",
        "method",
        "outcome",
        "received_at",
        "sent_at",
    )

    def __init__(self, batch: Batch, index: int) -> None:
        self.batch = batch
        self.index = index
        self.key: IdKey | None = batch.keys[index]
        self.method: str | None = batch.methods[index]
        self.sent_at = batch.sent_at
        self.received_at: float | None = batch.received[index]
        self.error_code: int | None = (batch.error_codes or {}).get(index)
        self.invalid = index in (batch.invalid_at or ())
        self.duplicate = index in (batch.duplicate_at or ())
        if self.received_at is not None:
            self.outcome: str | None = "paired"
        else:
            self.outcome = None if batch.open else "missing"

    @property
    def latency(self) -> float | None:
        if self.received_at is None:
            return None
        return self.received_at - self.sent_at


class _LateReplies:
    """Replies for ids whose request had already closed as missing by timeout: how many
    (``late``, also counted in ``unknown``), how late and which (allocated when late).

    No storage here (so that no subclass gets a ``__dict__``): :class:`Tally` keeps the two
    fields in slots, :class:`Batch` as rare fields.  The writes below are to those.
    """

    __slots__ = ()

    late: int
    _late: tuple[list[float], list[IdKey]] | None

    @property
    def lateness(self) -> list[float]:
        """Seconds after its timeout each late reply came (read-only)."""
        return self._late[0] if self._late is not None else []

    @property
    def late_keys(self) -> list[IdKey]:
        """The ids of the first 16 late replies (read-only)."""
        return self._late[1] if self._late is not None else []

    def add_late(self, key: IdKey, seconds: float) -> None:
        late = self._late
        if late is None:
            late = self._late = ([], [])  # type: ignore[misc]  # see the class docstring
        self.late += 1  # type: ignore[misc]
        late[0].append(seconds)
        if len(late[1]) < 16:
            late[1].append(key)

    def _add_late_of(self, other: _LateReplies) -> None:
        if other._late is None:
            return
        late = self._late
        if late is None:
            late = self._late = ([], [])  # type: ignore[misc]
        self.late += other.late  # type: ignore[misc]
        late[0].extend(other._late[0])
        late[1].extend(other._late[1][: max(0, 16 - len(late[1]))])


class Tally(_LateReplies):
    """Responses that were classified but belong to no call: unknown, null-id, invalid."""

    __slots__ = (
        "_late", "after_withdrawal", "invalid", "late", "null", "unknown", "unknown_keys",
        "violations",
    )  # fmt: skip

    def __init__(self) -> None:
        self.after_withdrawal = 0  # replies for ids the caller had withdrawn: not unknown
        self.late = 0
        self._late = None
        self.unknown = 0
        self.null = 0
        self.unknown_keys: list[IdKey] = []
        self.invalid: dict[str, int] | None = None
        self.violations: dict[str, int] | None = None

    def add_invalid(self, reason: str) -> None:
        if self.invalid is None:
            self.invalid = {}
        self.invalid[reason] = self.invalid.get(reason, 0) + 1

    def add_violation(self, reason: str) -> None:
        if self.violations is None:
            self.violations = {}
        self.violations[reason] = self.violations.get(reason, 0) + 1

    @property
    def empty(self) -> bool:
        return not (
            self.unknown or self.null or self.invalid or self.violations or self.after_withdrawal
        )


def _merge(into: dict[str, int] | None, more: dict[str, int] | None) -> dict[str, int] | None:
    if not more:
        return into
    into = dict(into) if into else {}
    for k, v in more.items():
        into[k] = into.get(k, 0) + v
    return into


class _Rare(Generic[_T]):
    """A :class:`Batch` field that most batches never write: read as its default until then,
    kept in the batch's ``rare`` dict once written.

    Not an instance ``__dict__`` with class-level defaults: since Python 3.11 every instance
    of such a class carries a values array for the names its class's instances have written,
    and a pending single request is mostly its batch.  A descriptor read is a call, so the
    hot paths ask ``batch.rare is None`` first.
    """

    __slots__ = ("default", "name")

    def __init__(self, default: _T) -> None:
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, batch: None, owner: type) -> _Rare[_T]: ...

    @overload
    def __get__(self, batch: Batch, owner: type) -> _T: ...

    def __get__(self, batch: Batch | None, owner: type) -> _T | _Rare[_T]:
        if batch is None:
            return self
        rare = batch.rare
        if rare is None:
            return self.default
        return rare.get(self.name, self.default)  # type: ignore[no-any-return]

    def __set__(self, batch: Batch, value: _T) -> None:
        rare = batch.rare
        if rare is None:
            batch.rare = {self.name: value}
        else:
            rare[self.name] = value


class Batch(_LateReplies):
    """A JSON array sent in one write, or a single request tracked as a batch of one.

    Counters accumulate while the batch is open and are emitted once, at close: one metric
    add per counter per batch keeps the cost off the per-id path.

    Memory: the ledger may hold a hundred thousand pending batches, most of them single
    requests.  Only what every batch uses is a slot; what records trouble (unknown ids,
    duplicates, errors, evictions...) reads as a default until written, and is then kept in
    ``rare`` (see :class:`_Rare`), which stays None for nearly every batch.
    ``keys``, ``methods`` and ``received`` are read-only for everyone but the ledger: they
    may be shared with the decoded payload, and a single request's ``methods`` with every
    other single request of the same method.
    """

    __slots__ = (
        "__weakref__", "context", "ended", "is_batch", "keys", "methods", "open", "paired",
        "rare", "received", "sent_at", "timeout",
    )  # fmt: skip

    # Set only when something happens; read through these defaults otherwise.
    error_codes = _Rare[dict[int, int] | None](None)  # index -> error code, when errors
    invalid_at = _Rare[set[int] | None](None)  # indexes paired with an invalid response
    duplicate_at = _Rare[set[int] | None](None)  # indexes whose id was already pending
    shared = _Rare(False)  # a later batch reused one of these ids while still pending
    # Requests from this index on were never tracked (one batch over max_pending_ids): they
    # close as missing with reason "evicted".  -1: every request is tracked.
    evicted_from = _Rare(-1)
    # index -> (request text, response text), only with Options(capture_payloads=True).
    captured = _Rare[dict[int, tuple[str | None, str | None]] | None](None)
    expected_nothing = _Rare(False)
    notifications = _Rare(0)
    unknown = _Rare(0)
    null = _Rare(0)
    missing = _Rare(0)
    # Unanswered requests that are not missing: (kind, reason) for the whole batch, as
    # ("unchecked", "body_cap") when pairwatch could not read the reply or ("withdrawn",
    # "switched_off"); per request index, as ("withdrawn", "cancelled") for one request the
    # caller cancelled.  At close they are counted in ``excused`` by (kind, reason), never
    # in ``missing``.
    excused_as = _Rare[tuple[str, str] | None](None)
    excused_at = _Rare[dict[int, tuple[str, str]] | None](None)
    excused = _Rare[dict[tuple[str, str], int] | None](None)
    after_withdrawal = _Rare(0)  # replies for ids withdrawn moments ago (not unknown)
    # Unknown-id replies that came after this batch had closed (handed to the sink as a stray
    # tally, never re-counted here): kept for per-batch readers such as the audit.
    late_unknown = _Rare(0)
    # Of ``unknown`` (absorbed while open): replies for ids of *earlier* requests that had
    # closed as missing by timeout, with seconds after that timeout; contract-wise still
    # unknown-id responses, diagnosed ``late_response``.
    late = _Rare(0)
    _late = _Rare[tuple[list[float], list[IdKey]] | None](None)
    # Requests that reused the id of a request closed as missing by timeout moments ago
    # (client evidence, but not ``batch.duplicate_id``: that id was no longer pending).
    reused_timed_out = _Rare(0)
    # Unknown-id replies whose id equals one of this batch's missing ids under another JSON
    # type ("0" for 0); set at close.
    type_mismatch = _Rare(0)
    duplicates_in = _Rare(0)
    duplicates_cross = _Rare(0)
    out_of_order = _Rare(False)
    count_mismatch = _Rare(False)
    # Allocated at the first unknown id: an empty list per pending request would cost 56
    # bytes each, for a list nearly every batch leaves empty.
    _unknown_keys = _Rare[list[IdKey] | None](None)
    invalid = _Rare[dict[str, int] | None](None)
    invalid_requests = _Rare[dict[str, int] | None](None)
    violations = _Rare[dict[str, int] | None](None)
    # Elements sent, when not one per key (notifications, answers to the server, invalid
    # elements): ``size`` reads len(keys) otherwise.
    _size = _Rare(-1)
    # The highest index paired so far, for ``out_of_order``: written only for batches of
    # several requests paired one reply at a time (a single request is never out of order,
    # and a reply that pairs a whole batch in order never needs it).
    high_index = _Rare(-1)

    def __init__(
        self,
        is_batch: bool,
        size: int,
        keys: Sequence[IdKey | None],
        methods: Sequence[str | None],
        sent_at: float,
        context: object = None,
        received: list[float | None] | None = None,
    ) -> None:
        self.is_batch = is_batch
        self.keys = keys  # per request, in send order; None for ids that can never pair
        self.methods = methods
        # When each request was answered, None until then.  A single request starts with
        # one shared, read-only (None,): most of what a stream keeps pending is single
        # requests, and a list of their own would cost each one more memory.  The ledger
        # writes a new list when the reply comes (see ``Ledger._pair``).
        self.received: Sequence[float | None] = (
            received if received is not None else _NONE if len(keys) == 1 else [None] * len(keys)
        )
        self.sent_at = sent_at
        self.context = context
        # Seconds from ``sent_at`` to the deadline: the limits' own float, shared by every
        # batch, where a deadline of its own would cost each pending request a float.
        self.timeout = 0.0
        self.open = True
        self.paired = 0
        # How it closed, once it has: as three slots, every pending request would carry
        # them empty.  Written whole when the batch closes, read whole by the drain.
        self.ended: Ended | None = None
        # The fields read through _Rare descriptors, once one is written: None for the
        # batches nothing unusual happened to (read-only outside this module).
        self.rare: dict[str, Any] | None = None
        if size != len(keys):
            self._size = size

    @property
    def deadline(self) -> float:
        """When this batch times out (moved later by :meth:`postpone`)."""
        return self.sent_at + self.timeout

    def postpone(self, deadline: float) -> None:
        """Move the deadline to ``deadline``, never earlier: an HTTP client restarts its
        read timeout with every chunk, and the books must not give up first."""
        if deadline > self.sent_at + self.timeout:
            self.timeout = deadline - self.sent_at

    @property
    def tracked(self) -> int:
        """Requests registered in the books: all but those evicted (see ``evicted_from``)."""
        if self.rare is not None:
            cut = self.evicted_from
            if cut >= 0:
                return cut
        return len(self.keys)

    @property
    def size(self) -> int:
        """Elements sent in the payload, requests or not."""
        if self.rare is not None:
            size = self._size
            if size >= 0:
                return size
        return len(self.keys)

    @property
    def close_reason(self) -> str:
        """Why the batch closed ("complete", "timeout", "body_end"...); "" while open."""
        ended = self.ended
        return ended[0] if ended is not None else ""

    @property
    def closed_at(self) -> float:
        """When it closed (its send time while open)."""
        ended = self.ended
        return ended[1] if ended is not None else self.sent_at

    @property
    def diagnosis(self) -> str:
        """What its evidence shows (:mod:`pairwatch.pairing.diagnosis`); "" while open."""
        ended = self.ended
        return ended[2] if ended is not None else ""

    @property
    def unknown_keys(self) -> list[IdKey]:
        """The first 16 unknown ids this batch absorbed (read-only)."""
        keys = self._unknown_keys
        return keys if keys is not None else []

    @property
    def requests(self) -> int:
        return len(self.keys)

    @property
    def calls(self) -> list[Call]:
        """One view per request, in send order (built on demand, off the hot path)."""
        return [Call(self, i) for i in range(len(self.keys))]

    def answered_by(self, keys: Sequence[IdKey], now: float) -> bool:
        """Pair a reply that answers every request at once, in request order (the ids of a
        healthy reply, compared in C); False, changing nothing, for any other reply."""
        if (
            self.paired
            or (
                self.rare is not None
                and (self.shared or self.duplicate_at is not None or self.excused_at is not None)
            )
            or self.keys != keys
        ):
            return False
        n = len(keys)
        self.received = (now,) * n  # a tuple: every slot is written, and it holds no objects
        self.paired = n
        return True

    def unanswered(self) -> list[tuple[int, IdKey]]:
        """Count the requests no reply answered as missing; return their indexes and ids
        (those that had a usable id)."""
        found: list[tuple[int, IdKey]] = []
        missing = 0
        excused = self.rare is not None and (
            self.excused_as is not None or self.excused_at is not None
        )
        for index, (key, received) in enumerate(zip(self.keys, self.received, strict=True)):
            if received is None:
                why = self.excused_for(index) if excused else None
                if why is not None:
                    self.excuse(why)
                    continue
                missing += 1
                if key is not None:
                    found.append((index, key))
        if missing:
            self.missing += missing
        return found

    @property
    def awaits_nothing(self) -> bool:
        """Every request is answered or withdrawn: nothing more is awaited."""
        at = self.excused_at
        return self.paired + (len(at) if at else 0) >= len(self.keys)

    def excused_for(self, index: int) -> tuple[str, str] | None:
        """Why request ``index``, if left unanswered, is not missing: (kind, reason), as
        ("withdrawn", "cancelled"); None when it is missing.  The one place that says so."""
        if self.rare is None:
            return None
        whole = self.excused_as
        if whole is not None:
            return whole
        at = self.excused_at
        return at.get(index) if at else None

    def excuse(self, why: tuple[str, str], n: int = 1) -> None:
        """Count ``n`` unanswered requests under ``why`` instead of as missing."""
        counts = self.excused
        if counts is None:
            counts = self.excused = {}
        counts[why] = counts.get(why, 0) + n

    @property
    def excused_total(self) -> int:
        """Unanswered requests counted as withdrawn or unchecked rather than missing."""
        counts = self.excused
        return sum(counts.values()) if counts else 0

    def answer(self, index: int, now: float, error: bool, code: int | None, invalid: bool) -> None:
        """Record the reply that paired with request ``index``: when it came and, for an
        error or malformed reply, its code and that it was invalid."""
        received = self.received
        if type(received) is not list:  # the shared (None,) of a single request
            received = self.received = list(received)
        received[index] = now
        if error:
            if code is not None:
                if self.error_codes is None:
                    self.error_codes = {}
                self.error_codes[index] = code
            if invalid:
                if self.invalid_at is None:
                    self.invalid_at = set()
                self.invalid_at.add(index)
        self.paired += 1

    def absorb(self, tally: Tally) -> None:
        """Attribute responses that paired with nothing to this (still open) batch."""
        if tally.unknown:  # written only when non-zero: see the class docstring
            self.unknown += tally.unknown
        if tally.null:
            self.null += tally.null
        if tally.unknown_keys:
            keys = self._unknown_keys
            if keys is None:
                keys = self._unknown_keys = []
            if len(keys) < 16:
                keys.extend(tally.unknown_keys[: 16 - len(keys)])
        self._add_late_of(tally)
        if tally.after_withdrawal:
            self.after_withdrawal += tally.after_withdrawal
        if tally.invalid:
            self.invalid = _merge(self.invalid, tally.invalid)
        if tally.violations:
            self.violations = _merge(self.violations, tally.violations)

"""The records the ledger keeps and hands to its sinks.

Plain slotted classes rather than dataclasses with defaults so that a pending id costs a few
dozen bytes: the ledger may hold tens of thousands of them for a slow server.
"""

from __future__ import annotations

from pairwatch.wire import IdKey


class Call:
    """One request of a batch: registered at send, paired or declared missing later."""

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

    def __init__(self, key: IdKey | None, method: str | None, index: int, sent_at: float) -> None:
        self.key = key
        self.method = method
        self.index = index
        self.sent_at = sent_at
        self.received_at: float | None = None
        self.outcome: str | None = None  # "paired" | "missing"
        self.error_code: int | None = None
        self.invalid = False
        self.duplicate = False
        self.batch: Batch | None = None

    @property
    def latency(self) -> float | None:
        if self.received_at is None:
            return None
        return self.received_at - self.sent_at


class Tally:
    """Responses that were classified but belong to no call: unknown, null-id, invalid."""

    __slots__ = ("invalid", "null", "unknown", "unknown_keys", "violations")

    def __init__(self) -> None:
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
        return not (self.unknown or self.null or self.invalid or self.violations)


def _merge(into: dict[str, int] | None, more: dict[str, int] | None) -> dict[str, int] | None:
    if not more:
        return into
    into = dict(into) if into else {}
    for k, v in more.items():
        into[k] = into.get(k, 0) + v
    return into


class Batch:
    """A JSON array sent in one write, or a single request tracked as a batch of one.

    Counters accumulate while the batch is open and are emitted once, at close: one metric
    add per counter per batch keeps the cost off the per-id path.
    """

    __slots__ = (
        "calls",
        "close_reason",
        "closed_at",
        "context",
        "count_mismatch",
        "deadline",
        "diagnosis",
        "duplicates_cross",
        "duplicates_in",
        "expected_nothing",
        "high_index",
        "invalid",
        "invalid_requests",
        "is_batch",
        "late_unknown",
        "missing",
        "notifications",
        "null",
        "open",
        "out_of_order",
        "paired",
        "responses",
        "sent_at",
        "seq",
        "size",
        "unknown",
        "unknown_keys",
        "violations",
    )

    def __init__(
        self,
        seq: int,
        is_batch: bool,
        size: int,
        calls: list[Call],
        sent_at: float,
        context: object = None,
    ) -> None:
        self.seq = seq
        self.is_batch = is_batch
        self.size = size
        self.calls = calls
        self.sent_at = sent_at
        self.context = context
        self.deadline = sent_at
        self.open = True
        self.expected_nothing = False
        self.notifications = 0
        self.paired = 0
        self.responses = 0
        self.unknown = 0
        self.null = 0
        self.missing = 0
        self.late_unknown = 0
        self.duplicates_in = 0
        self.duplicates_cross = 0
        self.high_index = -1
        self.out_of_order = False
        self.count_mismatch = False
        self.unknown_keys: list[IdKey] = []
        self.invalid: dict[str, int] | None = None
        self.invalid_requests: dict[str, int] | None = None
        self.violations: dict[str, int] | None = None
        self.close_reason = ""
        self.closed_at = sent_at
        self.diagnosis = ""

    @property
    def requests(self) -> int:
        return len(self.calls)

    def absorb(self, tally: Tally) -> None:
        """Attribute responses that paired with nothing to this (still open) batch."""
        self.unknown += tally.unknown
        self.null += tally.null
        if tally.unknown_keys and len(self.unknown_keys) < 16:
            self.unknown_keys.extend(tally.unknown_keys[: 16 - len(self.unknown_keys)])
        self.invalid = _merge(self.invalid, tally.invalid)
        self.violations = _merge(self.violations, tally.violations)
